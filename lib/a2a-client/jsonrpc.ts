import { randomUUID } from "node:crypto"
import type { JsonObject } from "../types.js"
import type { AgentEndpoint } from "./card.js"
import { callJson, RemoteAgentError, type HttpOptions } from "./http.js"
import { readSendResult, readTask } from "./remote-task.js"
import { sendConfiguration, wireMessage, type AgentTransport } from "./transport.js"

/** Method names by version: 1.0's, and 0.3's slash names. */
const METHODS = {
  "1.0": { send: "SendMessage", get: "GetTask", cancel: "CancelTask" },
  "0.3": { send: "message/send", get: "tasks/get", cancel: "tasks/cancel" },
} as const

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === "object" && !Array.isArray(value)

/** The JSON-RPC binding: every call a POST to the interface URL. */
export function jsonRpcTransport(endpoint: AgentEndpoint, http: HttpOptions): AgentTransport {
  const methods = METHODS[endpoint.version]
  const tenant = endpoint.tenant === undefined ? {} : { tenant: endpoint.tenant }
  const call = async (method: string, params: JsonObject, signal?: AbortSignal): Promise<unknown> => {
    const { status, body } = await callJson("POST", endpoint.url, {
      ...http,
      extraHeaders: { "a2a-version": endpoint.version },
      body: { jsonrpc: "2.0", id: randomUUID(), method, params: { ...params, ...tenant } },
      signal,
    })
    const hint = status === 401 || status === 403 ? ` (HTTP ${status}): give the agent's headers (such as authorization)` : ""
    if (isObject(body) && isObject(body.error)) {
      throw new RemoteAgentError(`${method} answered error ${String(body.error.code)}: ${String(body.error.message)}${hint}`, status)
    }
    if (!isObject(body) || !("result" in body)) {
      throw new RemoteAgentError(`${method} at ${endpoint.url} answered HTTP ${status} without a JSON-RPC result${hint}`, status)
    }
    return body.result
  }
  return {
    send: async (message, signal) =>
      readSendResult(await call(methods.send, { message: wireMessage(endpoint.version, message), configuration: sendConfiguration(endpoint.version) }, signal)),
    get: async (id, signal) => readTask(await call(methods.get, { id }, signal)),
    cancel: async (id, signal) => readTask(await call(methods.cancel, { id }, signal)),
    close() {},
  }
}
