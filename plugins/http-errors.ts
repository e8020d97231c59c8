import type { FastifyError, FastifyReply, FastifyRequest } from "fastify"
import { A2AError, ErrorCode } from "../lib/a2a/errors.js"
import type { A2AOperations } from "../lib/a2a/operations.js"
import type { Binding } from "../lib/observe/telemetry.js"
import type { JsonRpcResponse } from "../lib/a2a/jsonrpc.js"
import { answerVersion, codecFor } from "../lib/a2a/wire.js"

/** Refusals after which the connection closes: a peer without credentials, or sending too much, gets no kept-alive socket to hold. */
const CLOSES_CONNECTION: ReadonlySet<number> = new Set([401, 413])

/**
 * Ends the connection after a refusal with `status`, when it is one that
 * closes it: HTTP/1 with `Connection: close`; HTTP/2, which has no such
 * header, by ending the session once the answer is sent (a GOAWAY: streams
 * under way finish, no new one starts).
 */
export function closeAfterRefusal(request: FastifyRequest, reply: FastifyReply, status: number): void {
  if (!CLOSES_CONNECTION.has(status)) return
  if (request.raw.httpVersionMajor !== 2) {
    reply.header("connection", "close")
    return
  }
  const session = (request.raw as unknown as { stream?: { session?: { close(): void; closed: boolean } } }).stream?.session
  reply.raw.once("finish", () => {
    if (session !== undefined && !session.closed) session.close()
  })
}

/**
 * The route config of an A2A binding's route (`config` of its route options):
 * its refusals are counted with the requests. The other routes sharing an
 * error handler (the card, metrics, dead letters) serve no A2A request, and have none.
 */
export interface A2ARouteConfig {
  a2aRefusals?: { operations: A2AOperations; binding: Binding }
}

/** Counts a refusal made before any operation ran, with `status` its HTTP status, when the request was for an A2A binding's route: what both HTTP bindings' error handlers call. */
export function countRefusal(request: FastifyRequest, error: A2AError, status: number): void {
  const refusals = (request.routeOptions.config as A2ARouteConfig | undefined)?.a2aRefusals
  refusals?.operations.refused(refusals.binding, error, status)
}

/** Sends a JSON-RPC error body with an HTTP status, for refusals made before the dispatcher runs; in the version answerVersion picks. */
export function sendRefusal(request: FastifyRequest, reply: FastifyReply, status: number, error: A2AError): FastifyReply {
  const body: JsonRpcResponse = { jsonrpc: "2.0", id: null, error: codecFor(answerVersion(request.headers["a2a-version"])).error(error) }
  request.log.info({ outcome: error.code, status }, "a2a request refused")
  countRefusal(request, error, status)
  closeAfterRefusal(request, reply, status)
  return reply.code(status).type("application/json").send(body)
}

/**
 * A 503 a hook raised before the route ran (a host's @fastify/under-pressure shedding load, which also set
 * Retry-After): kept a 503, with a body that says to come back, instead of becoming an internal error.
 */
export function sheddingRefusal(err: FastifyError): A2AError | undefined {
  if (err.statusCode !== 503) return undefined
  return new A2AError(ErrorCode.InternalError, "Service unavailable: the server is overloaded; retry after the Retry-After delay, or on another server")
}

/** HTTP-level failures as JSON-RPC error bodies: bad JSON is a -32700 with HTTP 200; size and type get their 4xx. */
export function answerHttpError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const send = (status: number, error: A2AError) => sendRefusal(request, reply, status, error)
  switch (err.code) {
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return send(200, new A2AError(ErrorCode.ParseError, "Parse error: the request body is empty; send a JSON-RPC request object"))
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return send(200, new A2AError(ErrorCode.ParseError, "Parse error: the request body is not valid JSON (or holds a __proto__ or constructor key)"))
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return send(413, new A2AError(ErrorCode.InvalidRequest, `Request body too large: the limit is ${request.routeOptions.bodyLimit} bytes`))
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      // -32005, A2A's ContentTypeNotSupportedError, as the official SDKs and the conformance suite expect; HTTP 415 says the same.
      return send(415, new A2AError(ErrorCode.ContentTypeNotSupported, `Unsupported content type ${JSON.stringify(request.headers["content-type"] ?? "")}: send application/json`))
  }
  const shed = sheddingRefusal(err)
  if (shed) return send(503, shed)
  // A refusal the parser raised as an A2AError (excess depth) is a JSON-RPC error, answered with HTTP 200.
  const raised: unknown = err
  if (raised instanceof A2AError && !("statusCode" in raised)) return send(200, raised)
  const status = err.statusCode ?? 500
  if (status >= 400 && status < 500) {
    // Errors raised as A2AErrors (the rate limit's) already say what to do.
    return send(status, err instanceof A2AError ? err : new A2AError(ErrorCode.InvalidRequest, `Invalid request: ${err.message}`))
  }
  request.log.error({ err }, "a2a route failed")
  return send(200, new A2AError(ErrorCode.InternalError, "Internal error: the server could not complete the request; its log has the details"))
}

