import type { ServerOptions } from "node:http"
import { constants, type Http2SecureServer } from "node:http2"

/** How long a peer may take at each stage of an HTTP request before serve() closes its connection. */
export interface ServerTimeouts {
  /** Receiving the whole request, headers and body (Node's requestTimeout); a body dribbled slower is cut off with 408. Default 30000, or headersMs when that is longer. */
  requestMs?: number
  /** Receiving the request headers (Node's headersTimeout); at most requestMs. Default 10000. */
  headersMs?: number
  /** How long a kept-alive connection may sit idle between requests (keepAliveTimeout). Default 72000, past common proxies' 60 s. */
  idleMs?: number
}

export const DEFAULT_TIMEOUTS: Required<ServerTimeouts> = { requestMs: 30_000, headersMs: 10_000, idleMs: 72_000 }

/**
 * Fastify options for the timeouts. The socket inactivity timeout (connectionTimeout) stays off: a blocking
 * SendMessage or a stream may rightly be quiet for minutes while its Task runs.
 */
export function timeoutOptions(timeouts: ServerTimeouts | undefined): { requestTimeout: number; keepAliveTimeout: number; http: ServerOptions } {
  if (timeouts !== undefined && (typeof timeouts !== "object" || timeouts === null)) {
    throw new TypeError(`serve: timeouts should be an object { requestMs?, headersMs?, idleMs? }`)
  }
  // Headers alone asked longer than the default whole request: the whole request gets at least as long.
  const headersAsked = typeof timeouts?.headersMs === "number" ? timeouts.headersMs : 0
  const requestMs = positiveMs("requestMs", timeouts?.requestMs ?? Math.max(DEFAULT_TIMEOUTS.requestMs, headersAsked))
  const headersMs = positiveMs("headersMs", timeouts?.headersMs ?? Math.min(DEFAULT_TIMEOUTS.headersMs, requestMs))
  const idleMs = positiveMs("idleMs", timeouts?.idleMs ?? DEFAULT_TIMEOUTS.idleMs)
  if (headersMs > requestMs) throw new RangeError(`serve: timeouts.headersMs (${headersMs}) should be at most timeouts.requestMs (${requestMs})`)
  // Node checks both deadlines only every connectionsCheckingInterval (30 s by default): check often enough to keep them.
  const connectionsCheckingInterval = Math.max(10, Math.min(1000, Math.floor(headersMs / 2)))
  return { requestTimeout: requestMs, keepAliveTimeout: idleMs, http: { headersTimeout: headersMs, connectionsCheckingInterval } }
}

/**
 * The deadlines on serve()'s TLS listener, an HTTP/2 server that also takes HTTP/1.1, where Fastify sets none:
 * Node reads the HTTP/1.1 ones from the server's own fields (the checking interval when it starts listening).
 * An HTTP/2 request has no socket of its own for them: its stream is reset when its body has not ended
 * within requestMs, as an HTTP/1.1 one is closed with 408. (Fastify closes an HTTP/2 connection idle for
 * its http2SessionTimeout, which serve() sets to idleMs.)
 */
export function applyToSecureServer(server: Http2SecureServer, { requestTimeout, keepAliveTimeout, http }: ReturnType<typeof timeoutOptions>): void {
  Object.assign(server, { requestTimeout, keepAliveTimeout, headersTimeout: http.headersTimeout, connectionsCheckingInterval: http.connectionsCheckingInterval })
  server.on("stream", (stream) => {
    if (stream.endAfterHeaders) return // no body to wait for
    const deadline = setTimeout(() => stream.close(constants.NGHTTP2_CANCEL), requestTimeout)
    deadline.unref()
    const done = () => clearTimeout(deadline)
    stream.once("end", done)
    stream.once("close", done)
  })
}

function positiveMs(field: keyof ServerTimeouts, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) {
    throw new TypeError(`serve: timeouts.${field} should be a positive integer of milliseconds, got ${JSON.stringify(value)}`)
  }
  return value
}
