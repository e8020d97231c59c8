/** How long a store keeps finished Tasks. */
export interface RetentionOptions {
  /**
   * Finished Tasks (completed, failed, canceled, rejected) whose status
   * timestamp is older than this are deleted in the background: a number of
   * milliseconds, or a duration such as "30d", "12h", "45m", "90s", "500ms".
   */
  terminalTtl: number | string
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
/** Sweeps are a quarter of the TTL apart, but never more than a minute nor less than 10 ms. */
const MAX_SWEEP_INTERVAL_MS = 60_000
const MIN_SWEEP_INTERVAL_MS = 10

/** A duration as milliseconds: a non-negative finite number, or digits followed by ms, s, m, h or d. Undefined when it is neither. */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) && value >= 0 ? value : undefined
  if (typeof value !== "string") return undefined
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(value)
  return match ? Number(match[1]) * UNIT_MS[match[2]] : undefined
}

/** `opts.retention` of a store as a TTL in ms (undefined: keep finished Tasks); throws naming the store and the option. */
export function retentionTtlMs(store: string, retention: unknown): number | undefined {
  if (retention === undefined) return undefined
  const ttl = parseDuration((retention as RetentionOptions | null)?.terminalTtl)
  if (ttl === undefined) {
    throw new TypeError(`${store}: opts.retention should be { terminalTtl: <ms, or a duration such as "30d", "12h", "90s"> }`)
  }
  return ttl
}

/**
 * Deletes a store's finished Tasks older than a TTL, in the background: a
 * sweep every quarter of the TTL (at most a minute apart), one at a time.
 * The store says how to sweep: `deleteFinishedBefore(cutoff)` removes the
 * Tasks in a terminal state whose status timestamp is before `cutoff` (an
 * ISO-8601 time) and resolves with how many it removed. A failed sweep is
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
    /** A store's ReportError (background-errors.ts), named by shape so the two modules do not import each other. */
    private readonly report: (err: unknown, operation: "retention") => void,
  ) {
    this.intervalMs = Math.min(MAX_SWEEP_INTERVAL_MS, Math.max(MIN_SWEEP_INTERVAL_MS, ttlMs / 4))
  }

  /** Starts sweeping (the first sweep one interval from now); calling it again does nothing. */
  start(): void {
    if (this.stopped || this.timer !== undefined) return
    this.schedule()
  }

  /** One sweep now, unless one is under way (then that one's end). */
  sweep(): Promise<void> {
    this.running ??= this.deleteFinishedBefore(new Date(Date.now() - this.ttlMs).toISOString())
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
