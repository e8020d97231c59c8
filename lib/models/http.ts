import type { JsonObject } from "../types.js"

/** How an adapter reaches its provider, with the client's defaults already applied. */
export interface EndpointOptions {
  baseUrl: string
  model: string
  apiKey?: string
  headers?: Record<string, string>
  timeoutMs: number
}

/** One provider URL and what to send it; shared by every turn of a client. */
export interface Endpoint {
  /** Names the provider in error messages: "openai", "anthropic". */
  provider: string
  url: string
  headers: Record<string, string>
  timeoutMs: number
  /** What a good answer is, for the error when it is not: "a chat completion". */
  expects: string
}

/** The model endpoint answered with a non-2xx status; `status` lets a caller decide to retry. */
export class ModelEndpointError extends Error {
  readonly status: number

  constructor(message: string, status: number) {
    super(message)
    this.name = "ModelEndpointError"
    this.status = status
  }
}

/**
 * POSTs `body` as JSON and hands the parsed answer to `read`, which returns
 * undefined when the answer is not the shape it wants. Every failure becomes
 * an Error that names the provider and never shows a credential.
 */
export async function postJson<T>(
  endpoint: Endpoint,
  body: JsonObject,
  signal: AbortSignal | undefined,
  read: (answer: unknown) => T | undefined,
): Promise<T> {
  const { provider, url, headers, timeoutMs } = endpoint
  const hide = redactor(headers)
  const timeout = AbortSignal.timeout(timeoutMs)
  let response: Response
  let text: string
  try {
    response = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    })
    text = await response.text()
  } catch (err) {
    if (signal?.aborted) throw signal.reason
    if (timeout.aborted) {
      throw new Error(`The ${provider} model did not answer within ${timeoutMs} ms; raise opts.timeoutMs if it is just slow`)
    }
    throw new Error(hide(`Could not reach the ${provider} model endpoint at ${displayUrl(url)} (${failureReason(err)}); check opts.baseUrl and that the server is up`))
  }

  if (!response.ok) {
    const status = `${response.status}${response.statusText ? ` ${response.statusText}` : ""}`
    throw new ModelEndpointError(hide(`${provider} model endpoint answered ${status}: ${providerMessage(text)}`), response.status)
  }
  const answer = parseJson(text)
  const result = answer === undefined ? undefined : read(answer)
  if (result === undefined) {
    throw new Error(hide(`${provider} model endpoint at ${displayUrl(url)} answered with something that is not ${endpoint.expects}: ${snippet(text) || "(empty body)"}; check opts.baseUrl and opts.style`))
  }
  return result
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

/** The provider's own words: `{error:{message}}` (OpenAI, Anthropic), `{error:"..."}` or `{message}`, else the raw text. */
function providerMessage(text: string): string {
  const answer = parseJson(text)
  if (isObject(answer)) {
    const { error, message } = answer
    if (typeof error === "string") return error
    if (isObject(error) && typeof error.message === "string") return error.message
    if (typeof message === "string") return message
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
