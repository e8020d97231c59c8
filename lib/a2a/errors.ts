/**
 * Every JSON-RPC error the server answers with, in one table. Handlers throw
 * an `A2AError`; the dispatcher turns it into the response's `error` object.
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
  VersionNotSupported: -32009,
} as const

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode]

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

/** Keeps ids echoed in messages to a readable size. */
export function truncate(text: string, max = 128): string {
  return text.length <= max ? text : text.slice(0, max) + "…"
}
