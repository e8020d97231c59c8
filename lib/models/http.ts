import { withTraceHeaders } from "../observe/propagation.js"
import { readTextAtMost } from "../read-at-most.js"
import { credentialRedactor } from "../redact.js"
import { parseRetryAfter } from "../retry-after.js"
import type { JsonObject } from "../types.js"
import { sseEvents, SseLineTooLongError, type SseEvent } from "./sse-lines.js"

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

/** What one turn may cost, past which it fails naming the limit: bytes read, a stream line's length, total time. */
export interface TurnLimits {
  /** The most bytes of one answer read, streamed or whole. */
  maxResponseBytes: number
  /** The longest line of a streamed answer, in characters (and the most data of one event). */
  maxLineLength: number
  /** The longest a turn may take in all, retries and every chunk of a stream included, in ms. */
  turnTimeoutMs: number
}

/** No honest model comes near these; a broken or hostile endpoint meets them long before it hurts the server. */
export const DEFAULT_TURN_LIMITS: TurnLimits = { maxResponseBytes: 64 * 1024 * 1024, maxLineLength: 8 * 1024 * 1024, turnTimeoutMs: 10 * 60_000 }

/** How an adapter reaches its provider, with the client's defaults already applied. */
export interface EndpointOptions {
  baseUrl: string
  model: string
  apiKey?: string
  headers?: Record<string, string>
  timeoutMs: number
  retry: RetryPolicy
  limits: TurnLimits
}

/** One provider URL and what to send it; shared by every turn of a client. */
export interface Endpoint {
  /** Names the provider in error messages: "openai", "anthropic". */
  provider: string
  url: string
  headers: Record<string, string>
  timeoutMs: number
  retry: RetryPolicy
  limits: TurnLimits
  /** What a good answer is, for the error when it is not: "a chat completion". */
  expects: string
  /** Set once the endpoint refused a streamed request that it answered whole: it is asked whole from then on. */
  wholeOnly?: boolean
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

/** Reads one streamed answer, event by event; an adapter makes a fresh one for each attempt. */
export interface StreamReader<T> {
  /** The event that ends a whole answer, named when a stream stops short of it: "[DONE]", "message_stop". */
  readonly terminal: string
  /**
   * Takes the next event, handing any text on to `emit`; returns the turn at
   * the terminal event. Throws a StreamFault at an event it will not take.
   */
  take(event: SseEvent, emit: (text: string) => void): T | undefined
}

/** Asks for the answer as a stream: `onText` gets each piece of text as it arrives. */
export interface Streaming<T> {
  onText: (delta: string) => void
  reader: () => StreamReader<T>
}

/** A StreamReader's refusal of an event: `says` what it was; `body`, the event's data, is shown like an error answer's body (redacted, then cut). */
export class StreamFault extends Error {
  readonly says: string
  readonly body: string

  constructor(says: string, body: string) {
    super(says)
    this.name = "StreamFault"
    this.says = says
    this.body = body
  }
}

/** An event's data as the JSON object both providers send; a StreamFault when it is not one. */
export function jsonEventData(data: string): JsonObject {
  const parsed = parseJson(data)
  if (!isObject(parsed)) throw new StreamFault("it sent an event that is not a JSON object", data)
  return parsed
}

/** A turn past one of its TurnLimits: never retried (the same request would meet it again); the message names the option. */
class TurnLimitError extends Error {
  constructor(message: string) {
    super(message)
    this.name = "TurnLimitError"
  }
}

/** What one request came to, short of the caller aborting it. */
type Attempt<T> =
  | { kind: "answer"; status: number; statusText: string; text: string; retryAfterMs?: number }
  | { kind: "unreachable"; reason: string }
  | { kind: "timeout" }
  | { kind: "streamed"; turn: T }
  /** A streamed answer stopped short; `afterText`: some of its text had reached the caller; `stalled`: it went quiet for timeoutMs. */
  | { kind: "cut"; reason: string; afterText: boolean; stalled: boolean }

/** Either wait and try again, or stop; `note` says why we stopped when the user could not guess it. */
type NextStep = { waitMs: number } | { note?: string }

/**
 * POSTs `body` as JSON and hands the parsed answer to `read`, which returns
 * undefined when the answer is not the shape it wants. A 408, 409, 429 or 5xx
 * answer and a failed connection are retried with backoff (see RetryPolicy).
 * Every failure becomes an Error that names the provider and never shows a credential.
 *
 * With `streaming`, an answer of type text/event-stream is read event by event
 * through its reader instead (any other answer is read as above), and timeoutMs
 * bounds each wait for more of it, not its whole length. A stream that fails
 * before any text reached `onText` is retried like a failed connection; once
 * text has gone out, it is not: a retry would say that text again.
 */
export async function postJson<T>(
  endpoint: Endpoint,
  body: JsonObject,
  signal: AbortSignal | undefined,
  read: (answer: unknown) => T | undefined,
  streaming?: Streaming<T>,
): Promise<T> {
  const payload = JSON.stringify(body)
  const deadline = Date.now() + endpoint.retry.deadlineMs
  // The whole turn, retries and a stream's every chunk included: timeoutMs bounds each wait, this their sum.
  const { turnTimeoutMs } = endpoint.limits
  const turn = new AbortController()
  const turnTimer = setTimeout(
    () => turn.abort(new TurnLimitError(`The ${endpoint.provider} model's turn took longer than ${turnTimeoutMs} ms in all; the limit is createClient's turnTimeoutMs (--model-turn-timeout)`)),
    turnTimeoutMs,
  )
  turnTimer.unref()
  const bounded = signal ? AbortSignal.any([signal, turn.signal]) : turn.signal
  try {
    for (let attempt = 1; ; attempt++) {
      const result = await sendOnce(endpoint, payload, bounded, streaming)
      const next = nextStep(result, attempt, endpoint.retry, deadline)
      if ("waitMs" in next) {
        await sleep(next.waitMs, bounded)
        continue
      }
      return settle(endpoint, result, attempt, next.note, read)
    }
  } finally {
    clearTimeout(turnTimer)
  }
}

/**
 * The turn asked as a stream (`streamBody`, read by `streaming`), or whole
 * (`wholeBody`) from an endpoint that refuses streamed requests: one that
 * answers a streamed request 400 or 422 and the same request without
 * streaming 2xx (an older server, a proxy, a provider without
 * `stream_options`) is asked whole from then on. A 400 that is not about
 * streaming (a prompt too long) fails the whole request too, with its own words.
 */
export async function postStreamed<T>(
  endpoint: Endpoint,
  streamBody: JsonObject,
  wholeBody: JsonObject,
  signal: AbortSignal | undefined,
  read: (answer: unknown) => T | undefined,
  streaming: Streaming<T>,
): Promise<T> {
  if (endpoint.wholeOnly) return postJson(endpoint, wholeBody, signal, read)
  try {
    return await postJson(endpoint, streamBody, signal, read, streaming)
  } catch (err) {
    if (!(err instanceof ModelEndpointError && (err.status === 400 || err.status === 422))) throw err
    const whole = await postJson(endpoint, wholeBody, signal, read)
    endpoint.wholeOnly = true
    return whole
  }
}

/** One POST; only the caller's abort escapes as a throw, every other failure is an Attempt. */
async function sendOnce<T>(endpoint: Endpoint, payload: string, signal: AbortSignal | undefined, streaming: Streaming<T> | undefined): Promise<Attempt<T>> {
  // Not AbortSignal.timeout: its timer stays pending for the whole timeoutMs after the answer came, and cannot be restarted.
  const timeout = new AbortController()
  const timer = setTimeout(() => timeout.abort(), endpoint.timeoutMs)
  timer.unref()
  let stream: { afterText: boolean } | undefined // set once a streamed answer has begun
  try {
    const response = await fetch(endpoint.url, {
      method: "POST",
      // The model call's span goes on at the provider (or a proxy that traces).
      headers: withTraceHeaders(endpoint.headers),
      body: payload,
      signal: signal ? AbortSignal.any([signal, timeout.signal]) : timeout.signal,
    })
    if (streaming && response.ok && response.body && isEventStream(response.headers.get("content-type"))) {
      stream = { afterText: false }
      return await readStream(endpoint, response.body, streaming, stream, () => timer.refresh())
    }
    const text = await readTextAtMost(response.body, endpoint.limits.maxResponseBytes, () => tooLarge(endpoint))
    const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"), Date.now())
    return { kind: "answer", status: response.status, statusText: response.statusText, text, ...(retryAfterMs !== undefined && { retryAfterMs }) }
  } catch (err) {
    if (signal?.aborted) throw signal.reason
    if (err instanceof TurnLimitError) throw err
    if (err instanceof SseLineTooLongError) {
      throw new TurnLimitError(`The ${endpoint.provider} model's event stream held a line (or an event) longer than ${err.limit} characters; the limit is createClient's maxLineLength (--model-max-line)`)
    }
    if (stream) {
      const stalled = timeout.signal.aborted
      const reason = stalled ? `nothing came for ${endpoint.timeoutMs} ms` : streamFailure(err, credentialRedactor(endpoint.headers))
      return { kind: "cut", reason, afterText: stream.afterText, stalled }
    }
    if (timeout.signal.aborted) return { kind: "timeout" }
    return { kind: "unreachable", reason: failureReason(err) }
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Feeds the body's events to a fresh reader until its terminal event.
 * `touch` restarts the request's timeout at every chunk, so it bounds a stall, not a long answer.
 */
async function readStream<T>(endpoint: Endpoint, body: AsyncIterable<Uint8Array>, streaming: Streaming<T>, progress: { afterText: boolean }, touch: () => void): Promise<Attempt<T>> {
  touch()
  const reader = streaming.reader()
  const emit = (text: string) => {
    if (text === "") return
    progress.afterText = true
    streaming.onText(text)
  }
  for await (const event of sseEvents(touching(endpoint, body, touch), endpoint.limits.maxLineLength)) {
    const turn = reader.take(event, emit)
    if (turn !== undefined) return { kind: "streamed", turn } // leaving the loop cancels the rest of the body
  }
  return { kind: "cut", reason: `the stream ended before ${reader.terminal}`, afterText: progress.afterText, stalled: false }
}

/** The body's chunks, restarting the idle timeout at each, and refused past maxResponseBytes. */
async function* touching(endpoint: Endpoint, body: AsyncIterable<Uint8Array>, touch: () => void): AsyncGenerator<Uint8Array> {
  let size = 0
  for await (const chunk of body) {
    size += chunk.byteLength
    if (size > endpoint.limits.maxResponseBytes) throw tooLarge(endpoint)
    touch()
    yield chunk
  }
}

function tooLarge(endpoint: Endpoint): TurnLimitError {
  return new TurnLimitError(`The ${endpoint.provider} model's answer ran past ${endpoint.limits.maxResponseBytes} bytes; the limit is createClient's maxResponseBytes (--model-max-response)`)
}

/** "text/event-stream", whatever its parameters and case. */
function isEventStream(contentType: string | null): boolean {
  return contentType?.split(";")[0].trim().toLowerCase() === "text/event-stream"
}

/** Why a stream stopped: the reader's refusal with the provider's words, or what broke the connection. */
function streamFailure(err: unknown, hide: (text: string) => string): string {
  if (err instanceof StreamFault) return `${err.says}: ${providerMessage(hide(err.body))}`
  const cause = err instanceof Error ? err.cause : undefined
  if (cause instanceof Error) return cause.message // undici's "terminated" says less than its cause, "other side closed"
  return failureReason(err)
}

function nextStep<T>(result: Attempt<T>, attempt: number, policy: RetryPolicy, deadline: number): NextStep {
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
 * dropped connection, or a stream cut before any of its text went out. A
 * timeout is not retried: the model is slow, not flaky, and another wait of
 * opts.timeoutMs would only delay the failure.
 */
function isRetryable<T>(result: Attempt<T>): boolean {
  if (result.kind === "unreachable") return true
  if (result.kind === "timeout" || result.kind === "streamed") return false
  if (result.kind === "cut") return !result.afterText && !result.stalled
  const { status } = result
  return status === 408 || status === 409 || status === 429 || status >= 500
}

/** Exponential, capped at 16 × base, with jitter so that clients failed together do not retry together. */
export function backoffMs(attempt: number, baseDelayMs: number): number {
  const ceiling = baseDelayMs * Math.min(2 ** (attempt - 1), 16)
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2)
}

/** Waits `ms`, or rejects with the signal's reason the moment it aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
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
function settle<T>(endpoint: Endpoint, result: Attempt<T>, attempts: number, note: string | undefined, read: (answer: unknown) => T | undefined): T {
  const { provider, url, timeoutMs } = endpoint
  const hide = credentialRedactor(endpoint.headers)
  const after = attempts > 1 ? ` after ${attempts} attempts` : ""
  const slow = "; raise opts.timeoutMs if it is just slow"
  if (result.kind === "streamed") return result.turn
  if (result.kind === "timeout") {
    throw new Error(`The ${provider} model did not answer within ${timeoutMs} ms${attempts > 1 ? ` on attempt ${attempts}` : ""}${slow}`)
  }
  if (result.kind === "cut") {
    const { reason, afterText, stalled } = result
    const message = afterText
      ? `The ${provider} model's answer broke off after streaming had begun (${reason}); not retried, since the text already streamed would be said twice`
      : `The ${provider} model's streamed answer broke off before any text (${reason})${after}`
    throw new Error(hide(`${message}${stalled ? slow : ""}`))
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
export const PROVIDER_MESSAGE_MAX = 1000

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
