import type { FastifyRequest, RouteHandlerMethod } from "fastify"
import type { JsonRpcDispatcher } from "../lib/a2a/jsonrpc.js"
import { OpenStreams } from "../lib/streams/open-streams.js"
import { logA2ARequest } from "./request-log.js"
import { writeEvents } from "./sse.js"

/** Content types the JSON-RPC route parses as JSON. */
export const JSON_TYPES = ["application/json", "application/json-rpc", "application/a2a+json"]

interface JsonRpcRouteOptions {
  dispatcher: JsonRpcDispatcher
  /** Aborts when the server is closing: open streams end. */
  closing: AbortSignal
  /** The authenticated principal of a request, when authentication is on. */
  principalOf?: (request: FastifyRequest) => string | undefined
  /** How often an open stream gets a keep-alive comment. */
  heartbeatMs: number
  /** The endpoint URL a request reached, for the extended card. */
  cardUrl: (request: FastifyRequest) => string
}

/** `POST /`: one JSON-RPC request in, one JSON answer or an SSE stream out, and one log line per call. */
export function jsonRpcHandler({ dispatcher, closing, principalOf, heartbeatMs, cardUrl }: JsonRpcRouteOptions): RouteHandlerMethod {
  const streams = new OpenStreams(closing)
  return async function jsonRpc(request, reply) {
    const started = performance.now()
    // Only a streaming call asks for this signal: most requests never pay for a controller and listeners.
    let streamEnd: AbortSignal | undefined
    const endSignal = () => (streamEnd ??= streams.endedWhenGoneOrClosing(reply.raw))
    const outcome = await dispatcher.dispatch(request.body, {
      log: request.log,
      version: request.headers["a2a-version"],
      endSignal,
      principal: principalOf?.(request),
      address: request.ip,
      lastEventId: request.headers["last-event-id"],
      cardUrl: () => cardUrl(request),
      traceHeaders: (name) => request.headers[name],
    })
    const logLine = () => logA2ARequest(request, started, outcome)
    if (outcome.stream) {
      reply.hijack()
      await writeEvents(reply, outcome.stream, endSignal(), heartbeatMs, outcome.cutOff)
      logLine()
      return reply
    }
    logLine()
    if (outcome.body === undefined) return reply.code(204).send()
    if (outcome.errorAsEvent) return reply.type("text/event-stream; charset=utf-8").header("cache-control", "no-cache").send(`data: ${outcome.body}\n\n`)
    return reply.type("application/json; charset=utf-8").send(outcome.body)
  }
}
