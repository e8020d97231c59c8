import { parseRetryAfter } from "../retry-after.js"

/**
 * What one delivery attempt's answer means for the notification: delivered,
 * to be tried again (and when the receiver asked to be tried), or failed for
 * good. The one place the retry rules live.
 */
export type AttemptOutcome =
  | { kind: "delivered" }
  | { kind: "retry"; error: string; retryAfterMs?: number }
  | { kind: "final"; reason: string }

/** Statuses worth another try: the receiver is busy, slow or broken for now. */
function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500
}

/** The outcome of an HTTP answer; `retryAfter` is its Retry-After header, `now` the time it came. */
export function outcomeOfStatus(status: number, retryAfter: string | undefined, now: number): AttemptOutcome {
  if (status >= 200 && status < 300) return { kind: "delivered" }
  if (isRetryableStatus(status)) {
    const retryAfterMs = parseRetryAfter(retryAfter, now)
    return retryAfterMs === undefined ? { kind: "retry", error: `HTTP ${status}` } : { kind: "retry", error: `HTTP ${status}`, retryAfterMs }
  }
  // Redirects are not followed (the next hop was never checked); other 4xx say the request itself is refused.
  const why = status >= 300 && status < 400 ? "a redirect, which is not followed" : "refused by the receiver"
  return { kind: "final", reason: `HTTP ${status} (${why})` }
}

/** How long retries wait: `baseMs` doubling per failed attempt, at most `maxMs`, drawn at random below that ("full jitter"). */
export interface Backoff {
  baseMs: number
  maxMs: number
}

/**
 * The wait before the next attempt after `attempts` failed ones (1 for the
 * first failure): a random time up to min(maxMs, baseMs * 2^(attempts-1)),
 * so receivers coming back are not hit by every sender at once.
 */
export function backoffDelay(backoff: Backoff, attempts: number, random: () => number = Math.random): number {
  const ceiling = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.min(Math.max(attempts - 1, 0), 40))
  return Math.floor(random() * ceiling)
}
