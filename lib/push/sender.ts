import { setMaxListeners } from "node:events"
import { MAX_TIMER_MS } from "../duration.js"
import { errorFields, type Logger } from "../log.js"
import { tracesOnly, type Telemetry } from "../observe/telemetry.js"
import { NextRun } from "../stores/next-run.js"
import type { PushClaim, PushStore } from "../stores/push-store.js"
import { attemptDelivery } from "./attempt.js"
import type { AllowList } from "./guard.js"
import { PostAgents } from "./http-post.js"
import { sentWithNextEvent } from "./payload.js"
import { backoffDelay, type AttemptOutcome, type Backoff } from "./retry.js"
import type { PushSigner } from "./signer.js"

/** The sender's defaults; PushOptions documents each. */
export const PUSH_DEFAULTS = {
  timeoutMs: 10_000,
  maxAgeMs: 24 * 60 * 60 * 1000,
  maxInFlight: 64,
  maxInFlightPerOrigin: 8,
  retryBaseMs: 1000,
  retryMaxMs: 10 * 60 * 1000,
  pollMs: 1000,
} as const

/** How long stop() lets requests under way finish before it aborts them. */
const STOP_WAIT_MS = 1000

export interface PushSenderOptions {
  store: PushStore
  log: Logger
  /** This process's instance id: claims are taken in its name. */
  instance: string
  allow: AllowList
  timeoutMs?: number
  /** Attempts before a notification goes to the dead letters; undefined: only its age ends it. */
  maxAttempts?: number
  maxAgeMs?: number
  maxInFlight?: number
  maxInFlightPerOrigin?: number
  backoff?: Backoff
  /** How often the outbox is looked at anyway: for retries that came due and claims another process left. */
  pollMs?: number
  signer?: PushSigner
  /** Hears each attempt (its span) and how it settled (the push metrics); omitted, spans only. */
  telemetry?: Telemetry
}

/** A claim this process holds: under way, or waiting for a slot of its origin. */
interface Held {
  claim: PushClaim
  origin: string
  claimedAt: number
}

/** The webhooks of one origin (scheme, host and port): how many requests are under way, and the claims waiting for a slot. */
interface Origin {
  inFlight: number
  waiting: Held[]
}

/**
 * The outbox worker, one per server: claims due notifications from the
 * store and POSTs them, at most one request under way per (Task, config)
 * (the store hands out only a channel's first notification, and not while it
 * is claimed), at most `maxInFlightPerOrigin` per webhook origin and
 * `maxInFlight` in all, so a slow webhook holds up only its own channels.
 * Woken by `wake()` after a local save, by the store's watchOutbox for other
 * processes' saves, and by a slow poll for retries that came due and leases
 * that ran out. A notification leaves the outbox only on a 2xx.
 */
export class PushSender {
  private readonly store: PushStore
  private readonly log: Logger
  private readonly timeoutMs: number
  private readonly maxAgeMs: number
  private readonly maxInFlight: number
  private readonly maxPerOrigin: number
  private readonly backoff: Backoff
  private readonly pollMs: number
  /** A claim lasts for a request and its retry bookkeeping, with room to wait for an origin's slot. */
  private readonly leaseMs: number
  private readonly agents: PostAgents
  private readonly aborts = new AbortController()
  private readonly telemetry: Telemetry

  private readonly held = new Map<string, Held>()
  private readonly origins = new Map<string, Origin>()
  private inFlight = 0
  private readonly sends = new Set<Promise<void>>()

  /** Claims: one under way, and one more for the wakes that came meanwhile. */
  private readonly pumps = new NextRun(() => this.pump())
  private stopped = false
  private pollTimer: NodeJS.Timeout | undefined
  private retryTimer: NodeJS.Timeout | undefined
  /** When the retries this process scheduled come due, earliest first. */
  private readonly retryTimes: number[] = []
  private stopWatching: (() => Promise<void>) | undefined

  constructor(private readonly opts: PushSenderOptions) {
    this.store = opts.store
    this.log = opts.log
    this.telemetry = opts.telemetry ?? tracesOnly
    this.timeoutMs = opts.timeoutMs ?? PUSH_DEFAULTS.timeoutMs
    this.maxAgeMs = opts.maxAgeMs ?? PUSH_DEFAULTS.maxAgeMs
    this.maxInFlight = opts.maxInFlight ?? PUSH_DEFAULTS.maxInFlight
    this.maxPerOrigin = Math.min(opts.maxInFlightPerOrigin ?? PUSH_DEFAULTS.maxInFlightPerOrigin, this.maxInFlight)
    this.backoff = opts.backoff ?? { baseMs: PUSH_DEFAULTS.retryBaseMs, maxMs: PUSH_DEFAULTS.retryMaxMs }
    // Every request under way listens on the one stop signal: up to maxInFlight of them, past Node's warning at 10.
    setMaxListeners(0, this.aborts.signal)
    this.pollMs = opts.pollMs ?? PUSH_DEFAULTS.pollMs
    this.leaseMs = 2 * this.timeoutMs + 10_000
    this.agents = new PostAgents(this.maxPerOrigin)
  }

  /** Starts watching the outbox and sends what is already due. */
  async start(): Promise<void> {
    if (this.store.watchOutbox) {
      const stop = await this.store.watchOutbox(() => this.wake())
      if (this.stopped) await stop()
      else this.stopWatching = stop
    }
    if (this.stopped) return
    this.pollTimer = setInterval(() => this.wake(), this.pollMs)
    this.pollTimer.unref()
    this.wake()
  }

  /** Something may be due: a local save enqueued, another process did, or a slot freed. Claims at once (coalesced). */
  wake(): void {
    if (this.stopped) return
    void this.pumps.request()
  }

  /**
   * Stops claiming, gives requests under way a moment to finish (their
   * outcome is recorded), aborts the rest (recorded as a failed attempt, due
   * at once for whoever claims next) and closes the pooled connections.
   * Nothing of the sender is left running.
   */
  async stop(): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    clearInterval(this.pollTimer)
    clearTimeout(this.retryTimer)
    await this.stopWatching?.().catch((err: unknown) => this.log.warn(errorFields(err), "push outbox watch did not stop cleanly"))
    await this.pumps.idle()
    if (this.sends.size > 0) {
      let timer: NodeJS.Timeout | undefined
      const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS)))
      await Promise.race([Promise.all(this.sends), waited])
      clearTimeout(timer)
    }
    this.aborts.abort(new Error("the server stopped"))
    await Promise.all(this.sends)
    this.agents.destroy()
  }

  /** One claim of what is due, as much as the free slots take; never rejects. */
  private async pump(): Promise<void> {
    try {
      // Claims waiting for their origin's slot are bounded too (each holds a Task): at most maxInFlight of them beside
      // the requests under way, so a slow webhook's burst waits here up to that, then in the store.
      const free = Math.min(this.maxInFlight - this.inFlight, 2 * this.maxInFlight - this.held.size)
      if (free <= 0 || this.stopped) return
      const now = Date.now()
      const claims = await this.store.claim(this.opts.instance, free, this.leaseMs, now)
      const before = this.inFlight
      for (const claim of claims) this.accept(claim, now)
      // A full batch that started requests: there may be more due. One whose origins are all busy waits for a request to end.
      if (claims.length >= free && this.inFlight > before) this.wake()
    } catch (err) {
      this.log.warn(errorFields(err), "push outbox claim failed; trying again at the next poll")
    }
  }

  /**
   * Takes a claim on: sends it, or queues it for a slot of its origin (a
   * queue as long as that webhook's due channels: a burst of Tasks to one
   * webhook waits here, not in the store for a lease to run out).
   */
  private accept(claim: PushClaim, now: number): void {
    const key = claim.item.key
    const mine = this.held.get(key)
    if (mine) {
      // Handed out again (its lease ran out while it waited, or a store that renews its own instance's claims): the newest proof counts.
      mine.claim = claim
      mine.claimedAt = now
      return
    }
    const origin = originOf(claim.config.url)
    if (origin === undefined) return this.track(this.deadLetter(claim, "invalid", "the webhook URL is not a valid URL", claim.item.attempts))
    if (now - claim.item.enqueuedAt >= this.maxAgeMs) {
      return this.track(this.deadLetter(claim, origin, `not delivered within maxAge (${this.maxAgeMs} ms)`, claim.item.attempts))
    }
    const held: Held = { claim, origin, claimedAt: now }
    let slot = this.origins.get(origin)
    if (!slot) this.origins.set(origin, (slot = { inFlight: 0, waiting: [] }))
    if (slot.inFlight < this.maxPerOrigin) this.begin(held, slot)
    else {
      this.held.set(key, held)
      slot.waiting.push(held)
    }
  }

  /**
   * Sends a claim in a slot of its origin. The slot (and the count of POSTs
   * under way) is freed when the POST ends, not when the store has recorded
   * its outcome: a store that is slow to settle (a file system behind on its
   * flushes) does not hold up the next requests to the webhook; the claim
   * stays held (bounding the claims taken) until it is settled.
   */
  private begin(held: Held, slot: Origin): void {
    this.held.set(held.claim.item.key, held)
    this.inFlight++
    slot.inFlight++
    let posting = true
    const posted = () => {
      if (!posting) return
      posting = false
      this.inFlight--
      slot.inFlight--
      while (slot.inFlight < this.maxPerOrigin && slot.waiting.length > 0 && !this.stopped) this.begin(slot.waiting.shift()!, slot)
      if (slot.inFlight === 0 && slot.waiting.length === 0 && this.origins.get(held.origin) === slot) this.origins.delete(held.origin)
      // A slot is free: more may be claimed.
      this.wake()
    }
    this.track(
      this.send(held, posted).finally(() => {
        posted()
        this.held.delete(held.claim.item.key)
        // The channel's next notification may be due now.
        this.wake()
      }),
    )
  }

  private track(work: Promise<void>): void {
    this.sends.add(work)
    void work.finally(() => this.sends.delete(work))
  }

  /** POSTs a claim, calls `posted` when the POST ended, then records the outcome in the store. */
  private async send(held: Held, posted: () => void): Promise<void> {
    // Waited so long for its origin that the lease could end mid-request: let it go, a later claim hands it out again.
    if (Date.now() - held.claimedAt > this.leaseMs - this.timeoutMs - 5000) return
    const { item, config } = held.claim
    if (sentWithNextEvent(item.event, config.version)) {
      // Nothing to POST: the save's status event, next on this channel, carries the same Task.
      posted()
      await this.store.ack(held.claim).catch((err: unknown) => this.storeFailed(err, held.claim, "ack"))
      return
    }
    let outcome: AttemptOutcome
    const delivery = this.telemetry.pushDelivery(held.claim.config.url, held.claim.item.taskId, held.claim.item.traceContext)
    try {
      const options = { allow: this.opts.allow, timeoutMs: this.timeoutMs, agents: this.agents, signer: this.opts.signer, signal: this.aborts.signal }
      outcome = await delivery.within(() => attemptDelivery(held.claim, options))
    } catch (err) {
      outcome = { kind: "retry", error: (err as Error).message }
    }
    delivery.end(outcome.kind, outcome.kind === "retry" ? outcome.error : outcome.kind === "final" ? outcome.reason : undefined)
    posted()
    if (this.aborts.signal.aborted && outcome.kind === "retry") {
      // Cut short by stop(): due again at once, for this server's next start or another replica.
      await this.store.retryLater(held.claim, Date.now(), "interrupted: the server stopped").catch((err: unknown) => this.storeFailed(err, held.claim, "retryLater"))
      return
    }
    await this.settle(held, outcome)
  }

  /** Records an attempt's outcome in the store; a store failure leaves the claim to its lease (the notification is sent again). */
  private async settle(held: Held, outcome: AttemptOutcome): Promise<void> {
    const { claim, origin } = held
    const { item } = claim
    if (outcome.kind === "delivered") {
      this.telemetry.pushSettled("sent")
      await this.store.ack(claim).catch((err: unknown) => this.storeFailed(err, claim, "ack"))
      return
    }
    const attempts = item.attempts + 1
    if (outcome.kind === "final") return this.deadLetter(claim, origin, outcome.reason, attempts)
    if (this.opts.maxAttempts !== undefined && attempts >= this.opts.maxAttempts) {
      return this.deadLetter(claim, origin, `failed ${attempts} times (maxAttempts); the last: ${outcome.error}`, attempts)
    }
    const now = Date.now()
    // A Retry-After is honoured, but never sooner than the backoff's floor: "Retry-After: 0" must not make a tight loop.
    const notBefore = now + (outcome.retryAfterMs === undefined ? backoffDelay(this.backoff, attempts) : Math.max(this.backoff.baseMs, outcome.retryAfterMs))
    if (notBefore - item.enqueuedAt > this.maxAgeMs) {
      return this.deadLetter(claim, origin, `still failing when its next try would pass maxAge (${this.maxAgeMs} ms); the last: ${outcome.error}`, attempts)
    }
    this.log.info({ origin, taskId: item.taskId, configId: claim.config.id, attempts, error: outcome.error, retryInMs: notBefore - now }, "push notification not delivered; retrying")
    this.telemetry.pushSettled("retried")
    try {
      await this.store.retryLater(claim, notBefore, outcome.error)
      this.wakeAt(notBefore)
    } catch (err) {
      this.storeFailed(err, claim, "retryLater")
    }
  }

  private async deadLetter(claim: PushClaim, origin: string, reason: string, attempts: number): Promise<void> {
    this.telemetry.pushSettled("dead_lettered")
    try {
      await this.store.deadLetter(claim, reason, attempts)
      // Origin only: a webhook's path or query may hold a secret.
      this.log.warn({ origin, taskId: claim.item.taskId, configId: claim.config.id, attempts, reason }, "push notification dead-lettered")
    } catch (err) {
      this.storeFailed(err, claim, "deadLetter")
    }
  }

  private storeFailed(err: unknown, claim: PushClaim, step: string): void {
    this.log.warn({ taskId: claim.item.taskId, configId: claim.config.id, step, ...errorFields(err) }, "push outbox update failed; the notification is sent again once its claim runs out")
  }

  /** Claims again when a retry comes due: one timer, for the earliest of the retries this process scheduled. */
  private wakeAt(at: number): void {
    if (this.stopped) return
    const times = this.retryTimes
    let low = 0
    let high = times.length
    while (low < high) {
      const mid = (low + high) >>> 1
      if (times[mid] < at) low = mid + 1
      else high = mid
    }
    if (times[low] !== at) times.splice(low, 0, at)
    if (low === 0) this.armRetryTimer()
  }

  private armRetryTimer(): void {
    clearTimeout(this.retryTimer)
    this.retryTimer = undefined
    if (this.stopped || this.retryTimes.length === 0) return
    this.retryTimer = setTimeout(() => {
      const now = Date.now()
      let due = 0
      while (due < this.retryTimes.length && this.retryTimes[due] <= now) due++
      this.retryTimes.splice(0, due)
      this.armRetryTimer()
      this.wake()
    }, Math.min(MAX_TIMER_MS, Math.max(0, this.retryTimes[0] - Date.now())))
    this.retryTimer.unref()
  }
}

/** `scheme://host:port` of a URL, the unit the per-origin cap counts; undefined when it does not parse. */
function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin
  } catch {
    return undefined
  }
}
