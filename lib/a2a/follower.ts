import { errorFields, type Logger } from "../log.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2ATask } from "../types.js"
import type { TaskEvent } from "./events.js"
import type { TaskRunner } from "./runner.js"

/**
 * What other servers sharing the store do, seen from here. With a store
 * that can `watch`, each change wakes its followers at once; without, they
 * poll. A task this process runs that another server finished (a cancel
 * sent there) is stopped here.
 */
export class StoreFollower {
  /** Changes seen per task id, so a follower that was busy reading knows it missed one. */
  private readonly generations = new Map<string, number>()
  private readonly waiters = new Map<string, Set<() => void>>()
  private unwatch: (() => Promise<void>) | undefined
  /** Set by close(): every follow ends, and no poll is scheduled again. */
  private closed = false

  constructor(private readonly opts: { store: TaskStore; runner: TaskRunner; log: Logger }) {}

  /** Starts watching the store, when it can; a store that cannot watch now is polled instead. */
  async start(): Promise<void> {
    if (!this.opts.store.watch) return
    try {
      this.unwatch = await this.opts.store.watch((id) => this.changed(id))
    } catch (err) {
      this.opts.log.warn(errorFields(err), "could not watch the task store for other servers' changes; polling it instead")
    }
  }

  /** Stops watching and ends every follow, with its poll timer. */
  async close(): Promise<void> {
    this.closed = true
    for (const set of this.waiters.values()) for (const wake of set) wake()
    await this.unwatch?.()
    this.unwatch = undefined
  }

  get watching(): boolean {
    return this.unwatch !== undefined
  }

  private changed(id: string): void {
    if (this.waiters.has(id)) this.generations.set(id, (this.generations.get(id) ?? 0) + 1)
    for (const wake of this.waiters.get(id) ?? []) wake()
    if (this.opts.runner.isRunning(id)) void this.checkRunning(id)
  }

  /** A task running here was changed by someone else: if they finished it, stop it here. */
  private async checkRunning(id: string): Promise<void> {
    try {
      const task = await this.opts.store.get(id)
      if (task) this.opts.runner.noticeStored(task)
    } catch (err) {
      this.opts.log.warn({ taskId: id, ...errorFields(err) }, "could not read a task another server changed")
    }
  }

  /**
   * The events of a task running elsewhere, from the stored state `first`
   * on, until the signal aborts, the task is gone or the follower closes.
   */
  async *follow(first: A2ATask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    const id = first.id
    let last = first
    let waiters = this.waiters.get(id)
    if (!waiters) this.waiters.set(id, (waiters = new Set()))
    try {
      let seen = this.generations.get(id) ?? 0
      while (!signal.aborted && !this.closed) {
        await this.nextChange(id, seen, signal, waiters)
        if (signal.aborted || this.closed) return
        seen = this.generations.get(id) ?? 0
        const task = await this.opts.store.get(id)
        if (task === undefined) return
        if (task.status.state !== last.status.state || task.status.timestamp !== last.status.timestamp) {
          for (const artifact of (task.artifacts ?? []).slice(last.artifacts?.length ?? 0)) yield { type: "artifact", task, artifact }
          yield { type: "status", task }
          last = task
        }
      }
    } finally {
      if (waiters.size === 0) {
        this.waiters.delete(id)
        this.generations.delete(id)
      }
    }
  }

  /** Resolves at the next change after `seen` (at once if one came already), the next poll, or the abort. */
  private nextChange(id: string, seen: number, signal: AbortSignal, waiters: Set<() => void>): Promise<void> {
    if ((this.generations.get(id) ?? 0) !== seen) return Promise.resolve()
    const wait = this.watching ? SAFETY_INTERVAL_MS : POLL_INTERVAL_MS
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        waiters.delete(done)
        signal.removeEventListener("abort", done)
        resolve()
      }
      const timer = setTimeout(done, wait)
      waiters.add(done)
      signal.addEventListener("abort", done, { once: true })
    })
  }
}

/** Without watch, how often a follower re-reads the store. */
const POLL_INTERVAL_MS = 500
/** With watch, a follower still re-reads this often, in case a notification was lost. */
const SAFETY_INTERVAL_MS = 5000
