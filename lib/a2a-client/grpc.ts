import * as grpc from "@grpc/grpc-js"
import { fromProtoJson, toProtoJson } from "../grpc/convert.js"
import { A2A_SERVICE, messageType } from "../grpc/proto.js"
import type { JsonObject } from "../types.js"
import type { AgentEndpoint } from "./card.js"
import { withTraceHeaders } from "../observe/propagation.js"
import { RemoteAgentError, type HttpOptions } from "./http.js"
import { readSendResult, readTask } from "./remote-task.js"
import { sendConfiguration, wireMessage, type AgentTransport } from "./transport.js"

/**
 * The gRPC binding (1.0 only: 0.3's gRPC service was another): the spec's A2AService over one channel,
 * requests and answers as ProtoJSON through lib/grpc's converter, the agent's headers as metadata.
 * TLS when the card was read over https.
 */
export function grpcTransport(endpoint: AgentEndpoint, http: HttpOptions): AgentTransport {
  const credentials = endpoint.secure ? grpc.credentials.createSsl() : grpc.credentials.createInsecure()
  const client = new grpc.Client(endpoint.url, credentials)
  const tenant = endpoint.tenant === undefined ? {} : { tenant: endpoint.tenant }
  const metadata = () => {
    const md = new grpc.Metadata()
    md.set("a2a-version", "1.0")
    // The agent's headers, then the active span's traceparent, so a trace crosses to the other agent.
    for (const [key, value] of Object.entries(withTraceHeaders(http.headers))) md.set(key.toLowerCase(), value)
    return md
  }
  const call = (method: string, requestType: string, responseType: string, request: JsonObject, signal?: AbortSignal): Promise<unknown> => {
    const requestProto = messageType(requestType)
    const responseProto = messageType(responseType)
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason)
      const pending = client.makeUnaryRequest(
        `/${A2A_SERVICE}/${method}`,
        (json: JsonObject) => Buffer.from(requestProto.encode(fromProtoJson(requestProto, json)).finish()),
        (bytes: Buffer) => toProtoJson(responseProto, responseProto.decode(bytes)),
        { ...request, ...tenant },
        metadata(),
        { deadline: Date.now() + http.timeoutMs },
        (err, answer) => {
          signal?.removeEventListener("abort", onAbort)
          if (signal?.aborted) return reject(signal.reason)
          if (err) return reject(new RemoteAgentError(`${method} at ${endpoint.url} failed: ${grpc.status[err.code] ?? err.code}: ${err.details}`))
          resolve(answer)
        },
      )
      const onAbort = () => pending.cancel()
      signal?.addEventListener("abort", onAbort, { once: true })
    })
  }
  return {
    send: async (message, signal) =>
      readSendResult(await call("SendMessage", "SendMessageRequest", "SendMessageResponse", { message: wireMessage("1.0", message), configuration: sendConfiguration("1.0") }, signal)),
    get: async (id, signal) => readTask(await call("GetTask", "GetTaskRequest", "Task", { id }, signal)),
    cancel: async (id, signal) => readTask(await call("CancelTask", "CancelTaskRequest", "Task", { id }, signal)),
    close: () => client.close(),
  }
}
