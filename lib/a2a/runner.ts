import { randomUUID } from "node:crypto"
import type { Client } from "../client.js"
import { errorFields, type Logger } from "../log.js"
import type { TaskStore } from "../stores/task-store.js"
import type { Toolkit } from "../toolkit.js"
import type { A2AMessage, A2APart, A2ATask, TaskState } from "../types.js"
import { TERMINAL_STATES } from "../types.js"

/** An incoming message before the runner gives it ids. */
export type IncomingMessage = Omit<A2AMessage, "messageId"> & { messageId?: string }

export interface TaskRunnerOptions {
  store: TaskStore
  client: Client
  toolkit?: Toolkit
  log: Logger
}

/** One task being fulfilled in this process. */
interface Running {
  task: A2ATask
  controller: AbortController
  /** Set once a terminal state has been written: nothing is saved after it. */
  finished: boolean
  /** Resolves with the terminal Task; never rejects. */
  settled: Promise<A2ATask>
}

const now = () => new Date().toISOString()

/**
 * The task lifecycle: a message becomes a `submitted` Task, then in the
 * background `working`, then `completed` (the answer as an artifact) or
 * `failed` (the error as the status message). Exactly one save per state
 * transition; a failing model or store is logged and never escapes.
 */
export class TaskRunner {
  private readonly running = new Map<string, Running>()
  private accepting = true

  constructor(private readonly opts: TaskRunnerOptions) {}

  /** How many tasks this process is fulfilling now. */
  get activeCount(): number {
    return this.running.size
  }

  /**
   * Saves a new `submitted` Task for the message and starts fulfilling it.
   * Resolves once the submitted Task is saved; `settled` resolves with the Task in its terminal state.
   */
  async start(incoming: IncomingMessage): Promise<{ task: A2ATask; settled: Promise<A2ATask> }> {
    if (!this.accepting) throw new Error("The server is shutting down and takes no new tasks")
    const id = randomUUID()
    const contextId = incoming.contextId ?? randomUUID()
    const message: A2AMessage = { ...incoming, kind: "message", messageId: incoming.messageId ?? randomUUID(), taskId: id, contextId }
    const task: A2ATask = { id, contextId, kind: "task", status: { state: "submitted", timestamp: now() }, history: [message] }
    await this.opts.store.save(task)
    this.logTransition(task)

    let resolveSettled!: (task: A2ATask) => void
    const record: Running = {
      task,
      controller: new AbortController(),
      finished: false,
      settled: new Promise((resolve) => (resolveSettled = resolve)),
    }
    this.running.set(id, record)
    void this.fulfil(record).then(() => {
      this.running.delete(id)
      resolveSettled(record.task)
    })
    return { task, settled: record.settled }
  }

  /**
   * Stops taking tasks, gives running ones `graceMs` to finish, then aborts
   * them; a task that still has not finished is marked failed.
   */
  async stop(graceMs: number): Promise<void> {
    this.accepting = false
    if (await this.allSettledWithin(graceMs)) return
    for (const record of this.running.values()) record.controller.abort(new Error("the server stopped before the task finished"))
    if (await this.allSettledWithin(1000)) return
    await Promise.all([...this.running.values()].map((record) => this.finish(record, "failed", "Interrupted: the server stopped before the task finished")))
  }

  private async fulfil(record: Running): Promise<void> {
    const { client, toolkit } = this.opts
    try {
      await this.transition(record, { ...record.task, status: { state: "working", timestamp: now() } })
      const result = await client.run(promptFrom(record.task.history?.[0]), { toolkit, signal: record.controller.signal })
      if (record.finished) return
      const answer: A2AMessage = agentMessage(record.task, result.text)
      await this.finish(record, "completed", undefined, {
        history: [...(record.task.history ?? []), answer],
        artifacts: [{ artifactId: randomUUID(), name: "answer", parts: [{ kind: "text", text: result.text }] }],
      })
    } catch (err) {
      const reason = record.controller.signal.aborted ? String((record.controller.signal.reason as Error)?.message ?? "aborted") : describeError(err)
      this.opts.log.warn({ taskId: record.task.id, ...errorFields(err) }, "task failed")
      await this.finish(record, "failed", `The agent failed: ${reason}`)
    }
  }

  /** Writes a terminal state once; later calls do nothing. */
  private async finish(record: Running, state: TaskState, statusText?: string, extra: Partial<A2ATask> = {}): Promise<void> {
    if (record.finished) return
    record.finished = true
    const status = { state, timestamp: now(), ...(statusText ? { message: agentMessage(record.task, statusText) } : {}) }
    try {
      await this.transition(record, { ...record.task, ...extra, status })
    } catch (err) {
      this.opts.log.error({ taskId: record.task.id, state, ...errorFields(err) }, "task store failed to save the final state")
    }
  }

  private async transition(record: Running, next: A2ATask): Promise<void> {
    await this.opts.store.save(next)
    record.task = next
    this.logTransition(next)
  }

  private logTransition(task: A2ATask): void {
    this.opts.log.info({ taskId: task.id, contextId: task.contextId, state: task.status.state }, "task state changed")
  }

  private async allSettledWithin(ms: number): Promise<boolean> {
    if (this.running.size === 0) return true
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)))
    const done = Promise.all([...this.running.values()].map((r) => r.settled)).then(() => true)
    try {
      return await Promise.race([done, timeout])
    } finally {
      clearTimeout(timer)
    }
  }
}

export function isTerminal(state: TaskState): boolean {
  return TERMINAL_STATES.has(state)
}

function agentMessage(task: A2ATask, text: string): A2AMessage {
  return { kind: "message", messageId: randomUUID(), role: "agent", parts: [{ kind: "text", text }], taskId: task.id, contextId: task.contextId }
}

/** The model's prompt: text parts as they are, other parts described in a line. */
export function promptFrom(message: A2AMessage | undefined): string {
  return (message?.parts ?? []).map(partAsText).join("\n")
}

function partAsText(part: A2APart): string {
  switch (part.kind) {
    case "text":
      return part.text
    case "data":
      return JSON.stringify(part.data)
    case "file":
      return `[file ${part.file.name ?? ""}${part.file.mimeType ? ` (${part.file.mimeType})` : ""}${part.file.uri ? ` at ${part.file.uri}` : ", inline"}]`
  }
}

function describeError(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
