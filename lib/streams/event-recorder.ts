import { errorFields, type Logger } from "../log.js"
import type { EventLog, LoggedEvent } from "./event-log.js"
import type { PositionedEvent } from "./events.js"

/** Tries of one batch before its events are given up (a resumer past them is told to re-read the Task). */
const APPEND_ATTEMPTS = 5
/** One append that has not settled by then counts as failed (a store that hangs must not hold the Task's events for ever). */
const APPEND_TIMEOUT_MS = 10_000
/** Events in one append at most: a burst of chunks is written in a few calls, not one huge one. */
const MAX_BATCH = 500
/** Events of one Task waiting for a store that is down or slow, at most: past it the oldest are given up. */
const MAX_WAITING = 20_000
/**
 * How long events wait to be written with the ones that follow: a Task that
 * runs through its states within it costs one append, not one per state (on
 * the memory store, a tenth of a SendMessage's CPU). A reader of the log
 * waits for nothing of it: `flushed` writes at once.
 */
const BATCH_MS = 10

/** A Task's events waiting for the log, and the append under way. */
interface Pending {
  waiting: LoggedEvent[]
  /** The highest position queued, and the highest written (or given up). */
  queued: number
  written: number
  /** Readers waiting for the events up to a position to be written. */
  readers: Array<{ upTo: number; resolve: () => void }>
  /** The Task reached a terminal state: once its events are written, its log's retention starts. */
  ended: boolean
  /** Writing what waits, until nothing does. */
  writing?: Promise<void>
}

/**
 * Writes the events this process publishes to the store's event log, in the
 * background and in order per Task: events wait up to BATCH_MS and go in
 * one append with the ones that came meanwhile, one append under way per
 * Task, so a burst of streamed chunks costs a few appends, and no live
 * stream waits for the store. `flushed(taskId)` is how a reader of the log
 * waits for what this process has published but not yet written.
 */
export class EventRecorder {
  private readonly pending = new Map<string, Pending>()
  /** Ends being written to the log: a stop waits for them too. */
  private readonly ending = new Set<Promise<void>>()
  private timer: NodeJS.Timeout | undefined
  /** Every Task's events are written: other processes read the log (EventLog.shared). */
  readonly everyTask: boolean

  constructor(
    private readonly log: EventLog,
    private readonly logger: Logger,
  ) {
    this.everyTask = log.shared !== false
  }

  /** Queues a published event for the log. */
  record({ position, event }: PositionedEvent): void {
    const pending = this.pendingOf(event.taskId)
    if (pending.waiting.length >= MAX_WAITING) this.giveUp(event.taskId, pending, pending.waiting.splice(0, MAX_BATCH), "the store is too slow to keep up")
    pending.waiting.push({ position, event })
    pending.queued = position
    this.timer ??= setTimeout(() => void this.writeAll(), BATCH_MS).unref()
  }

  /** The Task reached a terminal state: once its events are written, its log's retention starts. */
  ended(taskId: string): void {
    const pending = this.pending.get(taskId)
    if (pending !== undefined) pending.ended = true
    else this.markEnded(taskId)
  }

  /** Writes the Task's waiting events now; resolves once every one recorded so far is in the log (or given up), not those recorded later. Never rejects. */
  flushed(taskId: string): Promise<void> {
    const pending = this.pending.get(taskId)
    if (pending === undefined || pending.written >= pending.queued) return Promise.resolve()
    const written = new Promise<void>((resolve) => pending.readers.push({ upTo: pending.queued, resolve }))
    void this.write(taskId, pending)
    return written
  }

  /** Writes everything waiting now, and resolves once it is written, or once `ms` passed (a store that hangs must not hold a stop): for a clean stop. */
  async idle(ms = Infinity): Promise<void> {
    const writing = (async () => {
      while (this.pending.size > 0 || this.ending.size > 0) {
        await this.writeAll()
        await Promise.all(this.ending)
      }
    })()
    if (ms === Infinity) return writing
    await withTimeout(writing, ms).catch(() => this.logger.warn({ tasks: this.pending.size }, `stream events still not written after ${ms} ms at shutdown; left`))
  }

  private pendingOf(taskId: string): Pending {
    let pending = this.pending.get(taskId)
    if (pending === undefined) this.pending.set(taskId, (pending = { waiting: [], queued: 0, written: 0, readers: [], ended: false }))
    return pending
  }

  private writeAll(): Promise<void> {
    clearTimeout(this.timer)
    this.timer = undefined
    return Promise.all([...this.pending].map(([taskId, pending]) => this.write(taskId, pending))).then(() => undefined)
  }

  /** The Task's writing: started unless under way (it takes what comes meanwhile too), and when nothing waits any more, the Task's entry goes. */
  private write(taskId: string, pending: Pending): Promise<void> {
    pending.writing ??= (async () => {
      while (pending.waiting.length > 0) {
        const batch = pending.waiting.splice(0, MAX_BATCH)
        if (!(await this.append(taskId, batch))) this.giveUp(taskId, pending, batch, "the store failed")
        this.wrote(pending, batch.at(-1)!.position)
      }
      pending.writing = undefined
      this.pending.delete(taskId)
      if (pending.ended) this.markEnded(taskId)
    })()
    return pending.writing
  }

  /** The events up to `position` are written (or given up): the readers waiting for them go on. */
  private wrote(pending: Pending, position: number): void {
    pending.written = position
    const waiting = []
    for (const reader of pending.readers) {
      if (reader.upTo <= position) reader.resolve()
      else waiting.push(reader)
    }
    pending.readers = waiting
  }

  private giveUp(taskId: string, pending: Pending, batch: LoggedEvent[], why: string): void {
    this.logger.error(
      { taskId, from: batch[0]?.position, to: batch.at(-1)?.position },
      `stream events not written to the event log (${why}); a stream resumed before them will be told to re-read the task`,
    )
    this.wrote(pending, batch.at(-1)?.position ?? pending.written)
  }

  /** True once the batch is in the log; false when every try failed. */
  private async append(taskId: string, batch: LoggedEvent[]): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      try {
        const held = await withTimeout(this.log.append(taskId, batch), APPEND_TIMEOUT_MS)
        if (held.length > 0) this.logger.warn({ taskId, positions: held.slice(0, 10) }, "event log already held these positions (another server wrote them); kept theirs")
        return true
      } catch (err) {
        if (attempt >= APPEND_ATTEMPTS) {
          this.logger.warn({ taskId, ...errorFields(err) }, "event log append failed")
          return false
        }
        await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt).unref())
      }
    }
  }

  private markEnded(taskId: string): void {
    // A host log that throws instead of rejecting is reported alike.
    const ending = Promise.resolve()
      .then(() => this.log.ended(taskId))
      .catch((err: unknown) => this.logger.warn({ taskId, ...errorFields(err) }, "could not mark a finished task's event log for removal"))
      .finally(() => this.ending.delete(ending))
    this.ending.add(ending)
  }
}

/** `work`, or a rejection once `ms` passed without it settling. */
function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
    timer.unref()
  })
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer))
}
