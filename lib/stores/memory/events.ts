import { AgingMap } from "../../aging-map.js"
import { textHeapBytes } from "../../heap-budget.js"
import type { JsonObject } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { assertAppend, type EventLog, type LoggedEvent } from "../../streams/event-log.js"
import { eventSweeper } from "../event-sweep.js"
import type { RetentionSweeper } from "../retention.js"
import { assertTaskId } from "../task-checks.js"

/** One event as kept: its JSON (parsed anew for every read, so no caller shares an object with the log) and its weight. */
interface KeptEvent {
  position: number
  json: string
  bytes: number
}

/** One Task's log: its events in position order (the oldest may have been dropped for room), the highest position it took, and its weight. */
interface Log {
  events: KeptEvent[]
  /** Index of the first event still held: dropped ones are cut off in batches, not one shift() each. */
  start: number
  last: number
  bytes: number
  /** When `ended` was first called (ms since the epoch). */
  endedAt?: number
}

/** An event's heap besides its JSON text: its record and array slot. */
const EVENT_HEAP_BYTES = 64
/** A log's own heap: its record, array and map slots. */
const LOG_HEAP_BYTES = 256
/** Dropped events are cut off the array once this many (or half of it) have gone. */
const COMPACT_AT = 1024

/** What the memory store lends its event log. */
export interface MemoryEventLogOptions {
  /** How long an ended Task's log is kept (checked by eventRetentionOf). */
  retentionMs: number
  /** Most heap the logs take, counted as 2 bytes per character of each event's JSON plus a little per event and log. */
  maxBytes: number
  report: ReportError
}

/**
 * InMemoryTaskStore's event log (`store.events`): each Task's events as
 * JSON text, for the life of the process, like the Tasks.
 *
 * Bounded by `maxBytes` (the store's `maxEventBytes`). Past it, whole logs
 * of ended Tasks go first, the one that ended longest ago first; then, when
 * only running Tasks' logs are left, the oldest events of the largest log.
 * A log that lost its oldest events still knows its last position (appends
 * go on from it), and a resume from before what it holds is refused, as for
 * a log that is gone. An ended log goes `retentionMs` after its end, looked
 * for by a sweep (an unref()-ed timer, stopped by `stop()`) and by every call.
 */
export class MemoryEventLog implements EventLog {
  /** In this process only: no other server reads it. */
  readonly shared = false
  private readonly logs = new Map<string, Log>()
  /** The ended logs by end time, the earliest first (`ended` sets it once, so the order is the order of the calls). */
  private readonly endedLogs = new AgingMap<string, number>()
  private heldBytes = 0
  private readonly sweeper: RetentionSweeper

  constructor(private readonly opts: MemoryEventLogOptions) {
    this.sweeper = eventSweeper(opts.retentionMs, async (cutoff) => this.dropEndedBefore(cutoff), opts.report)
    this.sweeper.start()
  }

  /** What the logs hold: how many, and their counted bytes. */
  get usage(): { logs: number; bytes: number } {
    return { logs: this.logs.size, bytes: this.heldBytes }
  }

  async append(taskId: string, events: readonly LoggedEvent[]): Promise<number[]> {
    assertAppend(taskId, events)
    // Serialized before anything is kept: an event that is not JSON refuses the whole append.
    const texts = events.map(({ event }) => JSON.stringify(event))
    this.dropExpired()
    let log = this.logs.get(taskId)
    const taken: number[] = []
    for (const [i, { position }] of events.entries()) {
      if (log !== undefined && position <= log.last) {
        taken.push(position)
        continue
      }
      log ??= this.newLog(taskId)
      const kept: KeptEvent = { position, json: texts[i], bytes: EVENT_HEAP_BYTES + textHeapBytes(texts[i]) }
      log.events.push(kept)
      log.last = position
      log.bytes += kept.bytes
      this.heldBytes += kept.bytes
    }
    this.makeRoom()
    return taken
  }

  async read(taskId: string, after: number, limit: number): Promise<LoggedEvent[]> {
    assertTaskId(taskId)
    this.dropExpired()
    const log = this.logs.get(taskId)
    if (log === undefined || !(limit > 0)) return []
    const { events } = log
    // The first event above `after`, by bisection: positions increase.
    let low = log.start
    let high = events.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (events[middle].position <= after) low = middle + 1
      else high = middle
    }
    return events.slice(low, low + limit).map(({ position, json }) => ({ position, event: JSON.parse(json) as JsonObject }))
  }

  async lastPosition(taskId: string): Promise<number> {
    assertTaskId(taskId)
    this.dropExpired()
    return this.logs.get(taskId)?.last ?? 0
  }

  async ended(taskId: string): Promise<void> {
    assertTaskId(taskId)
    this.dropExpired()
    let log = this.logs.get(taskId)
    if (log?.endedAt !== undefined) return
    // Ended before any append: appends after it go with the log, which still goes on time.
    log ??= this.newLog(taskId)
    log.endedAt = Date.now()
    this.endedLogs.set(taskId, log.endedAt)
  }

  private newLog(taskId: string): Log {
    const log: Log = { events: [], start: 0, last: 0, bytes: LOG_HEAP_BYTES }
    this.logs.set(taskId, log)
    this.heldBytes += LOG_HEAP_BYTES
    return log
  }

  /** The Task left the store (deleted, swept, dropped for room): its log with it. */
  forget(taskId: string): void {
    const log = this.logs.get(taskId)
    if (log === undefined) return
    this.logs.delete(taskId)
    this.endedLogs.delete(taskId)
    this.heldBytes -= log.bytes
  }

  /** Stops the sweeps; the logs stay, and the log stays usable (ended ones still go as it is used). */
  stop(): Promise<void> {
    return this.sweeper.stop()
  }

  /** The sweep: drops the logs that ended at or before `cutoff` (ms since the epoch). */
  private dropEndedBefore(cutoff: number): number {
    let dropped = 0
    for (let oldest = this.endedLogs.oldest(); oldest !== undefined && oldest.value <= cutoff; oldest = this.endedLogs.oldest()) {
      this.forget(oldest.key)
      dropped++
    }
    return dropped
  }

  private dropExpired(): void {
    this.dropEndedBefore(Date.now() - this.opts.retentionMs)
  }

  /**
   * Past the budget: whole ended logs, the earliest ended first; then the
   * oldest events of the largest log, until the logs fit (a log then holds
   * no event, only its last position, at worst).
   */
  private makeRoom(): void {
    const { maxBytes } = this.opts
    while (this.heldBytes > maxBytes) {
      const ended = this.endedLogs.oldest()
      if (ended !== undefined) {
        this.forget(ended.key)
        continue
      }
      const largest = this.largestLog()
      if (largest === undefined) return
      while (this.heldBytes > maxBytes && largest.start < largest.events.length) {
        const dropped = largest.events[largest.start++]
        largest.bytes -= dropped.bytes
        this.heldBytes -= dropped.bytes
      }
      if (largest.start >= COMPACT_AT || largest.start * 2 >= largest.events.length) {
        largest.events.splice(0, largest.start)
        largest.start = 0
      }
    }
  }

  /** The log holding the most bytes among those with events left. */
  private largestLog(): Log | undefined {
    let largest: Log | undefined
    for (const log of this.logs.values()) {
      if (log.start < log.events.length && (largest === undefined || log.bytes > largest.bytes)) largest = log
    }
    return largest
  }
}
