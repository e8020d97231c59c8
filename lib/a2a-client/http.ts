import { withTraceHeaders } from "../observe/propagation.js"
import { readTextAtMost } from "../read-at-most.js"
import { withoutPassword } from "../url-credentials.js"

/**
 * The HTTP calls of the A2A client: JSON in, JSON out, the agent's headers on
 * every call, each call bounded by a timeout and by the caller's signal.
 */

/** A call the remote agent answered with an error: its status (HTTP) or code (JSON-RPC) and its message. */
export class RemoteAgentError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message)
    this.name = "RemoteAgentError"
  }
}

export interface HttpOptions {
  /** Sent with every call (Authorization, an API key). */
  headers: Record<string, string>
  /** How long one call may take, in ms. */
  timeoutMs: number
  /** The largest answer read, in bytes; default MAX_ANSWER_BYTES. */
  maxBytes?: number
}

/** An answer larger than this is refused: an agent's Task is far smaller (toolnexus keeps its own under 4 MiB). */
export const MAX_ANSWER_BYTES = 8 * 1024 * 1024

/** What a call answered: its status and its body parsed as JSON (undefined when empty or not JSON). */
export interface HttpAnswer {
  status: number
  body: unknown
}

/**
 * Sends one request. A refused connection, a timeout or an unreadable answer throws a
 * RemoteAgentError saying which; the caller's abort rethrows the signal's reason.
 */
export async function callJson(
  method: "GET" | "POST",
  url: string,
  opts: HttpOptions & { extraHeaders?: Record<string, string>; body?: unknown; signal?: AbortSignal },
): Promise<HttpAnswer> {
  const timeout = AbortSignal.timeout(opts.timeoutMs)
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout
  let response: Response
  let text: string
  let at = url
  try {
    response = await fetchFollowingSameOrigin(method, url, opts, signal, (next) => (at = next))
    const maxBytes = opts.maxBytes ?? MAX_ANSWER_BYTES
    text = await readTextAtMost(response.body, maxBytes, () => new RemoteAgentError(`the answer is larger than ${maxBytes} bytes`))
  } catch (err) {
    const shown = withoutPassword(at)
    if (opts.signal?.aborted) throw opts.signal.reason
    if (timeout.aborted) throw new RemoteAgentError(`${method} ${shown} did not answer within ${opts.timeoutMs} ms`)
    if (err instanceof RemoteAgentError) throw new RemoteAgentError(`${method} ${shown}: ${err.message}`, err.status)
    const cause = (err as Error & { cause?: { code?: string; message?: string } }).cause
    throw new RemoteAgentError(`${method} ${shown} failed: ${cause?.code ?? cause?.message ?? (err as Error).message}`)
  }
  let body: unknown
  try {
    body = text === "" ? undefined : JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: response.status, body }
}

/** Redirects followed in one call, all on the agent's own origin. */
const MAX_REDIRECTS = 5
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308])

/**
 * Sends the request, following redirects only within the origin it was sent to: the agent's headers
 * (Authorization, an API key) go with every call, and a redirect must not carry them, or the body, to
 * another host. A redirect elsewhere is refused, naming where it pointed so the operator can configure
 * that URL if it is trusted. 303 (and 301/302 after a POST) continue as a GET, as browsers do.
 */
async function fetchFollowingSameOrigin(
  method: "GET" | "POST",
  url: string,
  opts: HttpOptions & { extraHeaders?: Record<string, string>; body?: unknown },
  signal: AbortSignal,
  onRedirect: (next: string) => void,
): Promise<Response> {
  const origin = new URL(url).origin
  let current = url
  let currentMethod = method
  let body = opts.body
  for (let redirects = 0; ; redirects++) {
    const response = await fetch(current, {
      method: currentMethod,
      // The active span's traceparent goes along, so a trace crosses to the other agent (none without an SDK).
      headers: withTraceHeaders({ accept: "application/json", ...(body !== undefined && { "content-type": "application/json" }), ...opts.headers, ...opts.extraHeaders }),
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal,
      redirect: "manual",
    })
    const location = REDIRECT_STATUSES.has(response.status) ? response.headers.get("location") : null
    if (location === null) return response
    await response.body?.cancel()
    let next: URL
    try {
      next = new URL(location, current)
    } catch {
      throw new RemoteAgentError(`answered HTTP ${response.status} with a Location that is not a URL (${JSON.stringify(location.slice(0, 200))})`, response.status)
    }
    if (next.origin !== origin) {
      throw new RemoteAgentError(
        `answered HTTP ${response.status}, a redirect to another origin (${withoutPassword(next.href)}), which is not followed so the agent's headers stay with its own origin: configure the agent's URL on that origin if you trust it`,
        response.status,
      )
    }
    if (redirects === MAX_REDIRECTS) throw new RemoteAgentError(`redirected more than ${MAX_REDIRECTS} times`, response.status)
    if (response.status === 303 || ((response.status === 301 || response.status === 302) && currentMethod === "POST")) {
      currentMethod = "GET"
      body = undefined
    }
    current = next.href
    onRedirect(current)
  }
}
