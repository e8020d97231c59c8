import { MAX_TIMER_MS, parseDuration } from "../duration.js"
import type { A2ATaskStatus } from "../types.js"
import { TERMINAL_STATES } from "../types.js"

// Moved to lib/duration.ts for the CLI's flags too; still exported from here.
export { parseDuration }

/** How long a store keeps finished Tasks. */
export interface RetentionOptions {
  /**
   * Finished Tasks (completed, failed, canceled, rejected) whose status
   * timestamp is older than this are deleted in the background: a number of
   * milliseconds, or a duration such as "30d", "12h", "45m", "90s", "500ms".
   * A Task whose status has no ISO 8601 timestamp is kept: its age is unknown.
   */
  terminalTtl: number | string
  /**
   * How often to sweep, the same forms (at least 10 ms): default a quarter of
   * `terminalTtl`, between 10 ms and a minute. Longer means fewer, larger sweeps.
   */
  sweepInterval?: number | string
}

/** Sweeps are a quarter of the TTL apart, but never more than a minute nor less than 10 ms. */
const MAX_SWEEP_INTERVAL_MS = 60_000
const MIN_SWEEP_INTERVAL_MS = 10
/** The earliest cutoff: a TTL reaching past year 0 expires nothing, and has no ISO form to compare with. */
const EARLIEST_CUTOFF_MS = Date.parse("0000-01-01T00:00:00.000Z")
/**
 * How a sweeper reports a failed sweep: a store's ReportError fits. Declared
 * here, not imported, so this module and background-errors.ts (which names
 * RetentionOptions) do not import each other.
 */
export type ReportSweepFailure = (err: unknown, operation: "retention") => void

/** What a status timestamp must start with to have an age: an ISO 8601 date and the time after it. */
export const ISO_DATE_TIME_START = /^\d{4}-\d{2}-\d{2}T/

/** `opts.retention` of a store as a TTL in ms (undefined: keep finished Tasks); throws naming the store and the option. */
export function retentionTtlMs(store: string, retention: unknown): number | undefined {
  if (retention === undefined) return undefined
  const ttl = parseDuration((retention as RetentionOptions | null)?.terminalTtl)
  if (ttl === undefined) {
    throw new TypeError(`${store}: opts.retention should be { terminalTtl: <ms, or a duration such as "30d", "12h", "90s"> }`)
  }
  sweepIntervalMs(store, retention as RetentionOptions)
  return ttl
}

/** `opts.retention.sweepInterval` in ms, undefined for the default; throws naming the store and the option. */
function sweepIntervalMs(store: string, retention: RetentionOptions): number | undefined {
  if (retention.sweepInterval === undefined) return undefined
  const interval = parseDuration(retention.sweepInterval)
  if (interval === undefined || interval === 0) {
    throw new TypeError(`${store}: opts.retention.sweepInterval should be a number of ms > 0, or a duration such as "1m", "10s"`)
  }
  return interval
}

/**
 * Whether retention deletes a Task with this status at `cutoff` (an ISO 8601 time): it is
 * finished, and its status timestamp is an ISO 8601 time before the cutoff,
 * compared as text, as list() orders them (exact for the UTC times the server
 * writes). Every store decides by this rule, in code or in its query language.
 */
export function isExpired(status: Pick<A2ATaskStatus, "state" | "timestamp">, cutoff: string): boolean {
  const timestamp = status.timestamp
  return TERMINAL_STATES.has(status.state) && typeof timestamp === "string" && ISO_DATE_TIME_START.test(timestamp) && timestamp < cutoff
}

/**
 * The sweeper of a store's `opts.retention`, not yet started; undefined when
 * the option is absent (finished Tasks are kept). Throws on a bad option,
 * naming the store, so a store calls it in its constructor.
 */
export function retentionSweeper(
  store: string,
  retention: unknown,
  deleteFinishedBefore: (cutoff: string) => Promise<number>,
  report: ReportSweepFailure,
): RetentionSweeper | undefined {
  const ttl = retentionTtlMs(store, retention)
  if (ttl === undefined) return undefined
  return new RetentionSweeper(ttl, deleteFinishedBefore, report, sweepIntervalMs(store, retention as RetentionOptions))
}

/**
 * Deletes a store's finished Tasks older than a TTL, in the background: a
 * sweep every quarter of the TTL (at most a minute apart) unless told, one
 * at a time. The store says how to sweep: `deleteFinishedBefore(cutoff)`
 * removes the Tasks `isExpired` at `cutoff` (an ISO-8601 time) and resolves
 * with how many it removed. A failed sweep (a rejection or a throw) is
 * reported (operation "retention") and the next one tries again. The timer
 * never keeps the process alive.
 */
export class RetentionSweeper {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private stopped = false
  private readonly intervalMs: number

  constructor(
    private readonly ttlMs: number,
    private readonly deleteFinishedBefore: (cutoff: string) => Promise<number>,
    private readonly report: ReportSweepFailure,
    intervalMs?: number,
  ) {
    const asked = intervalMs ?? Math.min(MAX_SWEEP_INTERVAL_MS, ttlMs / 4)
    this.intervalMs = Math.min(MAX_TIMER_MS, Math.max(MIN_SWEEP_INTERVAL_MS, asked))
  }

  /** Starts sweeping (the first sweep one interval from now); calling it again, or after stop(), does nothing. */
  start(): void {
    if (this.stopped || this.timer !== undefined) return
    this.schedule()
  }

  /** One sweep now, unless one is under way (then that one's end). Never rejects. */
  sweep(): Promise<void> {
    // Inside then(): a cutoff or a store that throws instead of rejecting is reported like any failed sweep.
    this.running ??= Promise.resolve()
      .then(() => this.deleteFinishedBefore(new Date(Math.max(EARLIEST_CUTOFF_MS, Date.now() - this.ttlMs)).toISOString()))
      .then(
        () => undefined,
        (err) => this.report(err, "retention"),
      )
      .finally(() => {
        this.running = undefined
      })
    return this.running
  }

  /** Stops the timer and waits for a sweep under way. */
  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    this.timer = undefined
    await this.running
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      void this.sweep().then(() => {
        if (!this.stopped) this.schedule()
      })
    }, this.intervalMs)
    this.timer.unref()
  }
}
