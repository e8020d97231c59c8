import { Ajv, type ErrorObject } from "ajv"
import type { FastifyContextConfig, FastifyError, FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from "fastify"
import { bodyTooDeep } from "../lib/a2a/depth.js"
import { A2AError, ErrorCode } from "../lib/a2a/errors.js"
import type { A2AOperations } from "../lib/a2a/operations.js"
import { renameQueryFields } from "../lib/a2a/proto-names.js"
import { errorAnswer, errorForm, REQUEST_CONTENT_TYPES, REST_ROUTES, RestBinding, type RestRoute } from "../lib/a2a/rest.js"
import type { createAuthentication } from "./authenticate.js"
import { closeAfterRefusal, countRefusal, type A2ARouteConfig, sheddingRefusal } from "./http-errors.js"
import { OpenStreams } from "../lib/streams/open-streams.js"
import { logA2ARequest } from "./request-log.js"
import { writeEvents } from "./sse.js"

export interface RestRoutesOptions {
  operations: A2AOperations
  /** Aborts when the server is closing: open streams end. */
  closing: AbortSignal
  /** The JSON-RPC route's authentication, when it is on: the same hook runs first on every REST route. */
  auth?: ReturnType<typeof createAuthentication>
  bodyLimit: number
  /** How often an open stream gets a keep-alive comment. */
  heartbeatMs: number
  /** The endpoint URL a request reached, for the extended card. */
  cardUrl: (request: FastifyRequest) => string
}

/** Path parameters and query values arrive as text: they are coerced to the schema's types (a repeated query parameter is refused, not joined). */
const textParts = new Ajv({ coerceTypes: true, allErrors: false, strict: false })
/** A body is JSON already: its types are checked as they are. */
const bodies = new Ajv({ allErrors: false, strict: false })

/**
 * The HTTP+JSON binding's routes, from lib/a2a/rest.ts's table: the 1.0
 * paths also under `/{tenant}`, the 0.3 paths under /v1. Registered as a
 * context of their own (`routes.register(restRoutes, opts)`), so their JSON
 * parser (which takes an empty body), their validator and their error
 * handler (google.rpc.Status, or the 0.3 binding's error object on a 0.3
 * path) touch no other route; the rate limit of the parent context applies.
 */
export async function restRoutes(routes: FastifyInstance, opts: RestRoutesOptions): Promise<void> {
  routes.removeAllContentTypeParsers()
  const parseJson = routes.getDefaultJsonParser("error", "error")
  routes.addContentTypeParser(REQUEST_CONTENT_TYPES, { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString()
    if (text.length === 0) return done(null, undefined)
    // Excess depth is refused by one cheap pass before JSON.parse builds a deep value it would throw away.
    const tooDeep = bodyTooDeep(text)
    if (tooDeep) return done(tooDeep, undefined)
    void parseJson(request, text, done) // Fastify's own parser is synchronous; its typing allows a promise
  })
  routes.setValidatorCompiler(({ schema, httpPart }) => {
    const validate = (httpPart === "body" ? bodies : textParts).compile(schema)
    if (httpPart !== "querystring") return validate
    // ProtoJSON's proto names (page_size) are read as the JSON names (pageSize) before the query is checked and coerced.
    // Fastify reads a failed check's errors from the function's `errors`, as Ajv leaves them: pass them through.
    return Object.defineProperty(
      (query: unknown) => {
        if (query !== null && typeof query === "object") renameQueryFields(query as Record<string, unknown>)
        return validate(query)
      },
      "errors",
      { get: () => validate.errors },
    )
  })
  routes.setErrorHandler(answerRestError)

  const binding = new RestBinding(opts.operations)
  const streams = new OpenStreams(opts.closing)
  for (const route of REST_ROUTES) {
    const handler = restHandler(route, binding, streams, opts)
    const config: FastifyContextConfig & A2ARouteConfig & { a2aRest: RestRoute } = { a2aRest: route, a2aRefusals: { operations: opts.operations, binding: "rest" } }
    for (const url of fastifyPaths(route)) {
      routes.route({
        method: route.method,
        url,
        schema: route.schema,
        bodyLimit: opts.bodyLimit,
        config,
        // A stream answered to HEAD would stay open, writing nothing.
        exposeHeadRoute: !route.stream,
        ...(opts.auth && { onRequest: opts.auth.onRequest }),
        ...(route.method === "POST" && { preValidation: absentBodyIsEmpty }),
        handler,
      })
    }
  }
}

/** One REST call in, one JSON answer or an SSE stream out, and one log line per call. */
function restHandler(route: RestRoute, binding: RestBinding, streams: OpenStreams, opts: RestRoutesOptions): RouteHandlerMethod {
  return async function rest(request, reply) {
    const started = performance.now()
    // Only a streaming call asks for this signal: most requests never pay for a controller and listeners.
    let streamEnd: AbortSignal | undefined
    const endSignal = () => (streamEnd ??= streams.endedWhenGoneOrClosing(reply.raw))
    const outcome = await binding.call(
      route,
      { path: request.params as Record<string, string>, query: request.query as Record<string, unknown>, body: request.body },
      {
        log: request.log,
        version: request.headers["a2a-version"],
        endSignal,
        principal: opts.auth?.principalOf(request),
        address: request.ip,
        lastEventId: request.headers["last-event-id"],
        cardUrl: () => opts.cardUrl(request),
        traceHeaders: (name) => request.headers[name],
      },
    )
    const logLine = () => logA2ARequest(request, started, { ...outcome, method: outcome.operation }, "rest")
    if (outcome.stream) {
      reply.hijack()
      await writeEvents(reply, outcome.stream, endSignal(), opts.heartbeatMs, outcome.cutOff)
      logLine()
      return reply
    }
    logLine()
    reply.code(outcome.status)
    if (outcome.body === undefined) return reply.send()
    return reply.type(outcome.contentType).send(outcome.body)
  }
}

/**
 * The spec's path as Fastify's router reads it, and under `/{tenant}` for a
 * 1.0 route. A literal `:` is doubled; a parameter before one (`{id}:cancel`)
 * gets a regex, or its name would run on to the segment's end.
 */
export function fastifyPaths(route: RestRoute): string[] {
  const path = route.path
    .replace(/:/g, "::")
    .replace(/\{(\w+)\}(?=::)/g, ":$1(.+)")
    .replace(/\{(\w+)\}/g, ":$1")
  return route.version === "1.0" ? [path, `/:tenant${path}`] : [path]
}

/** A POST without a body (the official clients send their cancel and subscribe so) is an empty request message, which the schema then checks. */
async function absentBodyIsEmpty(request: FastifyRequest): Promise<void> {
  request.body ??= {}
}

/** Refusals made before an operation runs (auth, limits, parse, schema), in the route's error form. */
function answerRestError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const route = (request.routeOptions.config as { a2aRest?: RestRoute }).a2aRest
  const { error, status } = refusal(err, request)
  const answer = errorAnswer(error, route ? errorForm(route, request.headers["a2a-version"]) : "1.0", status)
  request.log.info({ method: route?.operation, binding: "rest", outcome: error.code, status: answer.status }, "a2a request refused")
  countRefusal(request, error, answer.status)
  // A peer without credentials, or sending too much, gets no kept-alive socket to hold.
  closeAfterRefusal(request, reply, answer.status)
  return reply.code(answer.status).type(answer.contentType).send(answer.body)
}

/** The A2A error a Fastify error is, and the HTTP status it keeps when the error table's is not the one (401, 413, 415, 429). */
function refusal(err: FastifyError, request: FastifyRequest): { error: A2AError; status?: number } {
  if (err.validation) return { error: schemaError(err.validation[0], err.validationContext) }
  switch (err.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return { error: new A2AError(ErrorCode.ParseError, "Parse error: the request body is not valid JSON (or holds a __proto__ or constructor key)") }
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return { error: new A2AError(ErrorCode.InvalidRequest, `Request body too large: the limit is ${request.routeOptions.bodyLimit} bytes`), status: 413 }
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return {
        error: new A2AError(ErrorCode.InvalidRequest, `Unsupported content type ${JSON.stringify(request.headers["content-type"] ?? "")}: send application/json or application/a2a+json`),
        status: 415,
      }
  }
  // Refusals raised as A2AErrors: excess depth (the table's status), the rate limit's and authentication's (their own).
  const raised: unknown = err
  if (raised instanceof A2AError) return { error: raised, status: "statusCode" in raised ? err.statusCode : undefined }
  const shed = sheddingRefusal(err)
  if (shed) return { error: shed, status: 503 }
  const status = err.statusCode ?? 500
  if (status >= 400 && status < 500) return { error: new A2AError(ErrorCode.InvalidRequest, `Invalid request: ${err.message}`), status }
  request.log.error({ err }, "a2a route failed")
  return { error: new A2AError(ErrorCode.InternalError, "Internal error: the server could not complete the request; its log has the details") }
}

const WHERE: Readonly<Record<string, string>> = { querystring: " (a query parameter)", params: " (a path parameter)" }

/** A schema failure as -32602 (INVALID_ARGUMENT) naming the field as the request has it: `historyLength`, `message`, `configuration.blocking`. */
function schemaError(error: ErrorObject | undefined, part: string | undefined): A2AError {
  if (error === undefined) return A2AError.invalidParams(part ?? "request", "is invalid")
  const keys = error.instancePath
    .split("/")
    .slice(1)
    .map((key) => key.replace(/~1/g, "/").replace(/~0/g, "~"))
  if (error.keyword === "required") keys.push(String(error.params.missingProperty))
  if (keys.length === 0) return A2AError.invalidParams("body", "must be a JSON object")
  const where = WHERE[part ?? ""] ?? ""
  return A2AError.invalidParams(keys.join("."), `${where} ${wanted(error)}`.trimStart())
}

function wanted(error: ErrorObject): string {
  switch (error.keyword) {
    case "required":
      return "is required"
    case "type": {
      const type = String(error.params.type)
      return type === "boolean" ? "must be true or false" : `must be ${/^[aeiou]/.test(type) ? "an" : "a"} ${type}`
    }
    case "minLength":
      return "must not be empty"
    case "maxLength":
      return `must be at most ${error.params.limit} characters`
  }
  return error.message ?? "is invalid"
}
