import { isInTenant, isVisibleTo, mayRead, ownersVisibleTo, positionOf } from "../internals.js"
import { errorFields, type Logger } from "../log.js"
import type { HeaderLookup } from "../observe/propagation.js"
import { tracesOnly, type Binding, type RequestFailure, type RequestObservation, type Telemetry } from "../observe/telemetry.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2AMessage, A2ATask, AgentCard } from "../types.js"
import { A2AError, BINDING_ERRORS, ErrorCode, refusalReason, truncate } from "./errors.js"
import type { EventRecorder } from "../streams/event-recorder.js"
import { eventQueue, type TaskEvents } from "../streams/events.js"
import { noExtendedCard } from "./extended-card.js"
import type { StoreFollower } from "../streams/follower.js"
import {
  inlinePushConfig,
  parseListTasksQuery,
  parsePushConfigCreate,
  parsePushConfigDelete,
  parsePushConfigList,
  parsePushConfigRef,
  parseSendMessageParams,
  parseTaskIdParams,
  parseTenant,
  type PushConfigInput,
  type SendMessageParams,
} from "./params.js"
import { withJsonNames } from "./proto-names.js"
import { PushConfigs, type PushSettings } from "./push-configs.js"
import { RenderedTasks } from "./rendered.js"
import type { StartedTask, TaskRunner } from "./runner.js"
import { isTerminal } from "./states.js"
import { assertResumable, cannotResume, parseLastEventId, replayThenLive, resumePoint, taskStream, type StreamItem } from "../streams/task-streams.js"
import { StreamSlots, type ReleaseSlot } from "../streams/stream-slots.js"
import { codecFor, messageFromWire, type WireCodec, type WireVersion } from "./wire.js"

/**
 * The A2A operations, free of any binding: JSON-RPC, HTTP+JSON and gRPC
 * each parse a request into an operation's name and its params (the wire
 * shapes of the call's version), run it here over a call context, and
 * render what it answers. Auth, ownership, limits, streams and errors are
 * decided here once, so every binding behaves the same.
 */

/** Every operation, by its A2A 1.0 name. */
export const OPERATIONS = [
  "SendMessage",
  "SendStreamingMessage",
  "GetTask",
  "ListTasks",
  "CancelTask",
  "SubscribeToTask",
  "GetExtendedAgentCard",
  "CreateTaskPushNotificationConfig",
  "GetTaskPushNotificationConfig",
  "ListTaskPushNotificationConfigs",
  "DeleteTaskPushNotificationConfig",
] as const

export type OperationName = (typeof OPERATIONS)[number]

/** Who calls, in which version, and how the call ends: what a binding knows of a request. */
export interface CallContext {
  /** The binding the call came in on: its spans and metrics say so. */
  binding: Binding
  /** The wire version the binding negotiated (the A2A-Version header, or the binding's own). */
  version: WireVersion
  /** Reads the request's `traceparent` / `tracestate` (HTTP headers, gRPC metadata): the peer's trace goes on here. */
  traceHeaders?: HeaderLookup
  /** The request's logger. */
  log: Logger
  /**
   * For streaming calls only (so other calls cost nothing): a signal that
   * aborts when the peer goes away or the server closes; the stream stops,
   * the task goes on. Omitted: a stream runs until it ends.
   */
  endSignal?: () => AbortSignal
  /** Who is calling, when the server authenticates: each sees only its own Tasks. */
  principal?: string
  /** The client's address: without authentication, streams are counted per address. */
  address?: string
  /** The request's `Last-Event-ID`: SubscribeToTask resumes after that event. */
  lastEventId?: string | string[]
  /** The endpoint URL the peer reached, for the card GetExtendedAgentCard answers; asked for by that operation only. Omitted: the server's own. */
  cardUrl?: () => string
}

/**
 * The extended agent card for an authenticated `principal` (undefined:
 * none), in `version`'s form, advertising `cardUrl` (undefined: the
 * server's own URL). Throws an A2AError when it cannot be given.
 */
export type ExtendedCardOf = (principal: string | undefined, version: WireVersion, cardUrl: string | undefined) => Promise<AgentCard>

/** An operation's answer: a result (or one already in JSON), or a stream of results. */
export type OperationResult = { result: unknown } | { resultJson: string } | { stream: AsyncIterable<StreamItem>; cutOff?: AbortSignal }

/** What a call did, for the binding's answer and its request log line. */
export interface CallOutcome {
  /** The answer; absent when the call failed. */
  answer?: OperationResult
  /** The failure, as the peer gets it (an unexpected one logged in full and answered in general terms). */
  error?: A2AError
  /** The Task the call was about, when it named or created one. */
  taskId?: string
}

export interface OperationsOptions {
  store: TaskStore
  runner: TaskRunner
  events: TaskEvents
  /** Follows tasks running in other processes, for SubscribeToTask. */
  follower: StoreFollower
  /** The open-stream caps; a StreamSlots with the default caps when omitted. */
  streams?: StreamSlots
  /** With authentication: the principal that owns the Tasks saved without an owner; omitted, nobody does. */
  unownedTasksBelongTo?: string
  /** Push notifications, when on (the store has the capability and the host did not turn it off); omitted, the push operations answer -32003. */
  push?: PushSettings
  /** Writes streamed events to the store's event log; resumed streams wait for what it has not written yet. */
  recorder?: EventRecorder
  /** GetExtendedAgentCard's card, when the host configured one; omitted, it answers -32004. */
  extendedCard?: ExtendedCardOf
  /** Hears each call (its span, its counts); omitted, spans only. */
  telemetry?: Telemetry
}

/** A call on its way through an operation: its context, its version's codec, and the Task it turned out to be about. */
interface OperationCall {
  codec: WireCodec
  log: Logger
  endSignal: () => AbortSignal
  principal?: string
  address?: string
  lastEventId?: string | string[]
  cardUrl?: () => string
  /** The tenant the request names (null: none): a Task is reached only under its own. */
  tenant: string | null
  taskId?: string
}

type Operation = (params: unknown, call: OperationCall) => Promise<OperationResult>

/** An inline push config on its way in: stored before the Task's first save. */
interface InlinePush {
  configs: PushConfigs
  config: PushConfigInput
  field: string
}

export class A2AOperations {
  private readonly operations: ReadonlyMap<string, Operation>
  private readonly rendered = new RenderedTasks()
  private readonly streams: StreamSlots
  private readonly pushConfigs: PushConfigs | undefined
  private readonly telemetry: Telemetry

  constructor(private readonly opts: OperationsOptions) {
    this.telemetry = opts.telemetry ?? tracesOnly
    this.streams = opts.streams ?? new StreamSlots()
    this.pushConfigs = opts.push && new PushConfigs(opts.push)
    const operations: Record<OperationName, Operation> = {
      SendMessage: (params, call) => this.sendMessage(params, call, false),
      SendStreamingMessage: (params, call) => this.sendMessage(params, call, true),
      GetTask: (params, call) => this.getTask(params, call),
      ListTasks: (params, call) => this.listTasks(params, call),
      CancelTask: (params, call) => this.cancelTask(params, call),
      SubscribeToTask: (params, call) => this.subscribe(params, call),
      GetExtendedAgentCard: (_params, call) => this.extendedCard(call),
      CreateTaskPushNotificationConfig: (params, call) => this.createPushConfig(params, call),
      GetTaskPushNotificationConfig: (params, call) => this.getPushConfig(params, call),
      ListTaskPushNotificationConfigs: (params, call) => this.listPushConfigs(params, call),
      DeleteTaskPushNotificationConfig: (params, call) => this.deletePushConfig(params, call),
    }
    // A Map, so "constructor" or "__proto__" never find an operation.
    this.operations = new Map(Object.entries(operations))
  }

  /**
   * A request refused before it reached an operation (authentication, a body
   * limit or type, unparseable JSON, an unknown method or version): counted
   * with the requests, by the refusal's reason (`refusalReason`, or a gRPC status name).
   */
  refused(binding: Binding, refusal: A2AError | string, httpStatus?: number): void {
    this.telemetry.refused(binding, typeof refusal === "string" ? refusal : refusalReason(refusal, httpStatus))
  }

  /** Whether `name` is an operation's name. */
  has(name: string): name is OperationName {
    return this.operations.has(name)
  }

  /** Whether the store keeps an event log: streams carry event ids a peer can resume from only then. */
  get resumable(): boolean {
    return this.opts.store.events !== undefined
  }

  /** Streams open now, on every binding. */
  get openStreams(): number {
    return this.streams.open()
  }

  /**
   * Runs one operation with `params` in the wire shape of `ctx.version`,
   * observed (a span continuing the peer's trace, the request metrics).
   * Never throws: a failure comes back as the outcome's error.
   */
  async run(name: OperationName, params: unknown, ctx: CallContext): Promise<CallOutcome> {
    const observed = this.telemetry.request(name, ctx.binding, ctx.version, ctx.traceHeaders)
    const outcome = await observed.within(() => this.runObserved(name, params, ctx, observed))
    const answer = outcome.answer
    observed.answered(outcome.taskId, outcome.error && observedFailure(outcome.error), answer !== undefined && "stream" in answer)
    return outcome
  }

  private async runObserved(name: OperationName, params: unknown, ctx: CallContext, observed: RequestObservation): Promise<CallOutcome> {
    let ended: AbortSignal | undefined
    const call: OperationCall = {
      codec: codecFor(ctx.version),
      log: ctx.log,
      endSignal: ctx.endSignal ?? (() => (ended ??= new AbortController().signal)),
      principal: ctx.principal,
      address: ctx.address,
      lastEventId: ctx.lastEventId,
      cardUrl: ctx.cardUrl,
      tenant: null,
    }
    try {
      const named = withJsonNames(params) // ProtoJSON: message_id is read as messageId, on every binding
      call.tenant = parseTenant(named, ctx.version)
      const answer = await this.operations.get(name)!(named, call)
      if ("stream" in answer) answer.stream = failingAsA2AErrors(answer.stream, call, observed)
      return { answer, taskId: call.taskId }
    } catch (err) {
      return { error: this.asA2AError(err, name, call), taskId: call.taskId }
    }
  }

  private async sendMessage(raw: unknown, call: OperationCall, streaming: boolean): Promise<OperationResult> {
    const params = parseSendMessageParams(raw, call.codec.version)
    checkOutputModes(params)
    const inline = await this.inlinePush(params)
    const message = messageFromWire(params.message)
    if (streaming) {
      return this.withStreamSlot(call, async () => {
        const started = await this.startOrResume(message, call, true, inline)
        const events = closedOnAbort(started.events!, call.endSignal())
        return { stream: taskStream(started.task, positionOf(started.task), events, call.codec), cutOff: events.overflow }
      })
    }
    const started = await this.startOrResume(message, call, false, inline)
    const config = params.configuration ?? {}
    // 0.3 answers at once unless asked to block; 1.0 blocks unless asked to return at once.
    const wait = call.codec.version === "0.3" ? config.blocking === true : config.returnImmediately !== true
    const task = wait ? await started.settled : started.task
    return { result: call.codec.sendResult(withHistoryLength(task, config.historyLength)) }
  }

  /** The inline push config of a send, its URL checked (a refused one starts no Task); -32003 when push is off. */
  private async inlinePush(params: SendMessageParams): Promise<InlinePush | undefined> {
    const inline = inlinePushConfig(params)
    if (inline === undefined) return undefined
    const configs = this.requirePush()
    await configs.checkUrl(inline.config, inline.field)
    return { configs, ...inline }
  }

  /** A new Task for the message, or the input-required Task it answers continued; an inline push config is stored before the Task's save. */
  private async startOrResume(message: A2AMessage, call: OperationCall, watch: boolean, inline?: InlinePush): Promise<StartedTask> {
    let undo: (() => Promise<void>) | undefined
    const beforeSave =
      inline &&
      (async (taskId: string) => {
        const record = inline.configs.record(taskId, inline.config, call.codec.version)
        const previous = await inline.configs.find(taskId, record.id)
        await inline.configs.put(record, inline.field)
        undo = () => (previous === undefined ? inline.configs.delete(record) : inline.configs.restore(previous))
      })
    try {
      return await this.startOrResumeWith(message, call, watch, beforeSave)
    } catch (err) {
      // The Task's save did not land: the config it brought goes (one it replaced comes back).
      await undo?.().catch((undoErr: unknown) => call.log.warn({ taskId: call.taskId, ...errorFields(undoErr) }, "push config of a failed send not removed"))
      throw err
    }
  }

  private async startOrResumeWith(message: A2AMessage, call: OperationCall, watch: boolean, beforeSave?: (taskId: string) => Promise<void>): Promise<StartedTask> {
    let started: StartedTask
    if (message.taskId !== undefined) {
      call.taskId = message.taskId
      const existing = await this.read(message.taskId, call)
      if (message.contextId !== undefined && existing.contextId !== undefined && message.contextId !== existing.contextId) {
        throw A2AError.invalidParams("params.message.contextId", `does not match task ${truncate(existing.id)}'s context ${truncate(existing.contextId)}`)
      }
      if (existing.status.state !== "input-required") {
        throw new A2AError(
          ErrorCode.UnsupportedOperation,
          `Task ${truncate(existing.id)} is ${existing.status.state} and takes no further messages; send a message without taskId to start a new task`,
        )
      }
      started = await this.opts.runner.resume(existing, message, { principal: call.principal, historyOwners: this.ownersVisibleTo(call), watch, beforeSave })
    } else {
      started = await this.opts.runner.start(message, { principal: call.principal, tenant: call.tenant, historyOwners: this.ownersVisibleTo(call), watch, beforeSave })
    }
    call.taskId = started.task.id
    return started
  }

  private async getTask(raw: unknown, call: OperationCall): Promise<OperationResult> {
    const { id, historyLength } = parseTaskIdParams(raw)
    call.taskId = id
    const render = (task: A2ATask) => call.codec.task(withHistoryLength(task, historyLength))
    const { store } = this.opts
    if (store.getText === undefined) return { result: render(await this.read(id, call)) }
    // A store that holds text: the answer rendered from the same text last time serves again.
    const text = await store.getText(id)
    if (text === undefined) {
      this.rendered.forget(id)
      throw A2AError.taskNotFound(id)
    }
    const answer = this.rendered.answer(id, text, `${call.codec.version} ${historyLength ?? ""}`, render)
    if (!mayRead(this.ownersVisibleTo(call), answer.owner) || answer.tenant !== call.tenant) throw A2AError.taskNotFound(id)
    return { resultJson: answer.json }
  }

  private async listTasks(raw: unknown, call: OperationCall): Promise<OperationResult> {
    const { store } = this.opts
    if (!store.list) throw new A2AError(ErrorCode.UnsupportedOperation, "ListTasks is not supported: this agent's task store cannot list tasks")
    const { query, historyLength } = parseListTasksQuery(raw, call.codec.version)
    const page = await store.list({ ...query, owners: this.ownersVisibleTo(call), tenant: call.tenant })
    return {
      result: {
        tasks: page.tasks.map((task) => call.codec.task(withHistoryLength(task, historyLength))),
        nextPageToken: page.nextPageToken,
        pageSize: page.pageSize,
        totalSize: page.totalSize,
      },
    }
  }

  private async cancelTask(raw: unknown, call: OperationCall): Promise<OperationResult> {
    const params = parseTaskIdParams(raw)
    call.taskId = params.id
    await this.read(params.id, call) // another principal's task is "not found"
    return { result: call.codec.task(await this.opts.runner.cancel(params.id)) }
  }

  /**
   * The Task, then its events as they come. With `Last-Event-ID`, the
   * events after that one are replayed first, from the store's event log
   * (a Task that ended meanwhile: up to its final event, then the stream
   * ends). A Task running here streams from this process (its state taken
   * in the same tick as the subscription, so nothing falls between); one
   * running elsewhere, from the store.
   */
  private async subscribe(raw: unknown, call: OperationCall): Promise<OperationResult> {
    const params = parseTaskIdParams(raw)
    call.taskId = params.id
    const after = parseLastEventId(call.lastEventId)
    const log = this.opts.store.events
    if (after !== undefined && log === undefined) throw cannotResume()
    return this.withStreamSlot(call, async () => {
      const live = closedOnAbort(eventQueue(this.opts.events, params.id), call.endSignal())
      try {
        // Taken in the same tick as the subscription (no await between): the exact point the stream continues from.
        const current = this.opts.runner.current(params.id)
        const task = current?.task ?? (await this.opts.store.get(params.id))
        if (task === undefined || !this.reaches(task, call)) throw A2AError.taskNotFound(params.id)
        if (after === undefined && isTerminal(task.status.state)) {
          throw new A2AError(ErrorCode.UnsupportedOperation, `Task ${truncate(task.id)} is already ${task.status.state}; read it with GetTask`)
        }
        // A stream follows it from here: its events go to the log from now on, so this stream can be resumed.
        if (current !== undefined) this.opts.runner.logEventsOf(task.id)
        const position = current?.position ?? (after === undefined ? positionOf(task) : await resumePoint(log!, task, after))
        if (after !== undefined && after > position) {
          throw A2AError.invalidParams("Last-Event-ID", `${after} is past the last event of task ${truncate(task.id)} (${position}); subscribe without Last-Event-ID`)
        }
        // Events to replay after the first frame; resuming from the last event itself replays none.
        const replays = after !== undefined && after < position
        if (replays) await assertResumable(log!, this.opts.recorder, task.id, after, current === undefined)
        const firstId = after ?? position
        if (current !== undefined) {
          const events = replays ? replayThenLive(log!, this.opts.recorder, task.id, after, position, live) : live
          return { stream: taskStream(task, firstId, events, call.codec, replays), cutOff: live.overflow }
        }
        live.close()
        return { stream: taskStream(task, firstId, this.opts.follower.follow(task, call.endSignal(), after), call.codec, replays) }
      } catch (err) {
        live.close()
        throw err
      }
    })
  }

  private async createPushConfig(raw: unknown, call: OperationCall): Promise<OperationResult> {
    const configs = this.requirePush()
    const { taskId, config, field } = parsePushConfigCreate(raw, call.codec.version)
    call.taskId = taskId
    await this.read(taskId, call)
    return { result: call.codec.pushConfig(await configs.create(taskId, config, call.codec.version, field)) }
  }

  private async getPushConfig(raw: unknown, call: OperationCall): Promise<OperationResult> {
    const configs = this.requirePush()
    const ref = parsePushConfigRef(raw, call.codec.version)
    call.taskId = ref.taskId
    await this.read(ref.taskId, call)
    return { result: call.codec.pushConfig(await configs.get(ref)) }
  }

  private async listPushConfigs(raw: unknown, call: OperationCall): Promise<OperationResult> {
    const configs = this.requirePush()
    const page = parsePushConfigList(raw, call.codec.version)
    call.taskId = page.taskId
    await this.read(page.taskId, call)
    const listed = await configs.list(page)
    return { result: call.codec.pushConfigList(listed.configs, listed.nextPageToken) }
  }

  private async deletePushConfig(raw: unknown, call: OperationCall): Promise<OperationResult> {
    const configs = this.requirePush()
    const ref = parsePushConfigDelete(raw, call.codec.version)
    call.taskId = ref.taskId
    await this.read(ref.taskId, call)
    await configs.delete(ref)
    return { result: null }
  }

  /** The extended card for the caller; -32004 when the host configured none. */
  private async extendedCard(call: OperationCall): Promise<OperationResult> {
    const cardOf = this.opts.extendedCard
    if (cardOf === undefined) throw noExtendedCard()
    return { result: await cardOf(call.principal, call.codec.version, call.cardUrl?.()) }
  }

  /** The push operations, or -32003 when push is off (a store without the capability, or `push: false`). */
  private requirePush(): PushConfigs {
    if (this.pushConfigs === undefined) {
      throw new A2AError(ErrorCode.PushNotificationNotSupported, "Push notifications are not supported by this agent; poll GetTask or stream with SendStreamingMessage")
    }
    return this.pushConfigs
  }

  /**
   * Opens a stream in a slot of the caller's: the slot is taken before `open` creates anything (a refused
   * stream leaves no Task), given back if `open` fails, and otherwise held until the stream ends or its
   * end signal aborts (peer gone, server closing), whichever comes first.
   */
  private async withStreamSlot(call: OperationCall, open: () => Promise<{ stream: AsyncIterable<StreamItem>; cutOff?: AbortSignal }>): Promise<OperationResult> {
    const release = this.streams.reserve({ principal: call.principal, address: call.address })
    let opened: { stream: AsyncIterable<StreamItem>; cutOff?: AbortSignal }
    try {
      opened = await open()
    } catch (err) {
      release()
      throw err
    }
    const ended = call.endSignal()
    if (ended.aborted) release()
    else ended.addEventListener("abort", release, { once: true })
    return { stream: releasedAtEnd(opened.stream, release), ...(opened.cutOff && { cutOff: opened.cutOff }) }
  }

  /** The Task, if it exists and the caller may see it; "not found" otherwise, so ids of others' Tasks reveal nothing. */
  private async read(id: string, call: OperationCall): Promise<A2ATask> {
    const task = await this.opts.store.get(id)
    if (task === undefined || !this.reaches(task, call)) throw A2AError.taskNotFound(id)
    return task
  }

  /** Whether the call may reach the Task: the caller may see its owner's Tasks, and it names the Task's tenant. */
  private reaches(task: A2ATask, call: OperationCall): boolean {
    return isVisibleTo(task, this.ownersVisibleTo(call)) && isInTenant(task, call.tenant)
  }

  /** Whose Tasks the caller may see, read, list, continue and cancel, and have its model read: ownersVisibleTo's rule. */
  private ownersVisibleTo(call: OperationCall): Array<string | null> | undefined {
    return ownersVisibleTo(call.principal, this.opts.unownedTasksBelongTo)
  }

  /** Any failure as the error the peer gets; the unexpected ones are logged in full and answered in general terms. */
  private asA2AError(err: unknown, method: string, call: OperationCall): A2AError {
    if (err instanceof A2AError) return err
    call.log.error({ method, taskId: call.taskId, ...errorFields(err) }, "request failed")
    const what = call.taskId ? ` for task ${truncate(call.taskId)}` : ""
    return new A2AError(ErrorCode.InternalError, `Internal error${what} in ${truncate(method, 64)}: the server could not complete the request; its log has the details`)
  }
}

/**
 * The stream as it is, ending the request's span when it ends, except that a failure mid-stream ends it with an
 * A2AError: one as it is (such as events no longer kept), anything else
 * logged in full and given in general terms.
 */
async function* failingAsA2AErrors(stream: AsyncIterable<StreamItem>, call: OperationCall, observed: RequestObservation): AsyncIterable<StreamItem> {
  let failure: A2AError | undefined
  try {
    yield* stream
  } catch (err) {
    if (err instanceof A2AError) throw (failure = err)
    call.log.error({ taskId: call.taskId, ...errorFields(err) }, "stream failed")
    throw (failure = new A2AError(ErrorCode.InternalError, "Internal error: the stream failed; its log has the details"))
  } finally {
    // The request's span lasts as long as its stream, however it ends (a peer gone ends it by return).
    observed.streamEnded(failure && observedFailure(failure))
  }
}

/** An error as the request's span and metrics say it: its reason, and whether it is the server's own fault (a 5xx). */
function observedFailure(error: A2AError): RequestFailure {
  const { reason, http } = BINDING_ERRORS[error.code]
  return { reason, serverFault: http >= 500, message: error.message }
}

/** A subscription that ends when the signal aborts. */
function closedOnAbort<T extends { close(): void }>(events: T, signal: AbortSignal): T {
  if (signal.aborted) events.close()
  else signal.addEventListener("abort", () => events.close(), { once: true })
  return events
}

/** The stream as it is, giving its slot back when it ends, however it ends. */
async function* releasedAtEnd<T>(stream: AsyncIterable<T>, release: ReleaseSlot): AsyncIterable<T> {
  try {
    yield* stream
  } finally {
    release()
  }
}

function withHistoryLength(task: A2ATask, historyLength: number | undefined): A2ATask {
  if (historyLength === undefined || task.history === undefined || task.history.length <= historyLength) return task
  return { ...task, history: historyLength === 0 ? [] : task.history.slice(-historyLength) }
}

/** The agent answers in text; a peer that accepts no text form cannot use it. */
function checkOutputModes(params: SendMessageParams): void {
  const modes = params.configuration?.acceptedOutputModes
  if (!modes || modes.length === 0) return
  if (modes.some((mode) => /^(text\/[\w.+-]+|text\/\*|\*\/\*|text)$/i.test(mode.trim()))) return
  throw new A2AError(ErrorCode.ContentTypeNotSupported, `This agent answers in text/plain, which acceptedOutputModes (${modes.slice(0, 5).join(", ")}) does not include`)
}


