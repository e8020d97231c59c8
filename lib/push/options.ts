import { MAX_TIMER_MS, parseDuration } from "../duration.js"
import { allowList, type AllowList } from "./guard.js"
import { PUSH_DEFAULTS, type PushSenderOptions } from "./sender.js"
import { loadSigningKey, type SigningKeyInput } from "./signer.js"

/** Push notifications' settings: the plugin's `push` option (`a2a.push` in serve()); `push: false` turns push off. */
export interface PushOptions {
  /**
   * Hosts webhooks may reach though they resolve to loopback, private, link-local or other refused
   * addresses: `HOST` for any port, `HOST:PORT` for that port alone (IPv6 as `[ADDR]:PORT`), e.g.
   * `["hooks.internal", "127.0.0.1:8080"]`. Default: none; every webhook must resolve to public addresses only.
   */
  allow?: string[]
  /** How long one POST may take before it counts as failed and is retried (ms; default 10000). */
  timeoutMs?: number
  /** Attempts before a notification goes to the dead letters (default: no limit, its age decides). */
  maxAttempts?: number
  /** Age past which an undelivered notification goes to the dead letters: ms, or a duration such as "24h" (default "24h"). */
  maxAge?: number | string
  /** POSTs under way at once from this server (default 64). */
  maxInFlight?: number
  /** POSTs under way at once to one webhook origin (scheme, host, port) (default 8): a slow webhook holds up only its own. */
  maxInFlightPerOrigin?: number
  /** The first retry waits up to this long, doubling per failure (ms; default 1000); each wait is drawn at random below its ceiling. */
  retryBaseMs?: number
  /** The longest wait between retries (ms; default 600000, ten minutes); a receiver's Retry-After is honoured beyond it. */
  retryMaxMs?: number
  /**
   * A private key to sign every notification with (Ed25519, P-256 or RSA of 2048 bits or more; PEM text or a
   * JWK): a JWT in `Authorization: Bearer`, or in X-A2A-Notification-Signature when the config has its own
   * authentication; the public key is served at `<prefix>/.well-known/jwks.json`.
   */
  signingKey?: SigningKeyInput
}

/** Throws a TypeError naming the option and what it wanted. */
export function checkPushOptions(push: unknown): void {
  if (push === undefined || push === false) return
  if (typeof push !== "object" || push === null || Array.isArray(push)) {
    throw new TypeError("toolnexus: opts.push should be an object such as { allow: [\"hooks.internal\"] }, or false to turn push notifications off")
  }
  const { allow } = push as PushOptions
  if (allow !== undefined) {
    if (!Array.isArray(allow) || !allow.every((entry) => typeof entry === "string")) {
      throw new TypeError('toolnexus: opts.push.allow should be an array of "HOST" or "HOST:PORT" strings')
    }
    try {
      allowList(allow)
    } catch (err) {
      throw new TypeError(`toolnexus: opts.push.allow: ${(err as Error).message}`, { cause: err })
    }
  }
  const options = push as PushOptions
  for (const key of ["timeoutMs", "retryBaseMs", "retryMaxMs"] as const) {
    const value = options[key]
    if (value !== undefined && !(Number.isInteger(value) && value > 0 && value <= MAX_TIMER_MS)) {
      throw new TypeError(`toolnexus: opts.push.${key} should be a positive integer number of milliseconds, at most ${MAX_TIMER_MS} (about 24.8 days)`)
    }
  }
  for (const key of ["maxAttempts", "maxInFlight", "maxInFlightPerOrigin"] as const) {
    const value = options[key]
    if (value !== undefined && !(Number.isInteger(value) && value > 0)) throw new TypeError(`toolnexus: opts.push.${key} should be a positive integer`)
  }
  if (options.maxAge !== undefined && !(parseDuration(options.maxAge)! > 0)) {
    throw new TypeError('toolnexus: opts.push.maxAge should be a number of ms > 0, or a duration such as "24h", "90m"')
  }
  if (options.signingKey !== undefined) {
    try {
      loadSigningKey(options.signingKey)
    } catch (err) {
      throw new TypeError(`toolnexus: opts.${(err as Error).message}`, { cause: err })
    }
  }
}

/** The sender's settings from checked push options (allow list, timeouts, caps, retries); the signer is built apart. */
export function senderSettings(push: PushOptions | undefined): Omit<PushSenderOptions, "store" | "log" | "instance" | "signer"> {
  const options = push ?? {}
  return {
    allow: pushAllowList(options),
    timeoutMs: options.timeoutMs,
    maxAttempts: options.maxAttempts,
    maxAgeMs: options.maxAge === undefined ? undefined : parseDuration(options.maxAge),
    maxInFlight: options.maxInFlight,
    maxInFlightPerOrigin: options.maxInFlightPerOrigin,
    backoff: { baseMs: options.retryBaseMs ?? PUSH_DEFAULTS.retryBaseMs, maxMs: options.retryMaxMs ?? PUSH_DEFAULTS.retryMaxMs },
  }
}

/** The allow list of checked push options. */
export function pushAllowList(push: PushOptions | false | undefined): AllowList {
  return allowList(push === false || push === undefined ? [] : (push.allow ?? []))
}
