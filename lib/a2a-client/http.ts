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
}

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
  const shown = withoutPassword(url)
  let response: Response
  let text: string
  try {
    response = await fetch(url, {
      method,
      headers: { accept: "application/json", ...(opts.body !== undefined && { "content-type": "application/json" }), ...opts.headers, ...opts.extraHeaders },
      ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }),
      signal,
      redirect: "follow",
    })
    text = await response.text()
  } catch (err) {
    if (opts.signal?.aborted) throw opts.signal.reason
    if (timeout.aborted) throw new RemoteAgentError(`${method} ${shown} did not answer within ${opts.timeoutMs} ms`)
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
