import { parseRetryAfter } from "../retry-after.js"
import type { JsonObject } from "../types.js"

/** When and how often a failed model request is tried again. */
export interface RetryPolicy {
  /** Attempts after the first; 0 never retries. */
  maxRetries: number
  /** No attempt starts later than this many ms after the first one began. */
  deadlineMs: number
  /** The first backoff wait; it doubles each retry, up to 16 times this. */
  baseDelayMs: number
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 3, deadlineMs: 30_000, baseDelayMs: 250 }

/** How an adapter reaches its provider, with the client's defaults already applied. */
export interface EndpointOptions {
  baseUrl: string
  model: string
  apiKey?: string
  headers?: Record<string, string>
  timeoutMs: number
  retry: RetryPolicy
}

/** One provider URL and what to send it; shared by every turn of a client. */
export interface Endpoint {
  /** Names the provider in error messages: "openai", "anthropic". */
  provider: string
  url: string
  headers: Record<string, string>
  timeoutMs: number
  retry: RetryPolicy
  /** What a good answer is, for the error when it is not: "a chat completion". */
  expects: string
}

/** The model endpoint answered with a non-2xx status, even after any retries. */
class ModelEndpointError extends Error {
  readonly status: number
  /** Requests made before giving up, the first one included. */
  readonly attempts: number

  constructor(message: string, status: number, attempts = 1) {
    super(message)
    this.name = "ModelEndpointError"
    this.status = status
    this.attempts = attempts
  }
}

/** What one request came to, short of the caller aborting it. */
type Attempt =
  | { kind: "answer"; status: number; statusText: string; text: string; retryAfterMs?: number }
  | { kind: "unreachable"; reason: string }
  | { kind: "timeout" }

/** Either wait and try again, or stop; `note` says why we stopped when the user could not guess it. */
type NextStep = { waitMs: number } | { note?: string }

/**
 * POSTs `body` as JSON and hands the parsed answer to `read`, which returns
 * undefined when the answer is not the shape it wants. A 408, 409, 429 or 5xx
 * answer and a failed connection are retried with backoff (see RetryPolicy).
 * Every failure becomes an Error that names the provider and never shows a credential.
 */
export async function postJson<T>(
  endpoint: Endpoint,
  body: JsonObject,
  signal: AbortSignal | undefined,
  read: (answer: unknown) => T | undefined,
): Promise<T> {
  const payload = JSON.stringify(body)
  const deadline = Date.now() + endpoint.retry.deadlineMs
  for (let attempt = 1; ; attempt++) {
    const result = await sendOnce(endpoint, payload, signal)
    const next = nextStep(result, attempt, endpoint.retry, deadline)
    if ("waitMs" in next) {
      await sleep(next.waitMs, signal)
      continue
    }
    return settle(endpoint, result, attempt, next.note, read)
  }
}

/** One POST; only the caller's abort escapes as a throw, every other failure is an Attempt. */
async function sendOnce(endpoint: Endpoint, payload: string, signal: AbortSignal | undefined): Promise<Attempt> {
  // Not AbortSignal.timeout: its timer stays pending for the whole timeoutMs after the answer came.
  const timeout = new AbortController()
  const timer = setTimeout(() => timeout.abort(), endpoint.timeoutMs)
  timer.unref()
  try {
    const response = await fetch(endpoint.url, {
      method: "POST",
      headers: endpoint.headers,
      body: payload,
      signal: signal ? AbortSignal.any([signal, timeout.signal]) : timeout.signal,
    })
    const text = await response.text()
    const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), Date.now())
    return { kind: "answer", status: response.status, statusText: response.statusText, text, ...(retryAfterMs !== undefined && { retryAfterMs }) }
  } catch (err) {
    if (signal?.aborted) throw signal.reason
    if (timeout.signal.aborted) return { kind: "timeout" }
    return { kind: "unreachable", reason: failureReason(err) }
  } finally {
    clearTimeout(timer)
  }
}

function nextStep(result: Attempt, attempt: number, policy: RetryPolicy, deadline: number): NextStep {
  if (!isRetryable(result) || attempt > policy.maxRetries) return {}
  const retryAfterMs = result.kind === "answer" ? result.retryAfterMs : undefined
  const waitMs = retryAfterMs ?? backoffMs(attempt, policy.baseDelayMs)
  if (Date.now() + waitMs < deadline) return { waitMs }
  // Retrying sooner than the server asked would only earn another refusal.
  if (retryAfterMs !== undefined) return { note: `it asked to be retried in ${Math.ceil(retryAfterMs / 1000)} s, past opts.retryDeadlineMs` }
  return {}
}

/**
 * Worth another try: overload, rate limits and conflicts pass, and so may a
 * dropped connection. A timeout is not retried: the model is slow, not flaky,
 * and another wait of opts.timeoutMs would only delay the failure.
 */
function isRetryable(result: Attempt): boolean {
  if (result.kind === "unreachable") return true
  if (result.kind === "timeout") return false
  const { status } = result
  return status === 408 || status === 409 || status === 429 || status >= 500
}

/** Exponential, capped at 16 × base, with jitter so that clients failed together do not retry together. */
function backoffMs(attempt: number, baseDelayMs: number): number {
  const ceiling = baseDelayMs * Math.min(2 ** (attempt - 1), 16)
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2)
}

/** Waits `ms`, or rejects with the signal's reason the moment it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort)
      resolve()
    }, ms)
    signal?.addEventListener("abort", onAbort, { once: true })
  })
}

/** The last attempt's result as the turn's answer, or as an Error that says how many attempts it took. */
function settle<T>(endpoint: Endpoint, result: Attempt, attempts: number, note: string | undefined, read: (answer: unknown) => T | undefined): T {
  const { provider, url, timeoutMs } = endpoint
  const hide = redactor(endpoint.headers)
  const after = attempts > 1 ? ` after ${attempts} attempts` : ""
  if (result.kind === "timeout") {
    throw new Error(`The ${provider} model did not answer within ${timeoutMs} ms${attempts > 1 ? ` on attempt ${attempts}` : ""}; raise opts.timeoutMs if it is just slow`)
  }
  if (result.kind === "unreachable") {
    throw new Error(hide(`Could not reach the ${provider} model endpoint at ${displayUrl(url)} (${result.reason})${after}; check opts.baseUrl and that the server is up`))
  }
  const { status, statusText } = result
  // Redact before any cut: a key cut in two no longer matches, and its start would show.
  const text = hide(result.text)
  if (status < 200 || status > 299) {
    const answered = `${status}${statusText ? ` ${statusText}` : ""}`
    const message = `${provider} model endpoint answered ${answered}${after}: ${providerMessage(text)}${note ? `; ${note}` : ""}`
    throw new ModelEndpointError(hide(message), status, attempts)
  }
  const answer = parseJson(result.text)
  const turn = answer === undefined ? undefined : read(answer)
  if (turn === undefined) {
    throw new Error(hide(`${provider} model endpoint at ${displayUrl(url)} answered with something that is not ${endpoint.expects}: ${snippet(text) || "(empty body)"}; check opts.baseUrl and opts.style`))
  }
  return turn
}

/** `baseUrl` + `path`, whether or not the user ended baseUrl with a slash. */
export function joinUrl(baseUrl: string, path: string): string {
  return `${baseUrl.replace(/\/+$/, "")}${path}`
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value)
}

/** The start of a text, on one line, for an error message. */
export function snippet(text: string, max = 200): string {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max)}…` : line
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** How much of a provider's own error message is kept: enough for its longest usual ones (a context-length refusal). */
const PROVIDER_MESSAGE_MAX = 1000

/**
 * The provider's own words: `{error:{message}}` (OpenAI, Anthropic), `{error:"..."}` or `{message}`,
 * else the raw text; cut either way, since the body (and so a failed Task's status.message) is the endpoint's choice.
 */
function providerMessage(text: string): string {
  const answer = parseJson(text)
  if (isObject(answer)) {
    const { error, message } = answer
    const words = typeof error === "string" ? error : isObject(error) && typeof error.message === "string" ? error.message : typeof message === "string" ? message : undefined
    if (words !== undefined) return snippet(words, PROVIDER_MESSAGE_MAX)
  }
  return snippet(text) || "(empty body)"
}

/**
 * Blanks out every credential we send, in case an endpoint echoes one back.
 * The bare token of "Bearer <key>" counts too.
 */
function redactor(headers: Record<string, string>): (message: string) => string {
  const secrets = Object.entries(headers)
    .filter(([name]) => /auth|key|token|secret/i.test(name))
    .flatMap(([, value]) => [value, value.trim().split(/\s+/).at(-1) ?? ""])
    .filter((secret) => secret.length > 0)
    .sort((a, b) => b.length - a.length)
  return (message) => secrets.reduce((text, secret) => text.split(secret).join("[redacted]"), message)
}

/** The URL without user info or query, where people sometimes put keys. */
function displayUrl(url: string): string {
  const { origin, pathname } = new URL(url)
  return `${origin}${pathname}`
}

function failureReason(err: unknown): string {
  const cause = err instanceof Error ? err.cause : undefined
  if (isObject(cause) && typeof cause.code === "string") return cause.code
  if (cause instanceof Error) return cause.message
  return err instanceof Error ? err.message : String(err)
}
