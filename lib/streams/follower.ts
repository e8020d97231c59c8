import { positionOf } from "../internals.js"
import { errorFields, type Logger } from "../log.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2ATask } from "../types.js"
import type { EventRecorder } from "./event-recorder.js"
import { statusEvent, type PositionedEvent } from "./events.js"
import type { TaskRunner } from "../a2a/runner.js"
import { isFinalForNow } from "../a2a/states.js"
import { addedArtifacts, endFromStore, endsStream, LOG_RETRIES, LOG_RETRY_MS, loggedEvents } from "./task-streams.js"

/**
 * What other servers sharing the store do, seen from here. With a store
 * that can `watch`, each change wakes its followers at once; without, they
 * poll. A task this process runs that another server finished (a cancel
 * sent there) is stopped here.
 */
export class StoreFollower {
  /** Changes seen per task id, so a follower that was busy reading knows it missed one. */
  private readonly generations = new Map<string, number>()
  /** Per task id followed: how many follow it (its entry goes with the last), and the wakes of those waiting for its next change. */
  private readonly followed = new Map<string, { followers: number; wakes: Set<() => void> }>()
  private unwatch: (() => Promise<void>) | undefined
  /** Set by close(): every follow ends, and no poll is scheduled again. */
  private closed = false

  constructor(private readonly opts: { store: TaskStore; runner: TaskRunner; log: Logger; recorder?: EventRecorder }) {}

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
    for (const { wakes } of this.followed.values()) for (const wake of wakes) wake()
    await this.unwatch?.()
    this.unwatch = undefined
  }

  get isWatching(): boolean {
    return this.unwatch !== undefined
  }

  private changed(id: string): void {
    const followed = this.followed.get(id)
    if (followed !== undefined) {
      this.generations.set(id, (this.generations.get(id) ?? 0) + 1)
      for (const wake of followed.wakes) wake()
    }
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
   * on (or, with a store that logs events, from the log's position `after`
   * on), until the signal aborts, the task is gone or the follower closes.
   */
  follow(first: A2ATask, signal: AbortSignal, after?: number): AsyncIterable<PositionedEvent> {
    // A resume reads the log; a fresh follow does where every Task's events are in it (a log others read), else the stored states.
    const fromLog = this.opts.store.events !== undefined && (after !== undefined || this.opts.recorder?.everyTask === true)
    return fromLog ? this.followLog(first, after ?? positionOf(first), signal) : this.followStored(first, signal)
  }

  /**
   * From the event log: what it holds after `after`, then what is added,
   * read at every change of the Task and every LOG_RETRY_MS (another
   * server's streamed chunks change no Task until its next save). A Task
   * that is final for now without that event in its log (recovered as
   * failed) ends the stream with what the stored Task adds: its new
   * artifacts, then its status.
   */
  private async *followLog(first: A2ATask, after: number, signal: AbortSignal): AsyncIterable<PositionedEvent> {
    const log = this.opts.store.events!
    const id = first.id
    let last = after
    yield* this.asFollower(id, signal, async function* (this: StoreFollower, next) {
      // Reads of the log that found nothing while the stored Task, final for now, says events are missing from it.
      let waitedForEnd = 0
      while (!signal.aborted && !this.closed) {
        let more = false
        for await (const event of loggedEvents(log, this.opts.recorder, id, last)) {
          more = true
          last = event.position
          yield event
          if (endsStream(event.event)) return
        }
        if (more) continue
        // Nothing new logged: the Task is read only now, to tell an end the log lacks.
        const task = await this.opts.store.get(id)
        if (task === undefined) return
        // Its server saves the Task, then writes its events: a few reads for the last ones, then the stored Task stands in.
        if (isFinalForNow(task.status.state) && (positionOf(task) <= last || ++waitedForEnd > LOG_RETRIES)) {
          yield* endFromStore(first, task, last)
          return
        }
        await next(LOG_RETRY_MS)
      }
    })
  }

  /** From the store: each saved state that differs from the one before, its new artifacts first. */
  private async *followStored(first: A2ATask, signal: AbortSignal): AsyncIterable<PositionedEvent> {
    const id = first.id
    let last = first
    yield* this.asFollower(id, signal, async function* (this: StoreFollower, next) {
      while (!signal.aborted && !this.closed) {
        await next()
        if (signal.aborted || this.closed) return
        const task = await this.opts.store.get(id)
        if (task === undefined) return
        if (task.status.state !== last.status.state || task.status.timestamp !== last.status.timestamp) {
          yield* addedArtifacts(last, task)
          yield { position: 0, event: statusEvent(task) }
          last = task
        }
      }
    })
  }

  /** Runs `body` as a follower of task `id`: `next(ms)` resolves at the Task's next change, after `ms` (default: the poll interval), or the abort. */
  private async *asFollower(
    id: string,
    signal: AbortSignal,
    body: (this: StoreFollower, next: (ms?: number) => Promise<void>) => AsyncIterable<PositionedEvent>,
  ): AsyncIterable<PositionedEvent> {
    let followed = this.followed.get(id)
    if (followed === undefined) this.followed.set(id, (followed = { followers: 0, wakes: new Set() }))
    followed.followers++
    const { wakes } = followed
    let seen = this.generations.get(id) ?? 0
    const next = async (ms?: number) => {
      await this.nextChange(id, seen, signal, wakes, ms)
      seen = this.generations.get(id) ?? 0
    }
    try {
      yield* body.call(this, next)
    } finally {
      // Counted, not judged by the wakes waiting: another follower between two reads waits on none, and must stay woken.
      if (--followed.followers === 0) {
        this.followed.delete(id)
        this.generations.delete(id)
      }
    }
  }

  /** Resolves at the next change after `seen` (at once if one came already), after `ms` (default: the next poll), or the abort. */
  private nextChange(id: string, seen: number, signal: AbortSignal, wakes: Set<() => void>, ms?: number): Promise<void> {
    if ((this.generations.get(id) ?? 0) !== seen) return Promise.resolve()
    const wait = ms ?? (this.isWatching ? SAFETY_INTERVAL_MS : POLL_INTERVAL_MS)
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer)
        wakes.delete(done)
        signal.removeEventListener("abort", done)
        resolve()
      }
      const timer = setTimeout(done, wait)
      wakes.add(done)
      signal.addEventListener("abort", done, { once: true })
    })
  }
}

/** Without watch, how often a follower re-reads the store. */
const POLL_INTERVAL_MS = 500
/** With watch, a follower still re-reads this often, in case a notification was lost. */
const SAFETY_INTERVAL_MS = 5000

