import { errorFields, type Logger } from "../log.js"
import type { EventLog, LoggedEvent } from "../stores/event-log.js"
import type { PositionedEvent } from "./events.js"

/** Tries of one batch before its events are given up (a resumer past them is told to re-read the Task). */
const APPEND_ATTEMPTS = 5
/** Events in one append at most: a burst of chunks is written in a few calls, not one huge one. */
const MAX_BATCH = 500
/**
 * How long events wait to be written with the ones that follow: a Task that
 * runs through its states within it costs one append, not one per state (on
 * the memory store, a tenth of a SendMessage's CPU). A reader of the log
 * waits for nothing of it: `flushed` writes at once.
 */
export const BATCH_MS = 10

/** A Task's events waiting for the log, and the append under way. */
interface Pending {
  waiting: LoggedEvent[]
  /** The Task reached a terminal state: once its events are written, its log's retention starts. */
  ended: boolean
  /** Writing what waits, until nothing does; settles once it is all in the log (or given up). */
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
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly log: EventLog,
    private readonly logger: Logger,
  ) {}

  /** Queues a published event for the log. */
  record({ position, event }: PositionedEvent): void {
    this.pendingOf(event.taskId).waiting.push({ position, event })
    this.timer ??= setTimeout(() => void this.writeAll(), BATCH_MS).unref()
  }

  /** The Task reached a terminal state: once its events are written, its log's retention starts. */
  ended(taskId: string): void {
    const pending = this.pending.get(taskId)
    if (pending !== undefined) pending.ended = true
    else this.markEnded(taskId)
  }

  /** Writes the Task's waiting events now; resolves once every one recorded so far is in the log (or given up). Never rejects. */
  flushed(taskId: string): Promise<void> {
    const pending = this.pending.get(taskId)
    return pending === undefined ? Promise.resolve() : this.write(taskId, pending)
  }

  /** Writes everything waiting now, and resolves once it is written: for a clean stop. */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await this.writeAll()
  }

  private pendingOf(taskId: string): Pending {
    let pending = this.pending.get(taskId)
    if (pending === undefined) this.pending.set(taskId, (pending = { waiting: [], ended: false }))
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
      while (pending.waiting.length > 0) await this.append(taskId, pending.waiting.splice(0, MAX_BATCH))
      pending.writing = undefined
      this.pending.delete(taskId)
      if (pending.ended) this.markEnded(taskId)
    })()
    return pending.writing
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
