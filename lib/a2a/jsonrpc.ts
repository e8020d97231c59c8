import { errorFields, type Logger } from "../log.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2ATask } from "../types.js"
import { A2AError, ErrorCode, truncate, type JsonRpcErrorObject } from "./errors.js"
import { parseGetTaskParams, parseSendMessageParams } from "./params.js"
import { isTerminal, type TaskRunner } from "./runner.js"

/**
 * JSON-RPC 2.0 over A2A, free of any HTTP framework: hand it the parsed
 * body, get back the response object to send (or none, for a notification).
 */

export type JsonRpcId = string | number | null

export type JsonRpcResponse =
  | { jsonrpc: "2.0"; id: JsonRpcId; result: unknown }
  | { jsonrpc: "2.0"; id: JsonRpcId; error: JsonRpcErrorObject }

export interface DispatchContext {
  /** The request's logger; the dispatcher adds `method` and `taskId` fields. */
  log: Logger
}

/** What one call did, for the request log line. */
export interface DispatchOutcome {
  /** Absent for a notification, which gets no answer. */
  response?: JsonRpcResponse
  method?: string
  taskId?: string
}

export interface DispatcherOptions {
  store: TaskStore
  runner: TaskRunner
}

type Handler = (params: unknown, call: Call) => Promise<unknown>

/** What a handler may note about its call. */
interface Call {
  log: Logger
  taskId?: string
}

export class JsonRpcDispatcher {
  private readonly methods: ReadonlyMap<string, Handler>

  constructor(private readonly opts: DispatcherOptions) {
    const sendMessage: Handler = (params, call) => this.sendMessage(params, call)
    const getTask: Handler = (params, call) => this.getTask(params, call)
    // Both generations of method names: A2A 1.0 PascalCase and 0.3 slash names.
    this.methods = new Map([
      ["SendMessage", sendMessage],
      ["message/send", sendMessage],
      ["GetTask", getTask],
      ["tasks/get", getTask],
    ])
  }

  /** The method names this dispatcher answers. */
  get methodNames(): string[] {
    return [...this.methods.keys()]
  }

  async dispatch(body: unknown, ctx: DispatchContext): Promise<DispatchOutcome> {
    if (Array.isArray(body)) {
      return { response: failure(null, new A2AError(ErrorCode.InvalidRequest, "Invalid request: JSON-RPC batches are not supported; send one request object per HTTP request")) }
    }
    const envelope = checkEnvelope(body)
    if (envelope instanceof A2AError) return { response: failure(idOf(body), envelope) }
    const { id, method, params, notification } = envelope

    const handler = this.methods.get(method)
    if (!handler) {
      const error = new A2AError(ErrorCode.MethodNotFound, `Method not found: ${truncate(method, 64)}. This server answers ${this.methodNames.join(", ")}`)
      return { response: notification ? undefined : failure(id, error), method: truncate(method, 64) }
    }
    const call: Call = { log: ctx.log }
    let response: JsonRpcResponse
    try {
      response = { jsonrpc: "2.0", id, result: await handler(params, call) }
    } catch (err) {
      response = failure(id, this.asA2AError(err, method, call))
    }
    return { response: notification ? undefined : response, method, taskId: call.taskId }
  }

  private async sendMessage(raw: unknown, call: Call): Promise<A2ATask> {
    const params = parseSendMessageParams(raw)
    if (params.message.taskId !== undefined) {
      call.taskId = params.message.taskId
      const existing = await this.read(params.message.taskId)
      throw new A2AError(
        isTerminal(existing.status.state) ? ErrorCode.UnsupportedOperation : ErrorCode.InvalidParams,
        `Task ${truncate(existing.id)} is ${existing.status.state} and takes no further messages; send a message without taskId to start a new task`,
      )
    }
    const { task, settled } = await this.opts.runner.start(params.message)
    call.taskId = task.id
    const result = params.configuration?.blocking ? await settled : task
    return withHistoryLength(result, params.configuration?.historyLength)
  }

  private async getTask(raw: unknown, call: Call): Promise<A2ATask> {
    const params = parseGetTaskParams(raw)
    call.taskId = params.id
    return withHistoryLength(await this.read(params.id), params.historyLength)
  }

  private async read(id: string): Promise<A2ATask> {
    const task = await this.opts.store.get(id)
    if (task === undefined) throw A2AError.taskNotFound(id)
    return task
  }

  /** Any failure as the error the peer gets; the unexpected ones are logged in full and answered in general terms. */
  private asA2AError(err: unknown, method: string, call: Call): A2AError {
    if (err instanceof A2AError) return err
    call.log.error({ method, taskId: call.taskId, ...errorFields(err) }, "request failed")
    const what = call.taskId ? ` for task ${truncate(call.taskId)}` : ""
    return new A2AError(ErrorCode.InternalError, `Internal error${what} in ${method}: the server could not complete the request; its log has the details`)
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
  if ("id" in request && !isValidId(request.id)) return invalid('"id" must be a string, a number or null')
  if (typeof request.method !== "string" || request.method.length === 0) return invalid('"method" must be a non-empty string')
  if ("params" in request && (request.params === null || typeof request.params !== "object" || Array.isArray(request.params))) {
    return invalid('"params" must be an object')
  }
  return { id: (request.id as JsonRpcId) ?? null, method: request.method, params: request.params ?? {}, notification: !("id" in request) }
}

function isValidId(id: unknown): id is JsonRpcId {
  return id === null || typeof id === "number" || (typeof id === "string" && id.length <= 1024)
}

function idOf(body: unknown): JsonRpcId {
  const id = body !== null && typeof body === "object" ? (body as Record<string, unknown>).id : null
  return isValidId(id) ? id : null
}

function failure(id: JsonRpcId, error: A2AError): JsonRpcResponse {
  return { jsonrpc: "2.0", id, error: error.toJSON() }
}

function withHistoryLength(task: A2ATask, historyLength: number | undefined): A2ATask {
  if (historyLength === undefined || task.history === undefined || task.history.length <= historyLength) return task
  return { ...task, history: historyLength === 0 ? [] : task.history.slice(-historyLength) }
}
