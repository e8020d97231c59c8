import type { ReportError } from "./background-errors.js"
import { RetentionSweeper } from "./retention.js"

/** Ended logs are looked for at most this far apart: an hour's retention ends within a minute of its time. */
const MAX_EVENT_SWEEP_MS = 60_000
/** And at least this far apart: a retention of 0 (or a few ms) must not become a busy timer reading a directory. */
const MIN_EVENT_SWEEP_MS = 100

/** How often a store looks for ended event logs: a quarter of the retention (a log goes at most a quarter late), within the bounds above. */
export function eventSweepIntervalMs(retentionMs: number): number {
  return Math.min(MAX_EVENT_SWEEP_MS, Math.max(MIN_EVENT_SWEEP_MS, retentionMs / 4))
}

/**
 * The sweeper of a store's ended event logs, not yet started: RetentionSweeper's
 * timer (unref()-ed, one sweep at a time, a failure reported as "retention"),
 * calling `removeEndedBefore(cutoff)` with the time (ms since the epoch) at or
 * before which a log must have ended to go.
 */
export function eventSweeper(retentionMs: number, removeEndedBefore: (cutoff: number) => Promise<number>, report: ReportError): RetentionSweeper {
  return new RetentionSweeper(retentionMs, (cutoff) => removeEndedBefore(Date.parse(cutoff)), report, eventSweepIntervalMs(retentionMs))
}

/** What a shared store lends its event log, whatever the store. */
export interface EventLogHost {
  /** How long an ended log is kept (checked by eventRetentionOf). */
  retentionMs: number
  report: ReportError
  /** Throws once the store is closed: the log's own calls are refused then, its last sweep is not. */
  assertOpen(): void
  /** A Task id as the store keys it (refused when the store cannot). */
  keyOf(taskId: string): string
}
