import type { Logger } from "../log.js"
import type { HeaderLookup } from "../observe/propagation.js"
import type { JsonObject } from "../types.js"
import { A2AError, BINDING_ERRORS, ErrorCode, ERROR_INFO_TYPE, errorInfo } from "./errors.js"
import type { A2AOperations, OperationName } from "./operations.js"
import * as v03 from "./rest-v03.js"
import type { StreamItem } from "../streams/task-streams.js"
import { answerVersion, negotiateVersion, type WireVersion } from "./wire.js"

/**
 * The HTTP+JSON (REST) binding, free of any HTTP framework: the table of
 * routes (the spec's §11 paths, the 1.0 ones also under `/{tenant}`, and
 * the 0.3 ones under `/v1` that the official SDK's 0.3 client calls), how a
 * request's path parameters, query and body become an operation's params,
 * and how results, stream events and errors are written. The operations
 * are A2AOperations'; a REST body is the JSON-RPC params object, a REST
 * result the JSON-RPC result.
 *
 * Versions: the A2A-Version header decides, as on JSON-RPC (none: 0.3). A
 * 1.0 request is served on the 1.0 paths; a 0.3 one on the 0.3 paths, in
 * the 0.3 binding's shapes (lib/a2a/rest-v03.ts). Where a path is both (a
 * 0.3 path, or tenant "v1" on a 1.0 path), the header chooses.
 */

export type HttpMethod = "GET" | "POST" | "DELETE"

/** A JSON Schema, as the HTTP layer's validator takes it. */
export type JsonSchema = Readonly<Record<string, unknown>>

/** A request's parts as the HTTP layer parsed and checked them against the route's schema. */
export interface RestRequest {
  /** The path parameters, decoded; `tenant` when the path starts with `/{tenant}`. */
  path: Readonly<Record<string, string>>
  /** The query, its values of the types the route's schema names. */
  query: Readonly<Record<string, unknown>>
  /** The parsed body; an object when the route has a body schema. */
  body: unknown
}

/** The JSON Schemas a route's request is checked with before it is called. */
export interface RouteSchema {
  params: JsonSchema
  querystring?: JsonSchema
  body?: JsonSchema
}

export interface RestRoute {
  method: HttpMethod
  /** In the spec's form (`/tasks/{id}:cancel`). */
  path: string
  operation: OperationName
  /** The version the route speaks: a 1.0 route is also served under `/{tenant}`; a 0.3 route's path starts with /v1. */
  version: WireVersion
  /** The operation's params, in the JSON-RPC shape of the route's version. */
  params: (request: RestRequest) => unknown
  /** The REST form of a result (0.3 routes; a 1.0 result is its REST body as it is). */
  render?: (result: unknown) => unknown
  /** HTTP status of a success with a body (a null result is 204). */
  status: number
  /** An SSE stream (not also served for HEAD). */
  stream: boolean
  schema: RouteSchema
  /** A 0.3 route's 1.0 route on the same path without /v1: what a 1.0 request on the route reaches, with tenant "v1". */
  twin?: RestRoute
}

/** The content types of answers: the spec's for 1.0, and JSON for the 0.3 binding, as 0.3 peers know it. */
export const CONTENT_TYPES: Readonly<Record<WireVersion, string>> = { "1.0": "application/a2a+json", "0.3": "application/json" }

/** The content types a request body may have. */
export const REQUEST_CONTENT_TYPES = ["application/json", "application/a2a+json"]

// ---------------------------------------------------------------------------
// The routes

const MAX_ID = 1024
const id = { type: "string", minLength: 1, maxLength: MAX_ID } as const
const tenant = { type: "string", maxLength: MAX_ID } as const
const object = { type: "object" } as const
const string = { type: "string" } as const
const integer = { type: "integer" } as const

/** The path parameters named, each a non-empty id, and the tenant of a `/{tenant}` path. */
const pathParams = (...names: string[]): JsonSchema => ({
  type: "object",
  required: names,
  properties: { tenant, ...Object.fromEntries(names.map((name) => [name, id])) },
})
const query = (properties: Record<string, JsonSchema>): JsonSchema => ({ type: "object", properties: { tenant, ...properties } })
/** A POST body; one that is absent reaches the schema as `{}`. */
const body = (properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema => ({ type: "object", required, properties })

const sendBody = body({ tenant: string, message: object, configuration: object, metadata: object }, ["message"])
const cancelBody = body({ tenant: string, id: string, metadata: object })
const pushConfigBody = { tenant: string, id: string, taskId: string, url: string, token: string, authentication: object }
/** ListTasksRequest's fields, camelCase (a2a.proto); their ranges and forms are checked with the params. */
const LIST_TASKS_QUERY = {
  contextId: string,
  status: string,
  pageSize: integer,
  pageToken: string,
  historyLength: integer,
  statusTimestampAfter: string,
  includeArtifacts: { type: "boolean" },
} as const

/** `fields` without its undefined values, so the params check sees absent fields as absent. */
function defined(fields: Record<string, unknown>): JsonObject {
  const out: JsonObject = {}
  for (const key in fields) if (fields[key] !== undefined) out[key] = fields[key]
  return out
}

const bodyOf = (request: RestRequest): JsonObject => (request.body !== null && typeof request.body === "object" ? (request.body as JsonObject) : {})

/**
 * The 1.0 params: a body is the request message itself (`from`), the path
 * names the Task or config (over the body's field), and the `/{tenant}`
 * prefix the tenant (over the body's; without a body, over the query's).
 */
function withPath(request: RestRequest, fields: Record<string, unknown>, from?: JsonObject): JsonObject {
  const params: JsonObject = { ...from, ...defined(fields) }
  const named = request.path.tenant ?? (from === undefined ? request.query.tenant : undefined)
  if (named !== undefined) params.tenant = named
  return params
}

/** A route as the tables write it: status 200, no stream and the path's parameters checked unless said. */
type RouteSpec = Omit<RestRoute, "status" | "stream" | "schema" | "version" | "twin"> & { schema?: Omit<RouteSchema, "params">; status?: number; stream?: boolean }

function route(version: WireVersion, spec: RouteSpec): RestRoute {
  const names = [...spec.path.matchAll(/\{(\w+)\}/g)].map((match) => match[1])
  return { status: 200, stream: false, ...spec, version, schema: { params: pathParams(...names), ...spec.schema } }
}

const V10_SPECS: RouteSpec[] = [
  { method: "POST", path: "/message:send", operation: "SendMessage", schema: { body: sendBody }, params: (r) => withPath(r, {}, bodyOf(r)) },
  { method: "POST", path: "/message:stream", operation: "SendStreamingMessage", stream: true, schema: { body: sendBody }, params: (r) => withPath(r, {}, bodyOf(r)) },
  {
    method: "GET",
    path: "/tasks/{id}",
    operation: "GetTask",
    schema: { querystring: query({ historyLength: integer }) },
    params: (r) => withPath(r, { id: r.path.id, historyLength: r.query.historyLength }),
  },
  {
    method: "GET",
    path: "/tasks",
    operation: "ListTasks",
    schema: { querystring: query(LIST_TASKS_QUERY) },
    params: (r) => withPath(r, Object.fromEntries(Object.keys(LIST_TASKS_QUERY).map((key) => [key, r.query[key]]))),
  },
  { method: "POST", path: "/tasks/{id}:cancel", operation: "CancelTask", schema: { body: cancelBody }, params: (r) => withPath(r, { id: r.path.id }, bodyOf(r)) },
  { method: "GET", path: "/tasks/{id}:subscribe", operation: "SubscribeToTask", stream: true, params: (r) => withPath(r, { id: r.path.id }) },
  { method: "POST", path: "/tasks/{id}:subscribe", operation: "SubscribeToTask", stream: true, params: (r) => withPath(r, { id: r.path.id }) },
  {
    method: "POST",
    path: "/tasks/{taskId}/pushNotificationConfigs",
    operation: "CreateTaskPushNotificationConfig",
    status: 201,
    schema: { body: body(pushConfigBody, ["url"]) },
    params: (r) => withPath(r, { taskId: r.path.taskId }, bodyOf(r)),
  },
  {
    method: "GET",
    path: "/tasks/{taskId}/pushNotificationConfigs/{configId}",
    operation: "GetTaskPushNotificationConfig",
    params: (r) => withPath(r, { taskId: r.path.taskId, id: r.path.configId }),
  },
  {
    method: "GET",
    path: "/tasks/{taskId}/pushNotificationConfigs",
    operation: "ListTaskPushNotificationConfigs",
    schema: { querystring: query({ pageSize: integer, pageToken: string }) },
    params: (r) => withPath(r, { taskId: r.path.taskId, pageSize: r.query.pageSize, pageToken: r.query.pageToken }),
  },
  {
    method: "DELETE",
    path: "/tasks/{taskId}/pushNotificationConfigs/{configId}",
    operation: "DeleteTaskPushNotificationConfig",
    params: (r) => withPath(r, { taskId: r.path.taskId, id: r.path.configId }),
  },
  { method: "GET", path: "/extendedAgentCard", operation: "GetExtendedAgentCard", params: (r) => withPath(r, {}) },
]
const V10_ROUTES = V10_SPECS.map((spec) => route("1.0", spec))

/**
 * The 0.3 binding's paths (its a2a.proto; the official SDK's 0.3 client and
 * server): under /v1, in its own shapes. Each takes its 1.0 twin's schema
 * unless it names one, since a 1.0 request on the same path reaches the twin.
 */
const V03_SPECS: RouteSpec[] = [
  { method: "POST", path: "/v1/message:send", operation: "SendMessage", params: (r) => v03.sendParams(r.body), render: v03.sendResult },
  { method: "POST", path: "/v1/message:stream", operation: "SendStreamingMessage", stream: true, params: (r) => v03.sendParams(r.body) },
  { method: "GET", path: "/v1/tasks/{id}", operation: "GetTask", params: (r) => defined({ id: r.path.id, historyLength: r.query.historyLength }), render: v03.task },
  { method: "POST", path: "/v1/tasks/{id}:cancel", operation: "CancelTask", params: (r) => ({ id: r.path.id }), render: v03.task },
  { method: "GET", path: "/v1/tasks/{id}:subscribe", operation: "SubscribeToTask", stream: true, params: (r) => ({ id: r.path.id }) },
  { method: "POST", path: "/v1/tasks/{id}:subscribe", operation: "SubscribeToTask", stream: true, params: (r) => ({ id: r.path.id }) },
  {
    method: "POST",
    path: "/v1/tasks/{taskId}/pushNotificationConfigs",
    operation: "CreateTaskPushNotificationConfig",
    status: 201,
    // Either version's body: which fields it needs is checked with the params, once the version is known.
    schema: { body: body({ ...pushConfigBody, name: string, pushNotificationConfig: object }) },
    params: (r) => defined({ taskId: r.path.taskId, pushNotificationConfig: bodyOf(r).pushNotificationConfig }),
    render: v03.pushConfig,
  },
  {
    method: "GET",
    path: "/v1/tasks/{taskId}/pushNotificationConfigs/{configId}",
    operation: "GetTaskPushNotificationConfig",
    params: (r) => ({ id: r.path.taskId, pushNotificationConfigId: r.path.configId }),
    render: v03.pushConfig,
  },
  {
    method: "GET",
    path: "/v1/tasks/{taskId}/pushNotificationConfigs",
    operation: "ListTaskPushNotificationConfigs",
    params: (r) => ({ id: r.path.taskId }),
    render: v03.pushConfigList,
  },
  {
    method: "DELETE",
    path: "/v1/tasks/{taskId}/pushNotificationConfigs/{configId}",
    operation: "DeleteTaskPushNotificationConfig",
    params: (r) => ({ id: r.path.taskId, pushNotificationConfigId: r.path.configId }),
  },
  { method: "GET", path: "/v1/card", operation: "GetExtendedAgentCard", params: () => ({}) },
]
const V03_ROUTES: RestRoute[] = V03_SPECS.map((spec) => {
  const legacy = route("0.3", spec)
  const twin = V10_ROUTES.find((r) => r.method === legacy.method && `/v1${r.path}` === legacy.path)
  if (twin === undefined) return legacy
  return { ...legacy, twin, schema: { ...twin.schema, ...spec.schema, params: legacy.schema.params } }
})

/** Every route: the 1.0 ones (each also under `/{tenant}`), then the 0.3 ones. */
export const REST_ROUTES: readonly RestRoute[] = [...V10_ROUTES, ...V03_ROUTES]

// ---------------------------------------------------------------------------
// Errors

const BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"

/** google.rpc.Code names for the HTTP refusals the error table has no row of its own for (made before an operation runs). */
const REFUSAL_STATUS: Readonly<Record<number, string>> = { 401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED" }

/** An error as the REST binding answers it. */
export interface RestErrorAnswer {
  status: number
  contentType: string
  body: string
}

/**
 * The error body: for 1.0, google.rpc.Status as JSON (§11.6) with the
 * error table's HTTP status and gRPC status name, an ErrorInfo (reason,
 * domain a2a-protocol.org, metadata) and, when a field is named, a
 * BadRequest naming it; for the 0.3 binding, the `{code, message, data}`
 * its peers read. `status` overrides the table's HTTP status for refusals
 * made by the HTTP layer (401, 413, 415, 429).
 */
export function errorBody(error: A2AError, form: WireVersion, status = BINDING_ERRORS[error.code].http): unknown {
  if (form === "0.3") return error.toJSON()
  const info = errorInfo(error)
  const details: JsonObject[] = [{ "@type": ERROR_INFO_TYPE, ...info }]
  const field = info.metadata.field
  if (field !== undefined) details.push({ "@type": BAD_REQUEST_TYPE, fieldViolations: [{ field, description: error.message }] })
  return { error: { code: status, status: REFUSAL_STATUS[status] ?? BINDING_ERRORS[error.code].grpc, message: error.message, details } }
}

export function errorAnswer(error: A2AError, form: WireVersion, status = BINDING_ERRORS[error.code].http): RestErrorAnswer {
  return { status, contentType: CONTENT_TYPES[form], body: JSON.stringify(errorBody(error, form, status)) }
}

/** The form an error on `route` takes before the call has run: the 0.3 binding's for a 0.3 request on a 0.3 path, google.rpc.Status otherwise. */
export function errorForm(route: RestRoute, versionHeader: string | string[] | undefined): WireVersion {
  return route.version === "0.3" && answerVersion(versionHeader) === "0.3" ? "0.3" : "1.0"
}

// ---------------------------------------------------------------------------
// Calls

/** One server-sent event: its `id:` (a position to resume from), its `event:` name, and what its `data:` carries as JSON. */
export interface SseFrame {
  id?: number
  event?: string
  data: unknown
}

export interface RestCallContext {
  log: Logger
  /** The request's `A2A-Version` header. */
  version?: string | string[]
  /** For streaming calls only: aborts when the peer goes away or the server closes. */
  endSignal?: () => AbortSignal
  principal?: string
  address?: string
  /** The endpoint URL the peer reached (see CallContext.cardUrl). */
  cardUrl?: () => string
  /** The request's `Last-Event-ID`: SubscribeToTask resumes after that event. */
  lastEventId?: string | string[]
  /** Reads the request's trace headers (see CallContext.traceHeaders). */
  traceHeaders?: HeaderLookup
}

/** What a call did: the answer, and the fields of its request log line. */
export interface RestOutcome {
  status: number
  contentType: string
  /** JSON text; absent for 204 and streams. */
  body?: string
  /** Server-sent events: the StreamResponse of each event as `data:`, a failure mid-stream as an `error` event. */
  stream?: AsyncIterable<SseFrame>
  /** Aborts when the stream must end at once (its reader fell too far behind). */
  cutOff?: AbortSignal
  operation: OperationName
  taskId?: string
  version?: WireVersion
  /** The A2A error code answered, if any. */
  errorCode?: number
}

export class RestBinding {
  constructor(private readonly operations: A2AOperations) {}

  /** Runs the request on `route` (already matched and checked against its schema). Never throws. */
  async call(route: RestRoute, request: RestRequest, ctx: RestCallContext): Promise<RestOutcome> {
    let version: WireVersion
    try {
      version = negotiateVersion(ctx.version)
    } catch (err) {
      return this.refuse(route.operation, err as A2AError, errorForm(route, ctx.version))
    }
    let served = route
    if (route.version !== version) {
      if (route.version === "1.0") return this.refuse(route.operation, needsVersion10(route), "1.0", version)
      // A 1.0 request on a 0.3 path: /v1 is a tenant.
      if (route.twin === undefined) return this.refuse(route.operation, noSuchRoute(route), "1.0", version)
      served = route.twin
      request = { ...request, path: { ...request.path, tenant: "v1" } }
    }
    const called = await this.operations.run(served.operation, served.params(request), {
      binding: "rest",
      version,
      log: ctx.log,
      endSignal: ctx.endSignal,
      principal: ctx.principal,
      address: ctx.address,
      lastEventId: ctx.lastEventId,
      cardUrl: ctx.cardUrl,
      traceHeaders: ctx.traceHeaders,
    })
    const about = { operation: served.operation, taskId: called.taskId, version }
    if (called.error !== undefined) return { ...errorAnswer(called.error, served.version), ...about, errorCode: called.error.code }
    const answer = called.answer!
    const contentType = CONTENT_TYPES[served.version]
    if ("stream" in answer) {
      // Without an event log no stream can be resumed: its events carry no ids a peer could send back.
      const stream = frames(answer.stream, served.version, this.operations.resumable)
      return { status: 200, contentType, stream, ...(answer.cutOff && { cutOff: answer.cutOff }), ...about }
    }
    if ("resultJson" in answer && served.render === undefined) return { status: served.status, contentType, body: answer.resultJson, ...about }
    const result: unknown = "resultJson" in answer ? JSON.parse(answer.resultJson) : answer.result
    if (result === null || result === undefined) return { status: 204, contentType, ...about }
    return { status: served.status, contentType, body: JSON.stringify(served.render ? served.render(result) : result), ...about }
  }

  /** The answer to a request refused before its operation ran (its version), counted as one. */
  private refuse(operation: OperationName, error: A2AError, form: WireVersion, version?: WireVersion): RestOutcome {
    this.operations.refused("rest", error)
    return { ...errorAnswer(error, form), operation, ...(version && { version }), errorCode: error.code }
  }
}

/** The stream's results as events, in the route's version's form; a failure mid-stream (an A2AError by then) is an `error` event that ends it. */
async function* frames(stream: AsyncIterable<StreamItem>, form: WireVersion, withIds: boolean): AsyncIterable<SseFrame> {
  try {
    // No object spread here: it is per event.
    for await (const item of stream) {
      const data = form === "0.3" ? v03.streamResponse(item.result) : item.result
      yield item.id === undefined || !withIds ? { data } : { id: item.id, data }
    }
  } catch (err) {
    yield { event: "error", data: errorBody(err as A2AError, form) }
  }
}

/** A 0.3 request (none or 0.3 in A2A-Version) on a 1.0 path. */
function needsVersion10(route: RestRoute): A2AError {
  const legacy = V03_ROUTES.find((r) => r.twin === route)
  return new A2AError(
    ErrorCode.VersionNotSupported,
    `${route.method} ${route.path} is an A2A 1.0 path, and a request without A2A-Version (or with 0.3) is an A2A 0.3 request: send A2A-Version: 1.0${legacy ? `, or call the 0.3 path ${legacy.path}` : ""}`,
  )
}

/** A 1.0 request on a 0.3 path that has no 1.0 twin (/v1/card). */
function noSuchRoute(route: RestRoute): A2AError {
  return new A2AError(ErrorCode.MethodNotFound, `${route.method} ${route.path} is an A2A 0.3 path; under A2A-Version 1.0 it would name tenant "v1", and there is no such 1.0 route`)
}
