import { errorFields, type Logger } from "../log.js"
import type { EventLog, LoggedEvent } from "../stores/event-log.js"
import type { PositionedEvent } from "./events.js"

/** Tries of one batch before its events are given up (a resumer past them is told to re-read the Task). */
const APPEND_ATTEMPTS = 5
/** Events in one append at most: a burst of chunks is written in a few calls, not one huge one. */
const MAX_BATCH = 500

/** A Task's events waiting for the log, and the append under way. */
interface Pending {
  waiting: LoggedEvent[]
  /** Settles when every event recorded so far is in the log (or given up). */
  flushed: Promise<void>
  ended: boolean
}

/**
 * Writes the events this process publishes to the store's event log, in the
 * background and in order per Task: while one append is under way, the
 * events that come meanwhile wait and go in the next one, so a burst of
 * streamed chunks costs a few appends, and no live stream waits for the
 * store. `flushed(taskId)` is how a reader of the log waits for what this
 * process has published but not yet written.
 */
export class EventRecorder {
  private readonly pending = new Map<string, Pending>()

  constructor(
    private readonly log: EventLog,
    private readonly logger: Logger,
  ) {}

  /** Queues a published event for the log. */
  record(event: PositionedEvent): void {
    const taskId = event.event.taskId
    let pending = this.pending.get(taskId)
    const first = pending === undefined
    if (pending === undefined) this.pending.set(taskId, (pending = { waiting: [], flushed: Promise.resolve(), ended: false }))
    pending.waiting.push({ position: event.position, event: event.event })
    if (first) pending.flushed = this.drain(taskId, pending)
  }

  /** The Task reached a terminal state: once its events are written, its log's retention starts. */
  ended(taskId: string): void {
    const pending = this.pending.get(taskId)
    if (pending !== undefined) pending.ended = true
    else this.markEnded(taskId)
  }

  /** Resolves once every event of the Task recorded so far has been appended (or given up); never rejects. */
  flushed(taskId: string): Promise<void> {
    return this.pending.get(taskId)?.flushed ?? Promise.resolve()
  }

  /** Resolves once every Task's events recorded so far are written: for a clean stop. */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending.values()].map((pending) => pending.flushed))
  }

  private async drain(taskId: string, pending: Pending): Promise<void> {
    // Let the events published in the same tick as the first join its append.
    await Promise.resolve()
    while (pending.waiting.length > 0) {
      const batch = pending.waiting.splice(0, MAX_BATCH)
      await this.append(taskId, batch)
    }
    this.pending.delete(taskId)
    if (pending.ended) this.markEnded(taskId)
  }

  private async append(taskId: string, batch: LoggedEvent[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        const held = await this.log.append(taskId, batch)
        if (held.length > 0) this.logger.warn({ taskId, positions: held.slice(0, 10) }, "event log already held these positions (another server wrote them); kept theirs")
        return
      } catch (err) {
        if (attempt >= APPEND_ATTEMPTS) {
          this.logger.error({ taskId, from: batch[0]?.position, to: batch.at(-1)?.position, ...errorFields(err) }, "could not write stream events to the event log; a stream resumed before them will be told to re-read the task")
          return
        }
        await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt).unref())
      }
    }
  }

  private markEnded(taskId: string): void {
    this.log.ended(taskId).catch((err: unknown) => this.logger.warn({ taskId, ...errorFields(err) }, "could not mark a finished task's event log for removal"))
  }
}
