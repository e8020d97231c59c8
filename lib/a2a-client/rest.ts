import type { JsonObject } from "../types.js"
import type { AgentEndpoint } from "./card.js"
import { callJson, RemoteAgentError, type HttpOptions } from "./http.js"
import { readSendResult, readTask } from "./remote-task.js"
import { sendConfiguration, wireMessage, type AgentTransport } from "./transport.js"

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === "object" && !Array.isArray(value)

/** The error of a non-2xx answer: 1.0's google.rpc.Status `{error: {message}}`, 0.3's `{code, message}`. */
function errorMessage(body: unknown): string | undefined {
  if (!isObject(body)) return undefined
  if (isObject(body.error) && typeof body.error.message === "string") return body.error.message
  return typeof body.message === "string" ? body.message : undefined
}

/**
 * The HTTP+JSON binding: 1.0 paths under the interface URL (and its tenant), 0.3 paths under `/v1`,
 * whose messages carry their parts as `content`.
 */
export function restTransport(endpoint: AgentEndpoint, http: HttpOptions): AgentTransport {
  const base = endpoint.url.replace(/\/+$/, "") + (endpoint.version === "0.3" ? "/v1" : endpoint.tenant ? `/${encodeURIComponent(endpoint.tenant)}` : "")
  const call = async (method: "GET" | "POST", path: string, body?: JsonObject, signal?: AbortSignal): Promise<unknown> => {
    const answer = await callJson(method, base + path, { ...http, extraHeaders: { "a2a-version": endpoint.version }, ...(body && { body }), signal })
    if (answer.status < 200 || answer.status > 299) {
      const hint = answer.status === 401 || answer.status === 403 ? ": give the agent's headers (such as authorization)" : ""
      throw new RemoteAgentError(`${method} ${base}${path} answered HTTP ${answer.status}: ${errorMessage(answer.body) ?? "no error message"}${hint}`, answer.status)
    }
    return answer.body
  }
  const message = (text: Parameters<AgentTransport["send"]>[0]): JsonObject => {
    const wire = wireMessage("1.0", text)
    if (endpoint.version === "1.0") return wire
    const { parts, ...rest } = wire
    return { ...rest, content: parts }
  }
  const task = (id: string) => `/tasks/${encodeURIComponent(id)}`
  return {
    send: async (outgoing, signal) => readSendResult(await call("POST", "/message:send", { message: message(outgoing), configuration: sendConfiguration(endpoint.version) }, signal)),
    get: async (id, signal) => readTask(await call("GET", task(id), undefined, signal)),
    cancel: async (id, signal) => readTask(await call("POST", `${task(id)}:cancel`, {}, signal)),
    close() {},
  }
}
