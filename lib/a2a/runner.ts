import { randomUUID } from "node:crypto"
import { redactCredentials } from "../redact.js"
import { errorFields } from "../log.js"
import { StoreFullError } from "../stores/store-full.js"
import { TaskConflictError } from "../stores/task-store.js"
import type { A2AArtifact, A2AMessage, A2APart, A2ATask, TaskState } from "../types.js"
import { isFinalForNow, isTerminal } from "./states.js"
import { agentMessage, earlierMessages } from "./conversation.js"
import type { AgentFunction } from "./agent.js"
import { agentContext, readOutcome, type RunChannel } from "./agent-context.js"
import { toolLoopAgent } from "./tool-loop-agent.js"
import { A2AError, ErrorCode, truncate } from "./errors.js"
import { artifactEvent, eventQueue, statusEvent, type PositionedEvent, type TaskEvent } from "../streams/events.js"
import { ProgressSaves } from "./progress-saves.js"
import { StreamedAnswer } from "./streamed-answer.js"
import { DEFAULT_PROGRESS_SAVE_MS, now, type CurrentTask, type PendingFinalSave, type Running, type StartedTask, type StartOptions, type TaskRunnerOptions } from "./run-record.js"
export { DEFAULT_PROGRESS_SAVE_MS, type CurrentTask, type StartedTask } from "./run-record.js"
import { DEFAULT_MAX_TASK_BYTES, jsonBytes, jsonBytesAtMost, jsonBytesAtMostOf } from "./task-size.js"
import { currentRunner, internalsOf, ownersVisibleTo, positionOf, retireRunner, tenantOf, withInternals, withPosition, type RunnerId } from "../internals.js"
import { copyWith } from "../objects.js"
import { MAX_TIMER_MS } from "../duration.js"
import type { SaveTransition } from "./transitions.js"
import { tracesOnly, type Telemetry } from "../observe/telemetry.js"

/** A run's status saves before its first (most runs never save one): nothing to wait for, so no await. */
const NO_WRITES: Promise<void> = Promise.resolve()

/** How many earlier messages of the same context reach the model. */
const CONTEXT_MESSAGES = 50

/** How long stop() waits for aborted work to end before it saves those Tasks failed itself. */
export const ABORT_WAIT_MS = 1000

/** Tries of a final save, the first included: then 0.5 s, 1 s, 2 s … later, about a minute in all. */
const FINAL_SAVE_ATTEMPTS = 8

/** What a final state adds besides the answer's text (twice: in history, and as the artifact or status message): ids, roles, kinds. */
const FINAL_STATE_MARGIN_BYTES = 2048
/** A failure's reason is cut to this many characters in the Task's status message (the log has it whole). */
const MAX_REASON_CHARS = 2000



/**
 * The task lifecycle: a message becomes a `submitted` Task, then in the
 * background `working`, then `completed` (the answer as an artifact),
 * `input-required` (the model's question), `failed` (the error as the
 * status message) or `canceled`. Exactly one save per state transition; a
 * failing model or store is logged and never escapes.
 */
export class TaskRunner {
  /** Every task of this process not yet settled: going, or waiting for a slot. */
  private readonly running = new Map<string, Running>()
  private readonly queue: Running[] = []
  private going = 0
  private accepting = true
  /** Set once stop() has drained: a final save that fails now is not retried. */
  private stopped = false
  private readonly pendingFinalSaves = new Set<PendingFinalSave>()
  /** This process, written on the Tasks it runs: this host, pid and an instance id of this runner's own. */
  readonly self: RunnerId = currentRunner()
  private readonly maxRunning: number
  private readonly maxQueued: number
  private readonly maxTaskBytes: number
  /** The one way a state change is saved: every save below goes through it. */
  private readonly save: SaveTransition
  private readonly progressSaveMs: number
  private readonly telemetry: Telemetry
  /** What answers each Task. */
  private readonly agent: AgentFunction

  constructor(private readonly opts: TaskRunnerOptions) {
    this.telemetry = opts.telemetry ?? tracesOnly
    if (opts.agent !== undefined) this.agent = opts.agent
    else if (opts.client !== undefined) this.agent = toolLoopAgent(opts.client, opts.toolkit, this.telemetry)
    else throw new TypeError("TaskRunner: give an agent, or a client (and toolkit) for the built-in tool-calling loop")
    this.save = opts.saveTransition ?? ((task) => opts.store.save(task))
    this.progressSaveMs = opts.progressSaveMs ?? DEFAULT_PROGRESS_SAVE_MS
    this.maxRunning = opts.maxRunning ?? 32
    this.maxQueued = opts.maxQueued ?? 1000
    this.maxTaskBytes = opts.maxTaskBytes ?? DEFAULT_MAX_TASK_BYTES
  }

  /** Tasks running in this process, and those waiting for a slot. */
  load(): { running: number; queued: number } {
    return { running: this.going, queued: this.queue.length }
  }

  /** True while this process holds the task (going or queued): its events are published here. */
  isRunning(id: string): boolean {
    return this.running.has(id)
  }

  /**
   * A Task running here as it stands now (the answer streamed so far as its
   * artifact) and the position of its last event. Taken in the same tick as
   * a subscription to its events, it is the exact point that subscription
   * continues from.
   */
  current(id: string): CurrentTask | undefined {
    const record = this.running.get(id)
    return record === undefined ? undefined : { task: this.withAnswerSoFar(record), position: record.position }
  }

  /** A stream follows the Task from now on: its events go to the event log, so the stream can be resumed. */
  logEventsOf(id: string): void {
    const record = this.running.get(id)
    if (record !== undefined && this.opts.recorder !== undefined) record.logged = true
  }

  /** Saves a new `submitted` Task for the message and starts fulfilling it (or queues it). */
  async start(incoming: A2AMessage, opts: StartOptions = {}): Promise<StartedTask> {
    this.assertCanTake()
    const id = randomUUID()
    const contextId = incoming.contextId ?? randomUUID()
    const message = this.stamp(incoming, id, contextId)
    const fresh: A2ATask = { id, contextId, kind: "task", status: { state: "submitted", timestamp: now() }, history: [message] }
    // Its first event, the Task's creation, is position 1 of its log.
    const task = withInternals(fresh, { principal: opts.principal, ...(typeof opts.tenant === "string" && { tenant: opts.tenant }), runner: this.self, events: 1 })
    const bytes = this.bytesOf(task)
    if (bytes > this.maxTaskBytes) {
      throw this.tooLarge(`params.message makes a Task of ${bytes} bytes`, "send a smaller message, or split it over several tasks")
    }
    await opts.beforeSave?.(id)
    try {
      await this.save(task)
    } catch (err) {
      if (err instanceof StoreFullError) throw this.storeFull(err, opts.principal)
      throw err
    }
    this.logTransition(task)
    // A new context has no earlier turns to look up.
    const started = this.launch(task, bytes, opts, incoming.contextId !== undefined)
    this.toLog(this.running.get(id), { position: 1, event: statusEvent(task) })
    return started
  }

  /**
   * Continues an `input-required` Task with the peer's answer: saved
   * `submitted` with the message before it runs (or waits for a slot), as a
   * new Task is, so the follow-up is durable once the peer has its answer and
   * a full store refuses it as it refuses a new Task.
   */
  async resume(task: A2ATask, incoming: A2AMessage, opts: StartOptions = {}): Promise<StartedTask> {
    this.assertCanTake()
    if (this.running.has(task.id)) throw new A2AError(ErrorCode.UnsupportedOperation, `Task ${truncate(task.id)} is already running`)
    const message = this.stamp(incoming, task.id, task.contextId)
    let resumed = withInternals(
      { ...task, status: { state: "submitted", timestamp: now() }, history: [...(task.history ?? []), message] },
      // An unowned Task continued by the principal it was given to (auth.unownedTasksBelongTo) becomes that principal's.
      { ...internalsOf(task), principal: internalsOf(task).principal ?? opts.principal, runner: this.self },
    )
    const bytes = this.bytesOf(resumed)
    if (bytes > this.maxTaskBytes) {
      throw this.tooLarge(
        `params.message would grow task ${truncate(task.id)} to ${bytes} bytes`,
        `start a new task instead (no taskId${task.contextId === undefined ? "" : `, contextId ${truncate(task.contextId)} to stay in its context`})`,
      )
    }
    // Held while the save is awaited, so a second follow-up meanwhile is told the Task is already running.
    const record = this.register(resumed, bytes, opts, true)
    let position: number
    try {
      // The follow-up is the Task's next event (after any another server logged past its last save).
      position = (await this.lastPosition(task)) + 1
      // Canceled while that was read: the cancel's save stands, and the follow-up is refused like any to a finished Task.
      if (record.finished) throw new TaskConflictError(task.id, record.task)
      record.task = resumed = withPosition(resumed, position)
      record.position = position
      await opts.beforeSave?.(task.id)
      await this.save(resumed)
    } catch (err) {
      this.running.delete(task.id)
      if (err instanceof StoreFullError) throw this.storeFull(err, opts.principal)
      if (err instanceof TaskConflictError) {
        throw new A2AError(ErrorCode.UnsupportedOperation, `Task ${truncate(task.id)} is ${err.stored.status.state} and takes no further messages; send a message without taskId to start a new task`)
      }
      throw err
    }
    this.logTransition(resumed)
    const started = this.schedule(record, opts)
    this.toLog(record, { position, event: statusEvent(resumed) })
    return started
  }

  /**
   * A Task's size for the limit: a bound from a walk when that is within
   * maxTaskBytes (the exact size is then too), else the exact size. The
   * later checks against the size treat it as a bound, and measure exactly
   * when it is close.
   */
  private bytesOf(task: A2ATask): number {
    const bound = jsonBytesAtMostOf(task, this.maxTaskBytes)
    return bound <= this.maxTaskBytes ? bound : jsonBytes(task)
  }

  /** The peer's message would make a Task past maxTaskBytes: -32602 naming the limit. */
  private tooLarge(what: string, instead: string): A2AError {
    return new A2AError(ErrorCode.InvalidParams, `Invalid params: ${what}, over this agent's limit of ${this.maxTaskBytes} bytes per Task (maxTaskBytes); ${instead}`, {
      field: "params.message",
      maxTaskBytes: this.maxTaskBytes,
    })
  }

  /** The store holds all the unfinished Tasks it may: the peer is told to retry later, the log says which bound to raise. */
  private storeFull(err: StoreFullError, principal: string | undefined): A2AError {
    this.opts.log.warn({ principal, limit: err.limit, value: err.value, ...errorFields(err) }, "task store at capacity; new task refused")
    const what = err.perOwner ? "the tasks you already have open fill your share of its task store" : "its task store is full of unfinished tasks"
    return new A2AError(ErrorCode.InternalError, `The agent is at capacity: ${what}; retry once some of them finish`, { retryable: true })
  }

  /**
   * Cancels a task: a run in this process is aborted (its model request and
   * tools see the signal) and nothing it does later is saved.
   */
  async cancel(id: string): Promise<A2ATask> {
    const record = this.running.get(id)
    if (record && !record.finished) {
      record.controller.abort(new Error("the task was canceled"))
      // Out of the queue before the save is awaited: a slot freeing meanwhile must not start or drop it.
      const wasQueued = this.dequeue(record)
      const saved = await this.finish(record, "canceled", "Canceled at the peer's request")
      if (wasQueued) record.settle()
      if (!saved) {
        throw new A2AError(ErrorCode.InternalError, `Task ${truncate(id)} was stopped, but the task store could not record the cancel yet; the server keeps retrying`)
      }
      return record.task
    }
    // Its last state is being saved right now: judge the cancel on that state.
    if (record) await record.settled
    const task = await this.opts.store.get(id)
    if (task === undefined) throw A2AError.taskNotFound(id)
    if (isTerminal(task.status.state)) {
      throw new A2AError(ErrorCode.TaskNotCancelable, `Task ${truncate(id)} is already ${task.status.state} and cannot be canceled`, { taskId: truncate(id) })
    }
    // Not running here: waiting for input, or running on another server (or left by one that stopped).
    const waiting = isFinalForNow(task.status.state)
    // A run elsewhere logs its own end when it sees the cancel (its events may be ahead of the store); a waiting Task's end is logged here.
    const position = waiting ? (await this.lastPosition(task)) + 1 : positionOf(task)
    const canceled = withPosition({ ...task, status: { state: "canceled", timestamp: now(), message: agentMessage(task, "Canceled at the peer's request") } }, position)
    try {
      await this.save(canceled)
    } catch (err) {
      if (!(err instanceof TaskConflictError)) throw err
      throw new A2AError(ErrorCode.TaskNotCancelable, `Task ${truncate(id)} was ${err.stored.status.state} meanwhile and cannot be canceled`, { taskId: truncate(id) })
    }
    this.logTransition(canceled)
    if (waiting) {
      this.publish(undefined, position, statusEvent(canceled))
      this.opts.recorder?.ended(id)
    }
    return canceled
  }

  /**
   * Stops taking tasks, gives running ones `graceMs` to finish, then aborts
   * them; a task that still has not finished is marked failed. A final save
   * still waiting to be retried is tried once more at once, then given up
   * (restart recovery fails the task): nothing of the runner outlives stop().
   */
  async stop(graceMs: number): Promise<void> {
    this.accepting = false
    try {
      await this.drain(graceMs)
      this.stopped = true
      await this.lastTryOfFinalSaves()
    } finally {
      // Only now: until its tasks are settled, another server in this process must count this one alive.
      retireRunner(this.self)
    }
  }

  private async lastTryOfFinalSaves(): Promise<void> {
    await Promise.all(
      [...this.pendingFinalSaves].map((pending) => {
        if (pending.timer !== undefined) {
          clearTimeout(pending.timer)
          pending.timer = undefined
          pending.saving = this.tryFinalSave(pending)
        }
        return pending.saving
      }),
    )
  }

  private async drain(graceMs: number): Promise<void> {
    if (await this.allSettledWithin(graceMs)) return
    for (const record of this.queue.splice(0)) {
      await this.finish(record, "failed", "Interrupted: the server stopped before the task started")
      record.settle()
    }
    for (const record of this.running.values()) record.controller.abort(new Error("the server stopped before the task finished"))
    if (await this.allSettledWithin(ABORT_WAIT_MS)) return
    // Their work ignored the abort: record them failed and release whoever waits on them.
    await Promise.all(
      [...this.running.values()].map(async (record) => {
        await this.finish(record, "failed", "Interrupted: the server stopped before the task finished")
        record.settle()
      }),
    )
  }

  private assertCanTake(): void {
    if (!this.accepting) throw new A2AError(ErrorCode.InternalError, "The server is shutting down and takes no new tasks; retry in a moment")
    if (this.queue.length >= this.maxQueued) {
      throw new A2AError(ErrorCode.InternalError, `The agent is at capacity (${this.going} tasks running, ${this.queue.length} waiting); retry later`, { retryable: true })
    }
  }

  /** The message as the Task's history keeps it: tied to its task and context. */
  private stamp(incoming: A2AMessage, taskId: string, contextId: string | undefined): A2AMessage {
    return copyWith(incoming, { kind: "message" as const, taskId, contextId })
  }

  private launch(task: A2ATask, bytes: number, opts: StartOptions, lookUpContext: boolean): StartedTask {
    return this.schedule(this.register(task, bytes, opts, lookUpContext), opts)
  }

  /** The run of a saved Task, known to the runner (cancel finds it) but not yet started or queued. */
  private register(task: A2ATask, bytes: number, opts: StartOptions, lookUpContext: boolean): Running {
    let resolveSettled!: (task: A2ATask) => void
    const record: Running = {
      task,
      controller: new AbortController(),
      finished: false,
      bytes,
      lookUpContext,
      historyOwners: opts.historyOwners ?? ownersVisibleTo(opts.principal),
      unscheduled: true,
      position: positionOf(task),
      added: [],
      addedBytes: 0,
      writes: NO_WRITES,
      logged: this.opts.recorder !== undefined && (this.opts.recorder.everyTask || opts.watch === true),
      traceContext: this.telemetry.here(),
      settled: new Promise((resolve) => (resolveSettled = resolve)),
      settle: () => {
        if (this.running.get(task.id) === record) this.running.delete(task.id)
        resolveSettled(record.task)
      },
    }
    this.running.set(task.id, record)
    return record
  }

  /** Starts the run in a free slot, or queues it. */
  private schedule(record: Running, opts: StartOptions): StartedTask {
    const events = opts.watch ? eventQueue(this.opts.events, record.task.id) : undefined
    // Ended while its first save was awaited (canceled): whoever ended it took it out of line and settles it.
    if (!record.unscheduled) return { task: record.task, settled: record.settled, events }
    record.unscheduled = false
    if (this.going < this.maxRunning) this.begin(record)
    else this.queue.push(record)
    return { task: record.task, settled: record.settled, events }
  }

  /** Runs a task in a free slot; when it ends, the next queued task takes the slot. */
  private begin(record: Running): void {
    this.going++
    void this.fulfil(record).then(() => {
      this.going--
      record.settle()
      this.next()
    })
  }

  private next(): void {
    while (this.going < this.maxRunning && this.queue.length > 0) {
      const record = this.queue.shift()!
      // Canceled while it waited: already saved, nothing to run.
      if (record.finished) record.settle()
      else this.begin(record)
    }
  }

  /** Runs the Task, traced as one run under the request that started it. */
  private async fulfil(record: Running): Promise<void> {
    const run = this.telemetry.taskRun(record.task.id, record.task.contextId, record.traceContext)
    try {
      await run.within(() => this.fulfilObserved(record))
    } finally {
      run.end(record.task.status.state)
    }
  }

  private async fulfilObserved(record: Running): Promise<void> {
    const { lookUpContext, historyOwners } = record
    try {
      await this.transition(record, { ...record.task, status: { state: "working", timestamp: now() } })
      // The context's earlier Tasks of the Task's own tenant only (a tenant field not written by this server: none of them).
      const tenant = tenantOf(record.task)
      const history = await earlierMessages(record.task, {
        store: this.opts.store,
        log: this.opts.log,
        limit: CONTEXT_MESSAGES,
        lookUpContext: lookUpContext && tenant !== false,
        owners: historyOwners,
        tenant: tenant === false ? null : tenant,
      })
      // Canceled (or stopped) while the history was read: the agent is not called with its signal already aborted.
      if (record.finished) return
      const { id, contextId = "", history: own = [] } = record.task
      const message = own.at(-1) ?? { kind: "message" as const, messageId: "", role: "user" as const, parts: [] }
      const ctx = agentContext({ taskId: id, contextId, message, history, signal: record.controller.signal }, this.channelOf(record))
      const outcome = readOutcome(await this.agent(ctx))
      if (record.finished) return
      // Stopped for passing maxTaskBytes, and it returned all the same: what it returns is not kept either.
      if (record.overLimit !== undefined) return await this.tooBig(record, record.overLimit)
      // Status messages still being saved land before the last state.
      if (record.writes !== NO_WRITES) {
        await record.writes
        if (record.finished) return
      }
      const streamed = record.answer?.soFarText ?? ""
      if (outcome.question !== undefined) {
        const question = agentMessage(record.task, outcome.question)
        // Text streamed before the question stays, as the answer so far.
        const artifact = streamed === "" ? undefined : this.answerArtifact(record, streamed)
        const extra = {
          history: [...own, question],
          status: { state: "input-required" as const, timestamp: now(), message: question },
          ...(artifact && { artifacts: [...(record.task.artifacts ?? []), artifact] }),
        }
        const tooBig = this.answerTooBig(record, outcome.question + streamed, extra)
        await (tooBig ? this.tooBig(record, tooBig) : this.finish(record, "input-required", undefined, extra, artifact))
        return
      }
      // Nothing streamed and nothing returned: completed without an answer (the agent's artifacts are its work).
      if (outcome.answer === undefined && record.answer === undefined) {
        await this.finish(record, "completed")
        return
      }
      const text = streamed + (outcome.answer ?? "")
      const artifact = this.answerArtifact(record, text)
      const extra = { history: [...own, agentMessage(record.task, text)], artifacts: [...(record.task.artifacts ?? []), artifact] }
      const tooBig = this.answerTooBig(record, text, extra)
      await (tooBig ? this.tooBig(record, tooBig) : this.finish(record, "completed", undefined, extra, artifact))
    } catch (err) {
      if (record.finished) return
      const reason = record.controller.signal.aborted ? String((record.controller.signal.reason as Error)?.message ?? "aborted") : describeError(err)
      this.opts.log.warn({ taskId: record.task.id, ...errorFields(err) }, "task failed")
      if (record.overLimit !== undefined) this.dropAdded(record)
      await this.finish(record, "failed", record.overLimit ?? `The agent failed: ${truncate(redactCredentials(reason), MAX_REASON_CHARS)}`)
    }
  }

  /** Ends a run whose output would pass maxTaskBytes failed, without it: the answer and the artifacts it added are not kept. */
  private async tooBig(record: Running, why: string): Promise<void> {
    this.dropAdded(record)
    await this.finish(record, "failed", why)
  }

  /** Takes the artifacts the agent added in this run out of the Task. */
  private dropAdded(record: Running): void {
    if (record.added.length === 0) return
    const added = new Set(record.added)
    record.task = copyWith(record.task, { artifacts: (record.task.artifacts ?? []).filter((artifact) => !added.has(artifact.artifactId ?? "")) })
    record.added = []
  }

  /** The Task's `answer` artifact with this text: the one streamed into, when it was. */
  private answerArtifact(record: Running, text: string): A2AArtifact {
    return { artifactId: record.answer?.artifactId ?? randomUUID(), name: "answer", parts: [{ kind: "text", text }] }
  }

  /** How the agent's calls on its context reach this run. */
  private channelOf(record: Running): RunChannel {
    return {
      text: (delta, anew) => this.streamText(record, delta, anew),
      addArtifact: (artifact, lastChunk) => this.addArtifact(record, artifact, lastChunk),
      appendArtifact: (artifactId, parts, lastChunk) => this.appendArtifact(record, artifactId, parts, lastChunk),
      status: (text) => this.workingStatus(record, text),
    }
  }

  /**
   * Undefined when the Task with the agent's answer stays within
   * maxTaskBytes; else why not, for the status of the Task, which then ends
   * failed without the answer. Measured exactly only when a cheap bound says
   * it might not fit.
   */
  private answerTooBig(record: Running, text: string, extra: Partial<A2ATask>): string | undefined {
    if (record.bytes + record.addedBytes + 2 * jsonBytesAtMost(text) + FINAL_STATE_MARGIN_BYTES <= this.maxTaskBytes) return undefined
    const bytes = jsonBytes({ ...record.task, ...extra })
    if (bytes <= this.maxTaskBytes) return undefined
    this.opts.log.warn({ taskId: record.task.id, bytes, maxTaskBytes: this.maxTaskBytes }, "the agent's answer would pass maxTaskBytes; task failed")
    return `The agent's answer (${text.length} characters) would make this Task ${bytes} bytes, over this agent's limit of ${this.maxTaskBytes} bytes per Task (maxTaskBytes); the answer was not kept`
  }

  /**
   * Writes the run's last state once; later calls do nothing. Resolves true
   * once saved; false when the store failed, and then the save is retried in
   * the background, so the Task does not stay `working` for good.
   */
  private async finish(
    record: Running,
    state: TaskState,
    statusText?: string,
    extra: Partial<Pick<A2ATask, "status" | "history" | "artifacts">> = {},
    artifact?: A2AArtifact,
  ): Promise<boolean> {
    if (record.finished) return false
    record.finished = true
    // A save of the answer so far under way lands first: a store without ordered writes must not see it after the final one.
    if (record.progress !== undefined) await record.progress.settled()
    if (record.writes !== NO_WRITES) await record.writes
    const status = { state, timestamp: now(), ...(statusText ? { message: agentMessage(record.task, statusText) } : {}) }
    const final: A2ATask = copyWith(record.task, { status, ...extra })
    try {
      await this.transition(record, final, artifact)
      return true
    } catch (err) {
      if (err instanceof TaskConflictError) return false // finished elsewhere first; already logged
      this.opts.log.error({ taskId: record.task.id, state, ...errorFields(err) }, "task store failed to save the final state; retrying")
      const pending: PendingFinalSave = { record, final, artifact, attempt: 1, saving: Promise.resolve() }
      this.pendingFinalSaves.add(pending)
      this.retryLater(pending)
      return false
    }
  }

  /** Waits before the next try of a final save: 0.5 s doubling, about a minute in all; none once stopped. */
  private retryLater(pending: PendingFinalSave): void {
    if (pending.attempt >= FINAL_SAVE_ATTEMPTS || this.stopped) {
      this.pendingFinalSaves.delete(pending)
      const when = this.stopped ? "at shutdown" : `after ${pending.attempt} tries`
      this.opts.log.error({ taskId: pending.final.id, state: pending.final.status.state }, `gave up saving the final state ${when}; restart recovery will fail the task`)
      return
    }
    pending.timer = setTimeout(() => {
      pending.timer = undefined
      pending.saving = this.tryFinalSave(pending)
    }, 500 * 2 ** (pending.attempt - 1))
    pending.timer.unref()
  }

  /** Tries a final save again; once saved, the state is announced locally. Never rejects. */
  private async tryFinalSave(pending: PendingFinalSave): Promise<void> {
    const { record, final, artifact } = pending
    try {
      const events = this.transitionEvents(record, final, artifact)
      const positioned = withPosition(final, record.position + events.length)
      await this.save(positioned, this.pushedArtifacts(record, positioned, artifact))
      this.pendingFinalSaves.delete(pending)
      record.task = positioned
      this.published(record, positioned, events)
    } catch (err) {
      if (err instanceof TaskConflictError) {
        this.pendingFinalSaves.delete(pending)
        return
      }
      pending.attempt++
      this.opts.log.warn({ taskId: final.id, attempt: pending.attempt, ...errorFields(err) }, "final save failed again")
      this.retryLater(pending)
    }
  }

  /** Saves a state change, then tells the Task's streams and its event log: the Task saved carries the position of its last event. */
  private async transition(record: Running, next: A2ATask, artifact?: A2AArtifact): Promise<void> {
    const events = this.transitionEvents(record, next, artifact)
    const positioned = withPosition(next, record.position + events.length)
    try {
      await this.save(positioned, this.pushedArtifacts(record, positioned, artifact))
    } catch (err) {
      if (err instanceof TaskConflictError) this.endedElsewhere(record, err.stored)
      throw err
    }
    record.task = positioned
    this.published(record, positioned, events)
  }

  /**
   * The artifacts a state change reports to push webhooks: at the run's last
   * state, those the agent added in the run (as `task` holds them), then the answer.
   */
  private pushedArtifacts(record: Running, task: A2ATask, answer: A2AArtifact | undefined): A2AArtifact | A2AArtifact[] | undefined {
    if (record.added.length === 0 || !record.finished) return answer
    const added = (task.artifacts ?? []).filter((artifact) => artifact.artifactId !== undefined && record.added.includes(artifact.artifactId))
    return answer === undefined ? added : [...added, answer]
  }

  /** What a state change sends: its status, after the artifact it adds (a streamed answer's end, when it was streamed). */
  private transitionEvents(record: Running, task: A2ATask, artifact: A2AArtifact | undefined): TaskEvent[] {
    const status = statusEvent(task)
    if (artifact === undefined) return [status]
    return [record.answer === undefined ? artifactEvent(task, artifact) : record.answer.end(task, artifact), status]
  }

  /** A chunk of the agent's answer: sent to the Task's streams at once, its text so far saved now and then. An empty chunk anew only drops what was said. */
  private streamText(record: Running, delta: string, anew: boolean): void {
    if (record.finished) return
    if (delta === "") {
      if (anew) record.answer?.restart()
      return
    }
    record.answer ??= new StreamedAnswer()
    this.publish(record, ++record.position, record.answer.chunk(record.task, delta, anew))
    this.saveProgressLater(record)
  }

  /** An artifact of the agent's own: in the Task from now on, sent to its streams at once, saved with the next progress save. */
  private addArtifact(record: Running, artifact: A2AArtifact, lastChunk: boolean): void {
    if (record.finished) return
    record.task = copyWith(record.task, { artifacts: [...(record.task.artifacts ?? []), artifact] })
    record.added.push(artifact.artifactId!)
    record.addedBytes += jsonBytesAtMostOf(artifact, Infinity)
    this.publish(record, ++record.position, { type: "artifact", taskId: record.task.id, contextId: record.task.contextId, artifact, append: false, lastChunk })
    this.saveProgressLater(record)
  }

  /** More parts of an artifact the agent added: appended in the Task, sent to its streams as a chunk. */
  private appendArtifact(record: Running, artifactId: string, parts: A2APart[], lastChunk: boolean): void {
    if (record.finished) return
    const artifacts = record.task.artifacts ?? []
    const at = artifacts.findIndex((artifact) => artifact.artifactId === artifactId)
    if (at === -1) return
    const { parts: before, ...rest } = artifacts[at]
    record.task = copyWith(record.task, { artifacts: artifacts.with(at, { ...rest, parts: [...before, ...parts] }) })
    record.addedBytes += jsonBytesAtMostOf(parts, Infinity)
    this.publish(record, ++record.position, { type: "artifact", taskId: record.task.id, contextId: record.task.contextId, artifact: { ...rest, parts }, append: true, lastChunk })
    this.saveProgressLater(record)
  }

  /**
   * A working status with the agent's message: sent to the Task's streams at
   * once, then saved as a state change (so push sends it), after the ones
   * before it. Never rejects.
   */
  private workingStatus(record: Running, text: string): Promise<void> {
    if (record.finished) return record.writes
    const status = { state: "working" as const, timestamp: now(), message: agentMessage(record.task, text) }
    const position = ++record.position
    record.task = withPosition(copyWith(record.task, { status }), position)
    this.publish(record, position, statusEvent(record.task))
    record.writes = record.writes.then(() => this.saveStatus(record))
    return record.writes
  }

  /** Saves the Task as it stands (the answer so far in it), once a save of the answer under way has landed. Never rejects. */
  private async saveStatus(record: Running): Promise<void> {
    await record.progress?.idle()
    if (record.finished) return
    try {
      await this.save(this.withAnswerSoFar(record))
    } catch (err) {
      if (err instanceof TaskConflictError) this.endedElsewhere(record, err.stored)
      else this.opts.log.warn({ taskId: record.task.id, ...errorFields(err) }, "could not save the agent's status message; the next save will hold it")
    }
  }

  private saveProgressLater(record: Running): void {
    record.progress ??= new ProgressSaves(this.progressSaveMs, () => this.saveProgress(record))
    record.progress.schedule()
  }

  /** The Task with the answer streamed so far as its last artifact, and the position of its last event. */
  private withAnswerSoFar(record: Running): A2ATask {
    const task = record.answer === undefined || record.finished ? record.task : record.answer.soFar(record.task)
    return withPosition(task, record.position)
  }

  /**
   * Saves the answer so far (a plain save: not a state change, so no push
   * notification and no event), within maxTaskBytes; never rejects. Another
   * server's final word found here stops the run.
   */
  private async saveProgress(record: Running): Promise<void> {
    if (record.finished) return
    const snapshot = this.withAnswerSoFar(record)
    const roomy = record.bytes + record.addedBytes + 2 * jsonBytesAtMost(record.answer?.soFarText ?? "") + FINAL_STATE_MARGIN_BYTES <= this.maxTaskBytes
    if (!roomy) {
      const bytes = jsonBytes(snapshot)
      if (bytes > this.maxTaskBytes) return this.passedLimit(record, bytes)
    }
    try {
      await this.opts.store.save(snapshot)
    } catch (err) {
      if (err instanceof TaskConflictError) this.endedElsewhere(record, err.stored)
      else this.opts.log.warn({ taskId: record.task.id, ...errorFields(err) }, "could not save the answer so far; the final save will hold it")
    }
  }

  /** The answer and artifacts so far passed maxTaskBytes: the run is stopped (its signal aborted), and the Task ends failed saying why. */
  private passedLimit(record: Running, bytes: number): void {
    if (record.overLimit !== undefined) return
    record.overLimit = `The agent's answer and artifacts so far made this Task ${bytes} bytes, over this agent's limit of ${this.maxTaskBytes} bytes per Task (maxTaskBytes); the run was stopped and what it added was not kept`
    this.opts.log.warn({ taskId: record.task.id, bytes, maxTaskBytes: this.maxTaskBytes }, "the agent's output passed maxTaskBytes; its run was stopped")
    record.controller.abort(new Error(record.overLimit))
  }

  /**
   * Tells the runner what a shared store now holds for a task (another
   * server saved it): a task this process runs that was finished elsewhere
   * (canceled on another server, or recovered) stops here at once.
   */
  noticeStored(task: A2ATask): void {
    const record = this.running.get(task.id)
    if (!record || record.finished || !isTerminal(task.status.state)) return
    this.endedElsewhere(record, task)
    if (this.dequeue(record)) record.settle()
  }

  /** Takes a task that has no slot yet out of line (the queue, or not yet scheduled); false when it is not waiting. */
  private dequeue(record: Running): boolean {
    if (record.unscheduled) {
      record.unscheduled = false
      return true
    }
    const at = this.queue.indexOf(record)
    if (at === -1) return false
    this.queue.splice(at, 1)
    return true
  }

  /** Another writer's final word stands: stop the work, save nothing more, tell local streams. */
  private endedElsewhere(record: Running, stored: A2ATask): void {
    if (record.finished) return
    record.finished = true
    record.progress?.stop()
    record.controller.abort(new Error(`the task was ${stored.status.state} by another server`))
    record.task = stored
    this.opts.log.info({ taskId: stored.id, state: stored.status.state }, "task finished by another server; its run here stopped")
    // The other server saved it without logging it (this run's events may be ahead of what it saw): logged here, next in line.
    this.publish(record, ++record.position, statusEvent(stored))
    if (record.logged) this.opts.recorder?.ended(stored.id)
  }

  /** Logs a saved state and sends its events (the artifact first) to the Task's streams and its event log, positions after the record's. */
  private published(record: Running, task: A2ATask, events: TaskEvent[]): void {
    this.logTransition(task)
    for (const event of events) this.publish(record, ++record.position, event)
    if (isTerminal(task.status.state) && record.logged) this.opts.recorder?.ended(task.id)
  }

  /** One event to the Task's streams here, and to its event log when its events go there (`record` undefined: a Task not running here). */
  private publish(record: Running | undefined, position: number, event: TaskEvent): void {
    const positioned = { position, event }
    this.opts.events.publish(positioned)
    this.toLog(record, positioned)
  }

  /** Sends an event to the event log, when the Task's events go there. */
  private toLog(record: Running | undefined, event: PositionedEvent): void {
    if (record === undefined ? this.opts.recorder?.everyTask : record.logged) this.opts.recorder?.record(event)
  }

  /** The last position of a Task not running here: what its stored state reflects, or what its log holds past that (another server's events). */
  private async lastPosition(task: A2ATask): Promise<number> {
    const logged = this.opts.store.events === undefined ? 0 : await this.opts.store.events.lastPosition(task.id)
    return Math.max(positionOf(task), logged)
  }

  private logTransition(task: A2ATask): void {
    this.telemetry.taskState(task.status.state)
    this.opts.log.info({ taskId: task.id, contextId: task.contextId, state: task.status.state }, "task state changed")
  }

  private async allSettledWithin(ms: number): Promise<boolean> {
    if (this.running.size === 0) return true
    const done = Promise.all([...this.running.values()].map((r) => r.settled)).then(() => true)
    // A timer past Node's longest fires at once (with a warning): a grace that long means waiting for the work to end.
    if (ms > MAX_TIMER_MS) return done
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)))
    try {
      return await Promise.race([done, timeout])
    } finally {
      clearTimeout(timer)
    }
  }
}

function describeError(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
