import { isVisibleTo, mayRead, ownersVisibleTo, positionOf } from "../internals.js"
import { errorFields, type Logger } from "../log.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2AMessage, A2ATask } from "../types.js"
import { A2AError, ErrorCode, truncate, type JsonRpcErrorObject } from "./errors.js"
import type { EventRecorder } from "./event-recorder.js"
import { eventQueue, type TaskEvents } from "./events.js"
import type { StoreFollower } from "./follower.js"
import {
  inlinePushConfig,
  parseListTasksQuery,
  parsePushConfigCreate,
  parsePushConfigDelete,
  parsePushConfigList,
  parsePushConfigRef,
  parseSendMessageParams,
  parseTaskIdParams,
  type PushConfigInput,
  type SendMessageParams,
} from "./params.js"
import { PushConfigs, type PushSettings } from "./push-configs.js"
import { RenderedTasks } from "./rendered.js"
import type { StartedTask, TaskRunner } from "./runner.js"
import { isTerminal } from "./states.js"
import { assertResumable, cannotResume, parseLastEventId, replayThenLive, resumePoint, taskStream, type StreamItem } from "./task-streams.js"
import { StreamSlots, type ReleaseSlot } from "./stream-slots.js"
import { answerVersion, codecFor, messageFromWire, negotiateVersion, type WireCodec, type WireVersion } from "./wire.js"

/**
 * JSON-RPC 2.0 over A2A, free of any HTTP framework: hand it the parsed
 * body and the A2A-Version header, get back the response to send (as JSON
 * text), a stream of responses (SSE), or nothing (a notification).
 */

export type JsonRpcId = string | number | null

export type JsonRpcResponse =
  | { jsonrpc: "2.0"; id: JsonRpcId; result: unknown }
  | { jsonrpc: "2.0"; id: JsonRpcId; error: JsonRpcErrorObject }

interface DispatchContext {
  /** The request's logger. */
  log: Logger
  /** The request's `A2A-Version` header. */
  version?: string | string[]
  /**
   * For streaming calls only (so other calls cost nothing): a signal that
   * aborts when the peer goes away or the server closes; the stream stops,
   * the task goes on.
   */
  endSignal?: () => AbortSignal
  /** Who is calling, when the server authenticates: each sees only its own Tasks. */
  principal?: string
  /** The client's address: without authentication, streams are counted per address. */
  address?: string
  /** The request's `Last-Event-ID` header: SubscribeToTask resumes after that event. */
  lastEventId?: string | string[]
}

/** One event of a stream as the binding writes it: the JSON-RPC response, and the SSE `id:` it carries (none for an error). */
export interface StreamFrame {
  id?: number
  response: JsonRpcResponse
}

/** What one call did: the answer and the fields of the request log line. */
export interface DispatchOutcome {
  /** The answer, a JSON-RPC response object as JSON text; absent for a notification or a stream. */
  body?: string
  /** Responses to send as server-sent events, for streaming methods; it ends when the context's signal aborts. */
  stream?: AsyncIterable<StreamFrame>
  /** Aborts when the stream must end at once, unread frames and all: its reader fell too far behind (it resumes with Last-Event-ID). */
  cutOff?: AbortSignal
  method?: string
  taskId?: string
  version?: WireVersion
  /** The error code answered, if any. */
  errorCode?: number
}

interface DispatcherOptions {
  store: TaskStore
  runner: TaskRunner
  events: TaskEvents
  /** Follows tasks running in other processes, for SubscribeToTask. */
  follower: StoreFollower
  /** The open-stream caps; a StreamSlots with the default caps when omitted. */
  streams?: StreamSlots
  /** With authentication: the principal that owns the Tasks saved without an owner; omitted, nobody does. */
  unownedTasksBelongTo?: string
  /** Push notifications, when on (the store has the capability and the host did not turn it off); omitted, the push methods answer -32003. */
  push?: PushSettings
  /** Writes streamed events to the store's event log; resumed streams wait for what it has not written yet. */
  recorder?: EventRecorder
}

/** What a handler works with and may note about its call. */
interface Call {
  id: JsonRpcId
  codec: WireCodec
  log: Logger
  /** Ends the call's stream; asked for only by the streaming methods. */
  endSignal: () => AbortSignal
  principal?: string
  address?: string
  lastEventId?: string | string[]
  taskId?: string
}

/** A handler's answer: a result (or one already in JSON), or a stream of results. */
type Answer = { result: unknown } | { resultJson: string } | { stream: AsyncIterable<StreamItem>; cutOff?: AbortSignal }
type Handler = (params: unknown, call: Call) => Promise<Answer>

/** An inline push config on its way in: stored before the Task's first save. */
interface InlinePush {
  configs: PushConfigs
  config: PushConfigInput
  field: string
}

export class JsonRpcDispatcher {
  private readonly methods: ReadonlyMap<string, Handler>
  private readonly rendered = new RenderedTasks()
  private readonly streams: StreamSlots
  private readonly pushConfigs: PushConfigs | undefined

  constructor(private readonly opts: DispatcherOptions) {
    this.streams = opts.streams ?? new StreamSlots()
    this.pushConfigs = opts.push && new PushConfigs(opts.push)
    const handlers: Record<string, Handler> = {
      SendMessage: (params, call) => this.sendMessage(params, call, false),
      SendStreamingMessage: (params, call) => this.sendMessage(params, call, true),
      GetTask: (params, call) => this.getTask(params, call),
      ListTasks: (params, call) => this.listTasks(params, call),
      CancelTask: (params, call) => this.cancelTask(params, call),
      SubscribeToTask: (params, call) => this.subscribe(params, call),
      GetExtendedAgentCard: async () => {
        throw new A2AError(ErrorCode.UnsupportedOperation, "This agent has no extended agent card; read /.well-known/agent-card.json")
      },
      CreateTaskPushNotificationConfig: (params, call) => this.createPushConfig(params, call),
      GetTaskPushNotificationConfig: (params, call) => this.getPushConfig(params, call),
      ListTaskPushNotificationConfigs: (params, call) => this.listPushConfigs(params, call),
      DeleteTaskPushNotificationConfig: (params, call) => this.deletePushConfig(params, call),
    }
    const aliases: Record<string, string> = {
      "message/send": "SendMessage",
      "message/stream": "SendStreamingMessage",
      "tasks/get": "GetTask",
      "tasks/list": "ListTasks",
      "tasks/cancel": "CancelTask",
      "tasks/resubscribe": "SubscribeToTask",
      "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
      "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
      "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
      "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
      "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
    }
    // A Map, so "constructor" or "__proto__" never find a handler.
    this.methods = new Map<string, Handler>([
      ...Object.entries(handlers),
      ...Object.entries(aliases).map(([alias, name]): [string, Handler] => [alias, handlers[name]]),
    ])
  }

  /** The method names this dispatcher answers. */
  get methodNames(): string[] {
    return [...this.methods.keys()]
  }

  async dispatch(body: unknown, ctx: DispatchContext): Promise<DispatchOutcome> {
    let version: WireVersion
    try {
      version = negotiateVersion(ctx.version)
    } catch (err) {
      return answer(idOf(body), codecFor(answerVersion(ctx.version)), err as A2AError)
    }
    const codec = codecFor(version)
    if (Array.isArray(body)) {
      return answer(null, codec, new A2AError(ErrorCode.InvalidRequest, "Invalid request: JSON-RPC batches are not supported; send one request object per HTTP request"))
    }
    const envelope = checkEnvelope(body)
    if (envelope instanceof A2AError) return answer(idOf(body), codec, envelope)
    const { id, method, params, notification } = envelope
    const shownMethod = truncate(method, 64)

    const handler = this.methods.get(method)
    // A notification gets no answer: any stream it opens is ended at once.
    let ended: AbortSignal | undefined
    const endSignal = notification ? () => AbortSignal.abort() : (ctx.endSignal ?? (() => (ended ??= new AbortController().signal)))
    const call: Call = { id, codec, log: ctx.log, endSignal, principal: ctx.principal, address: ctx.address, lastEventId: ctx.lastEventId }
    let outcome: DispatchOutcome
    try {
      if (!handler) throw new A2AError(ErrorCode.MethodNotFound, `Method not found: ${shownMethod}. This server answers ${this.methodNames.join(", ")}`)
      const result = await handler(params, call)
      if ("stream" in result) {
        // Without an event log no stream can be resumed: its frames carry no ids a peer could send back.
        const stream = responses(id, codec, result.stream, call, this.opts.store.events !== undefined)
        outcome = { stream, ...(result.cutOff && { cutOff: result.cutOff }) }
      }
      else outcome = { body: responseJson(id, "resultJson" in result ? result.resultJson : JSON.stringify(result.result)) }
    } catch (err) {
      outcome = answer(id, codec, this.asA2AError(err, method, call))
    }
    if (notification) {
      delete outcome.body
      delete outcome.stream
      delete outcome.cutOff
    }
    outcome.method = shownMethod
    outcome.taskId = call.taskId
    outcome.version = version
    return outcome
  }

  private async sendMessage(raw: unknown, call: Call, streaming: boolean): Promise<Answer> {
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
  private async startOrResume(message: A2AMessage, call: Call, watch: boolean, inline?: InlinePush): Promise<StartedTask> {
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

  private async startOrResumeWith(message: A2AMessage, call: Call, watch: boolean, beforeSave?: (taskId: string) => Promise<void>): Promise<StartedTask> {
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
      started = await this.opts.runner.start(message, { principal: call.principal, historyOwners: this.ownersVisibleTo(call), watch, beforeSave })
    }
    call.taskId = started.task.id
    return started
  }

  private async getTask(raw: unknown, call: Call): Promise<Answer> {
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
    if (!mayRead(this.ownersVisibleTo(call), answer.owner)) throw A2AError.taskNotFound(id)
    return { resultJson: answer.json }
  }

  private async listTasks(raw: unknown, call: Call): Promise<Answer> {
    const { store } = this.opts
    if (!store.list) throw new A2AError(ErrorCode.UnsupportedOperation, "ListTasks is not supported: this agent's task store cannot list tasks")
    const { query, historyLength } = parseListTasksQuery(raw, call.codec.version)
    const page = await store.list({ ...query, owners: this.ownersVisibleTo(call) })
    return {
      result: {
        tasks: page.tasks.map((task) => call.codec.task(withHistoryLength(task, historyLength))),
        nextPageToken: page.nextPageToken,
        pageSize: page.pageSize,
        totalSize: page.totalSize,
      },
    }
  }

  private async cancelTask(raw: unknown, call: Call): Promise<Answer> {
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
  private async subscribe(raw: unknown, call: Call): Promise<Answer> {
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
        if (task === undefined || !isVisibleTo(task, this.ownersVisibleTo(call))) throw A2AError.taskNotFound(params.id)
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

  private async createPushConfig(raw: unknown, call: Call): Promise<Answer> {
    const configs = this.requirePush()
    const { taskId, config, field } = parsePushConfigCreate(raw, call.codec.version)
    call.taskId = taskId
    await this.read(taskId, call)
    return { result: call.codec.pushConfig(await configs.create(taskId, config, call.codec.version, field)) }
  }

  private async getPushConfig(raw: unknown, call: Call): Promise<Answer> {
    const configs = this.requirePush()
    const ref = parsePushConfigRef(raw, call.codec.version)
    call.taskId = ref.taskId
    await this.read(ref.taskId, call)
    return { result: call.codec.pushConfig(await configs.get(ref)) }
  }

  private async listPushConfigs(raw: unknown, call: Call): Promise<Answer> {
    const configs = this.requirePush()
    const page = parsePushConfigList(raw, call.codec.version)
    call.taskId = page.taskId
    await this.read(page.taskId, call)
    const listed = await configs.list(page)
    return { result: call.codec.pushConfigList(listed.configs, listed.nextPageToken) }
  }

  private async deletePushConfig(raw: unknown, call: Call): Promise<Answer> {
    const configs = this.requirePush()
    const ref = parsePushConfigDelete(raw, call.codec.version)
    call.taskId = ref.taskId
    await this.read(ref.taskId, call)
    await configs.delete(ref)
    return { result: null }
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
  private async withStreamSlot(call: Call, open: () => Promise<{ stream: AsyncIterable<StreamItem>; cutOff?: AbortSignal }>): Promise<Answer> {
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
  private async read(id: string, call: Call): Promise<A2ATask> {
    const task = await this.opts.store.get(id)
    if (task === undefined || !isVisibleTo(task, this.ownersVisibleTo(call))) throw A2AError.taskNotFound(id)
    return task
  }

  /** Whose Tasks the caller may see, read, list, continue and cancel, and have its model read: ownersVisibleTo's rule. */
  private ownersVisibleTo(call: Call): Array<string | null> | undefined {
    return ownersVisibleTo(call.principal, this.opts.unownedTasksBelongTo)
  }

  /** Any failure as the error the peer gets; the unexpected ones are logged in full and answered in general terms. */
  private asA2AError(err: unknown, method: string, call: Call): A2AError {
    if (err instanceof A2AError) return err
    call.log.error({ method, taskId: call.taskId, ...errorFields(err) }, "request failed")
    const what = call.taskId ? ` for task ${truncate(call.taskId)}` : ""
    return new A2AError(ErrorCode.InternalError, `Internal error${what} in ${truncate(method, 64)}: the server could not complete the request; its log has the details`)
  }
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

/**
 * Wraps stream results as JSON-RPC responses with their event ids; a
 * failure mid-stream becomes an error response that ends it (an A2AError
 * as it is, such as events no longer kept; anything else in general terms).
 */
async function* responses(id: JsonRpcId, codec: WireCodec, stream: AsyncIterable<StreamItem>, call: Call, withIds: boolean): AsyncIterable<StreamFrame> {
  try {
    // No object spread here: it is per event, and slow on Node 20 (see lib/objects.ts).
    for await (const item of stream) {
      const response: JsonRpcResponse = { jsonrpc: "2.0", id, result: item.result }
      yield item.id === undefined || !withIds ? { response } : { id: item.id, response }
    }
  } catch (err) {
    if (err instanceof A2AError) {
      yield { response: { jsonrpc: "2.0", id, error: codec.error(err) } }
      return
    }
    call.log.error({ taskId: call.taskId, ...errorFields(err) }, "stream failed")
    yield { response: { jsonrpc: "2.0", id, error: codec.error(new A2AError(ErrorCode.InternalError, "Internal error: the stream failed; its log has the details")) } }
  }
}

interface Envelope {
  id: JsonRpcId
  method: string
  params: unknown
  notification: boolean
}

function checkEnvelope(body: unknown): Envelope | A2AError {
  const invalid = (why: string) => new A2AError(ErrorCode.InvalidRequest, `Invalid request: ${why}`)
  if (body === null || typeof body !== "object") return invalid("the body must be a JSON-RPC 2.0 request object")
  const request = body as Record<string, unknown>
  if (request.jsonrpc !== "2.0") return invalid('"jsonrpc" must be "2.0"')
  if ("id" in request && !isValidId(request.id)) return invalid('"id" must be a string (up to 1024 characters), a finite number or null')
  if (typeof request.method !== "string" || request.method.length === 0) return invalid('"method" must be a non-empty string')
  if ("params" in request && (request.params === null || typeof request.params !== "object" || Array.isArray(request.params))) {
    return invalid('"params" must be an object')
  }
  return { id: (request.id as JsonRpcId) ?? null, method: request.method, params: request.params ?? {}, notification: !("id" in request) }
}

function isValidId(id: unknown): id is JsonRpcId {
  return id === null || (typeof id === "number" && Number.isFinite(id)) || (typeof id === "string" && id.length <= 1024)
}

function idOf(body: unknown): JsonRpcId {
  const id = body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>).id : null
  return isValidId(id) ? id : null
}

function answer(id: JsonRpcId, codec: WireCodec, error: A2AError): DispatchOutcome {
  const response: JsonRpcResponse = { jsonrpc: "2.0", id, error: codec.error(error) }
  return { body: JSON.stringify(response), errorCode: error.code }
}

/** A JSON-RPC response around a result already in JSON (what JSON.stringify of the response object would give). */
function responseJson(id: JsonRpcId, resultJson: string): string {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${resultJson}}`
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


