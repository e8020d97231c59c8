import type { Logger } from "../log.js"
import type { HeaderLookup } from "../observe/propagation.js"
import { A2AError, ErrorCode, truncate, type JsonRpcErrorObject } from "./errors.js"
import { OPERATIONS, type A2AOperations, type OperationName } from "./operations.js"
import type { StreamItem } from "../streams/task-streams.js"
import { answerVersion, codecFor, negotiateVersion, type WireCodec, type WireVersion } from "./wire.js"

/**
 * The JSON-RPC 2.0 binding, free of any HTTP framework: hand it the parsed
 * body and the A2A-Version header, get back the response to send (as JSON
 * text), a stream of responses (SSE), or nothing (a notification). The
 * operations themselves are A2AOperations'.
 */

export type JsonRpcId = string | number | null

export type JsonRpcResponse =
  | { jsonrpc: "2.0"; id: JsonRpcId; result: unknown }
  | { jsonrpc: "2.0"; id: JsonRpcId; error: JsonRpcErrorObject }

interface DispatchContext {
  /** The request's logger. */
  log: Logger
  /** The request's `A2A-Version` header. */
  version?: string | string[]
  /**
   * For streaming calls only (so other calls cost nothing): a signal that
   * aborts when the peer goes away or the server closes; the stream stops,
   * the task goes on.
   */
  endSignal?: () => AbortSignal
  /** Who is calling, when the server authenticates: each sees only its own Tasks. */
  principal?: string
  /** The client's address: without authentication, streams are counted per address. */
  address?: string
  /** The request's `Last-Event-ID` header: SubscribeToTask resumes after that event. */
  lastEventId?: string | string[]
  /** The endpoint URL the peer reached (see CallContext.cardUrl). */
  cardUrl?: () => string
  /** Reads the request's trace headers (see CallContext.traceHeaders). */
  traceHeaders?: HeaderLookup
}

/** One event of a stream as the binding writes it: the JSON-RPC response, and the SSE `id:` it carries (none for an error). */
export interface StreamFrame {
  id?: number
  response: JsonRpcResponse
}

/** What one call did: the answer and the fields of the request log line. */
export interface DispatchOutcome {
  /** The answer, a JSON-RPC response object as JSON text; absent for a notification or a stream. */
  body?: string
  /** Responses to send as server-sent events, for streaming methods; it ends when the context's signal aborts. */
  stream?: AsyncIterable<StreamFrame>
  /** Aborts when the stream must end at once, unread frames and all: its reader fell too far behind (it resumes with Last-Event-ID). */
  cutOff?: AbortSignal
  method?: string
  taskId?: string
  version?: WireVersion
  /** The error code answered, if any. */
  errorCode?: number
  /**
   * 0.3 only: `body` is the error of a streaming method refused before its stream began (an unknown or
   * finished Task, a cap), to be sent as an event stream of that one event without an id. 0.3's official
   * client reads a streaming method's answer only as an event stream; 1.0's reads the plain JSON error.
   */
  errorAsEvent?: boolean
}

/** The 0.3 method names, as the operations they name. */
const V03_METHODS: Readonly<Record<string, OperationName>> = {
  "message/send": "SendMessage",
  "message/stream": "SendStreamingMessage",
  "tasks/get": "GetTask",
  "tasks/list": "ListTasks",
  "tasks/cancel": "CancelTask",
  "tasks/resubscribe": "SubscribeToTask",
  "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
  "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
  "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
  "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
  "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
}

/** Operations that answer with a stream. */
const STREAMING: ReadonlySet<OperationName> = new Set(["SendStreamingMessage", "SubscribeToTask"])

/** Every method name answered, each with its operation; a Map, so "constructor" or "__proto__" name none. */
const METHODS: ReadonlyMap<string, OperationName> = new Map([...OPERATIONS.map((name): [string, OperationName] => [name, name]), ...Object.entries(V03_METHODS)])

export class JsonRpcDispatcher {
  constructor(private readonly operations: A2AOperations) {}

  /** The method names this dispatcher answers. */
  get methodNames(): string[] {
    return [...METHODS.keys()]
  }

  async dispatch(body: unknown, ctx: DispatchContext): Promise<DispatchOutcome> {
    let version: WireVersion
    try {
      version = negotiateVersion(ctx.version)
    } catch (err) {
      return this.refuse(idOf(body), codecFor(answerVersion(ctx.version)), err as A2AError)
    }
    const codec = codecFor(version)
    if (Array.isArray(body)) {
      return this.refuse(null, codec, new A2AError(ErrorCode.InvalidRequest, "Invalid request: JSON-RPC batches are not supported; send one request object per HTTP request"))
    }
    const envelope = checkEnvelope(body)
    if (envelope instanceof A2AError) return this.refuse(idOf(body), codec, envelope)
    const { id, method, params, notification } = envelope
    const shownMethod = truncate(method, 64)
    const operation = METHODS.get(method)
    if (operation === undefined) {
      const outcome = this.refuse(id, codec, new A2AError(ErrorCode.MethodNotFound, `Method not found: ${shownMethod}. This server answers ${this.methodNames.join(", ")}`))
      return notification ? { method: shownMethod, version, errorCode: outcome.errorCode } : { ...outcome, method: shownMethod, version }
    }

    // A notification gets no answer: any stream it opens is ended at once.
    const endSignal = notification ? () => AbortSignal.abort() : ctx.endSignal
    const called = await this.operations.run(operation, params, {
      binding: "jsonrpc",
      version,
      log: ctx.log,
      endSignal,
      principal: ctx.principal,
      address: ctx.address,
      lastEventId: ctx.lastEventId,
      cardUrl: ctx.cardUrl,
      traceHeaders: ctx.traceHeaders,
    })
    let outcome: DispatchOutcome
    if (called.error !== undefined) {
      outcome = answer(id, codec, called.error)
      if (version === "0.3" && STREAMING.has(operation)) outcome.errorAsEvent = true
    } else if ("stream" in called.answer!) {
      // Without an event log no stream can be resumed: its frames carry no ids a peer could send back.
      const stream = responses(id, codec, called.answer.stream, this.operations.resumable)
      outcome = { stream, ...(called.answer.cutOff && { cutOff: called.answer.cutOff }) }
    } else outcome = { body: responseJson(id, "resultJson" in called.answer! ? called.answer.resultJson : JSON.stringify(called.answer!.result)) }
    if (notification) {
      delete outcome.body
      delete outcome.stream
      delete outcome.cutOff
    }
    outcome.method = shownMethod
    outcome.taskId = called.taskId
    outcome.version = version
    return outcome
  }

  /** The answer to a request refused before any operation ran, counted as one. */
  private refuse(id: JsonRpcId, codec: WireCodec, error: A2AError): DispatchOutcome {
    this.operations.refused("jsonrpc", error)
    return answer(id, codec, error)
  }
}

/** Wraps stream results as JSON-RPC responses with their event ids; a failure mid-stream (an A2AError by then) becomes an error response that ends it. */
async function* responses(id: JsonRpcId, codec: WireCodec, stream: AsyncIterable<StreamItem>, withIds: boolean): AsyncIterable<StreamFrame> {
  try {
    // No object spread here: it is per event, and slow on Node 20 (see lib/objects.ts).
    for await (const item of stream) {
      const response: JsonRpcResponse = { jsonrpc: "2.0", id, result: item.result }
      yield item.id === undefined || !withIds ? { response } : { id: item.id, response }
    }
  } catch (err) {
    yield { response: { jsonrpc: "2.0", id, error: codec.error(err as A2AError) } }
  }
}

interface Envelope {
  id: JsonRpcId
  method: string
  params: unknown
  notification: boolean
}

function checkEnvelope(body: unknown): Envelope | A2AError {
  const invalid = (why: string) => new A2AError(ErrorCode.InvalidRequest, `Invalid request: ${why}`)
  if (body === null || typeof body !== "object") return invalid("the body must be a JSON-RPC 2.0 request object")
  const request = body as Record<string, unknown>
  if (request.jsonrpc !== "2.0") return invalid('"jsonrpc" must be "2.0"')
  if ("id" in request && !isValidId(request.id)) return invalid('"id" must be a string (up to 1024 characters), a finite number or null')
  if (typeof request.method !== "string" || request.method.length === 0) return invalid('"method" must be a non-empty string')
  if ("params" in request && (request.params === null || typeof request.params !== "object" || Array.isArray(request.params))) {
    return invalid('"params" must be an object')
  }
  return { id: (request.id as JsonRpcId) ?? null, method: request.method, params: request.params ?? {}, notification: !("id" in request) }
}

function isValidId(id: unknown): id is JsonRpcId {
  return id === null || (typeof id === "number" && Number.isFinite(id)) || (typeof id === "string" && id.length <= 1024)
}

function idOf(body: unknown): JsonRpcId {
  const id = body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>).id : null
  return isValidId(id) ? id : null
}

function answer(id: JsonRpcId, codec: WireCodec, error: A2AError): DispatchOutcome {
  const response: JsonRpcResponse = { jsonrpc: "2.0", id, error: codec.error(error) }
  return { body: JSON.stringify(response), errorCode: error.code }
}

/** A JSON-RPC response around a result already in JSON (what JSON.stringify of the response object would give). */
function responseJson(id: JsonRpcId, resultJson: string): string {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${resultJson}}`
}
