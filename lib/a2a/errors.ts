/**
 * Every error the server answers with, in one table: its JSON-RPC code
 * here, its HTTP status, gRPC status and ErrorInfo reason in BINDING_ERRORS.
 * Operations throw an `A2AError`; each binding renders it in its own form.
 */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  TaskNotFound: -32001,
  TaskNotCancelable: -32002,
  PushNotificationNotSupported: -32003,
  UnsupportedOperation: -32004,
  ContentTypeNotSupported: -32005,
  InvalidAgentResponse: -32006,
  ExtendedAgentCardNotConfigured: -32007,
  ExtensionSupportRequired: -32008,
  VersionNotSupported: -32009,
} as const

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode]

/** gRPC status codes (grpc/status.h), named as google.rpc.Code names them. */
export const GrpcStatus = {
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  FAILED_PRECONDITION: 9,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAUTHENTICATED: 16,
} as const

export type GrpcStatusName = keyof typeof GrpcStatus

/** How an error shows on the REST and gRPC bindings (the A2A spec's §5.4 table; the JSON-RPC-only errors as their nearest kin). */
export interface BindingError {
  /** The HTTP status of a REST answer. */
  http: number
  /** The gRPC status, by name (google.rpc.Status and the REST body's `status` say it so). */
  grpc: GrpcStatusName
  /** google.rpc.ErrorInfo's reason: the A2A error type in UPPER_SNAKE_CASE, without "Error". */
  reason: string
}

export const BINDING_ERRORS: Readonly<Record<ErrorCode, BindingError>> = {
  [ErrorCode.ParseError]: { http: 400, grpc: "INVALID_ARGUMENT", reason: "PARSE_ERROR" },
  [ErrorCode.InvalidRequest]: { http: 400, grpc: "INVALID_ARGUMENT", reason: "INVALID_REQUEST" },
  [ErrorCode.MethodNotFound]: { http: 404, grpc: "UNIMPLEMENTED", reason: "METHOD_NOT_FOUND" },
  [ErrorCode.InvalidParams]: { http: 400, grpc: "INVALID_ARGUMENT", reason: "INVALID_PARAMS" },
  [ErrorCode.InternalError]: { http: 500, grpc: "INTERNAL", reason: "INTERNAL_ERROR" },
  [ErrorCode.TaskNotFound]: { http: 404, grpc: "NOT_FOUND", reason: "TASK_NOT_FOUND" },
  [ErrorCode.TaskNotCancelable]: { http: 400, grpc: "FAILED_PRECONDITION", reason: "TASK_NOT_CANCELABLE" },
  [ErrorCode.PushNotificationNotSupported]: { http: 400, grpc: "FAILED_PRECONDITION", reason: "PUSH_NOTIFICATION_NOT_SUPPORTED" },
  [ErrorCode.UnsupportedOperation]: { http: 400, grpc: "FAILED_PRECONDITION", reason: "UNSUPPORTED_OPERATION" },
  [ErrorCode.ContentTypeNotSupported]: { http: 400, grpc: "INVALID_ARGUMENT", reason: "CONTENT_TYPE_NOT_SUPPORTED" },
  [ErrorCode.InvalidAgentResponse]: { http: 500, grpc: "INTERNAL", reason: "INVALID_AGENT_RESPONSE" },
  [ErrorCode.ExtendedAgentCardNotConfigured]: { http: 400, grpc: "FAILED_PRECONDITION", reason: "EXTENDED_AGENT_CARD_NOT_CONFIGURED" },
  [ErrorCode.ExtensionSupportRequired]: { http: 400, grpc: "FAILED_PRECONDITION", reason: "EXTENSION_SUPPORT_REQUIRED" },
  [ErrorCode.VersionNotSupported]: { http: 400, grpc: "FAILED_PRECONDITION", reason: "VERSION_NOT_SUPPORTED" },
}

/**
 * The HTTP refusals made before any operation runs that the error table has
 * no row of their own for (they answer -32600 or an authentication error),
 * by the name the request metrics' outcome gives each: HTTP's name for 413
 * and 415, google.rpc.Code's for 401 and 429 (as the REST body's `status` says them).
 */
const HTTP_REFUSALS: Readonly<Record<number, string>> = { 401: "UNAUTHENTICATED", 413: "PAYLOAD_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE", 429: "RESOURCE_EXHAUSTED" }

/** What a refusal made before any operation is counted as: the name of its HTTP status when it has one above, else its error's reason (PARSE_ERROR, INVALID_REQUEST, …). */
export function refusalReason(error: A2AError, httpStatus?: number): string {
  return (httpStatus !== undefined ? HTTP_REFUSALS[httpStatus] : undefined) ?? BINDING_ERRORS[error.code].reason
}

/** The domain of every ErrorInfo the server sends. */
export const ERROR_DOMAIN = "a2a-protocol.org"

/** ErrorInfo's type URL, as the JSON forms (ProtoJSON's Any) and gRPC's status details name it. */
export const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"

export interface JsonRpcErrorObject {
  code: number
  message: string
  data?: unknown
}

export class A2AError extends Error {
  readonly code: ErrorCode
  readonly data?: unknown

  constructor(code: ErrorCode, message: string, data?: unknown) {
    super(message)
    this.name = "A2AError"
    this.code = code
    if (data !== undefined) this.data = data
  }

  toJSON(): JsonRpcErrorObject {
    return this.data === undefined ? { code: this.code, message: this.message } : { code: this.code, message: this.message, data: this.data }
  }

  static invalidParams(field: string, wanted: string): A2AError {
    return new A2AError(ErrorCode.InvalidParams, `Invalid params: ${field} ${wanted}`, { field })
  }

  static taskNotFound(id: string): A2AError {
    return new A2AError(ErrorCode.TaskNotFound, `Task not found: ${truncate(id)}`, { taskId: truncate(id) })
  }
}

/** An error the server raises when it is at a capacity (streams, running Tasks): the peer may retry later. */
export function isAtCapacity(error: A2AError): boolean {
  return error.code === ErrorCode.InternalError && (error.data as { retryable?: unknown } | undefined)?.retryable === true
}

/** The gRPC status an error ends a call with: its row's, but RESOURCE_EXHAUSTED for a capacity refusal, as gRPC names running out of a quota. */
export function grpcStatusName(error: A2AError): GrpcStatusName {
  return isAtCapacity(error) ? "RESOURCE_EXHAUSTED" : BINDING_ERRORS[error.code].grpc
}

/** Keeps ids echoed in messages to a readable size. */
export function truncate(text: string, max = 128): string {
  return text.length <= max ? text : text.slice(0, max) + "…"
}

/** google.rpc.ErrorInfo for an error: its reason, our domain, and its data's fields (a task id, a field name) as metadata, a map of strings (any other value as its JSON). */
export function errorInfo(error: A2AError): { reason: string; domain: string; metadata: Record<string, string> } {
  const metadata: Record<string, string> = {}
  if (error.data !== null && typeof error.data === "object" && !Array.isArray(error.data)) {
    for (const [key, value] of Object.entries(error.data)) metadata[key] = typeof value === "string" ? value : JSON.stringify(value)
  }
  return { reason: BINDING_ERRORS[error.code].reason, domain: ERROR_DOMAIN, metadata }
}
