import type { FastifyRequest } from "fastify"

/** What a call on an HTTP binding did, as its log line gives it. */
export interface LoggedCall {
  /** The operation (JSON-RPC: the method as asked for). */
  method?: string
  taskId?: string
  version?: string
  /** The error code answered, if any. */
  errorCode?: number
  /** Whether it answered with a stream. */
  stream?: unknown
}

/** The one log line of an A2A request on an HTTP binding (`binding` omitted: JSON-RPC), when its answer is sent or its stream ends. */
export function logA2ARequest(request: FastifyRequest, started: number, call: LoggedCall, binding?: "rest"): void {
  request.log.info(
    {
      method: call.method,
      taskId: call.taskId,
      version: call.version,
      outcome: call.errorCode ?? "ok",
      durationMs: Math.round(performance.now() - started),
      ...(binding && { binding }),
      ...(call.stream !== undefined && { stream: true }),
    },
    "a2a request",
  )
}
