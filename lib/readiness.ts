import type { TaskStore } from "./stores/task-store.js"

/**
 * Where the server is in its life, as a load balancer asks it: `starting` until it listens, `ready` while
 * it should get traffic, `draining` once a stop began (traffic still served, but new traffic should go
 * elsewhere), `stopping` once it no longer accepts connections.
 */
export type ServerPhase = "starting" | "ready" | "draining" | "stopping"

/** The readiness answer: whether the server should get traffic now and, when not, why. */
export type ReadinessAnswer = { ready: true } | { ready: false; reason: string }

/** The id the store probe reads: no Task has it (ids the server makes are UUIDs), so the read costs one lookup and returns nothing. */
export const PROBE_TASK_ID = "toolnexus-readiness-probe"

/** How long the store may take to answer the probe before the server counts as not ready (ms). */
export const DEFAULT_STORE_PROBE_TIMEOUT_MS = 2000
/** How long one probe's answer is reused, so frequent checks (several balancers, every second) cost the store at most one read per period (ms). */
export const DEFAULT_STORE_PROBE_CACHE_MS = 1000

export interface ReadinessSettings {
  /** The store the server reads and writes; the probe `get`s a Task id no Task has. */
  store: Pick<TaskStore, "get">
  /** The probe's time limit, ms. */
  probeTimeoutMs?: number
  /** How long a probe's answer is reused, ms. */
  probeCacheMs?: number
  /** Told why a probe failed (the store's error), for the log. */
  onStoreError?: (err: unknown) => void
  /** The clock, ms (tests give their own). */
  now?: () => number
}

/**
 * Whether the server should get traffic: its phase, and whether its store answers. The store is probed by
 * the cheapest call every store has, a `get` of an id no Task has (a primary-key lookup in Postgres, a key
 * read in NATS KV, one stat on the file store), which goes through the same connection, table and rights as
 * the Tasks' own reads. At most one probe is in flight: a store that hangs is reported once the probe's
 * time limit passes, and is not sent another probe until the hanging one ends.
 */
export class Readiness {
  private current: ServerPhase = "starting"
  private readonly store: Pick<TaskStore, "get">
  private readonly timeoutMs: number
  private readonly cacheMs: number
  private readonly now: () => number
  private readonly onStoreError?: (err: unknown) => void
  private inFlight: { answer: Promise<ReadinessAnswer>; started: number } | undefined
  private last: { answer: ReadinessAnswer; at: number } | undefined

  constructor(settings: ReadinessSettings) {
    this.store = settings.store
    this.timeoutMs = settings.probeTimeoutMs ?? DEFAULT_STORE_PROBE_TIMEOUT_MS
    this.cacheMs = settings.probeCacheMs ?? DEFAULT_STORE_PROBE_CACHE_MS
    this.now = settings.now ?? (() => performance.now())
    this.onStoreError = settings.onStoreError
  }

  /** The phase now. */
  get phase(): ServerPhase {
    return this.current
  }

  /** The server listens: ready, unless a stop already began. */
  listening(): void {
    if (this.current === "starting") this.current = "ready"
  }

  /** A stop began: readiness answers "draining" from now on, whatever the store says. */
  drain(): void {
    if (this.current === "starting" || this.current === "ready") this.current = "draining"
  }

  /** The server no longer accepts connections. */
  stopping(): void {
    this.current = "stopping"
  }

  /** Whether the server should get traffic now; never rejects, and answers within the probe's time limit. */
  async check(): Promise<ReadinessAnswer> {
    if (this.current !== "ready") return { ready: false, reason: this.current }
    const answer = await this.probeStore()
    // A stop that began while the probe ran wins.
    return this.current === "ready" ? answer : { ready: false, reason: this.current }
  }

  private probeStore(): Promise<ReadinessAnswer> {
    const now = this.now()
    if (this.last && now - this.last.at < this.cacheMs) return Promise.resolve(this.last.answer)
    this.inFlight ??= this.startProbe(now)
    const remaining = this.timeoutMs - (now - this.inFlight.started)
    const timedOut: ReadinessAnswer = { ready: false, reason: `the task store did not answer within ${this.timeoutMs} ms` }
    if (remaining <= 0) return Promise.resolve(timedOut)
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<ReadinessAnswer>((resolve) => {
      timer = setTimeout(() => resolve(timedOut), remaining)
      timer.unref()
    })
    return Promise.race([this.inFlight.answer, deadline]).finally(() => clearTimeout(timer))
  }

  private startProbe(started: number): { answer: Promise<ReadinessAnswer>; started: number } {
    const answer = Promise.resolve()
      .then(() => this.store.get(PROBE_TASK_ID))
      .then(
        (): ReadinessAnswer => ({ ready: true }),
        (err: unknown): ReadinessAnswer => {
          this.onStoreError?.(err)
          // The detail goes to the log: the route is unauthenticated, and a driver's message can name hosts and users.
          return { ready: false, reason: "the task store failed to answer (the server's log says why)" }
        },
      )
      .then((result) => {
        this.inFlight = undefined
        this.last = { answer: result, at: started }
        return result
      })
    return { answer, started }
  }
}
