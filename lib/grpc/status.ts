import protobuf from "protobufjs"
import { A2AError, ERROR_INFO_TYPE, errorInfo, GrpcStatus, grpcStatusName } from "../a2a/errors.js"

/**
 * An A2AError as gRPC answers it (the spec's §10.6): the status code of
 * BINDING_ERRORS, the message, and a google.rpc.Status whose details hold a
 * google.rpc.ErrorInfo (reason, domain "a2a-protocol.org", metadata), plus
 * a google.rpc.BadRequest naming the field when the error names one. The
 * Status travels, encoded, in the `grpc-status-details-bin` trailer, which
 * is where the official SDK's gRPC client reads the ErrorInfo.
 */

/** The trailer that carries the encoded google.rpc.Status. */
export const STATUS_DETAILS_KEY = "grpc-status-details-bin"

const BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"

/** google/rpc/status.proto and error_details.proto, the three messages used, with googleapis' field numbers. */
const rpc = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: { nested: { Any: { fields: { type_url: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } } } },
        rpc: {
          nested: {
            Status: {
              fields: { code: { type: "int32", id: 1 }, message: { type: "string", id: 2 }, details: { rule: "repeated", type: "google.protobuf.Any", id: 3 } },
            },
            ErrorInfo: {
              fields: { reason: { type: "string", id: 1 }, domain: { type: "string", id: 2 }, metadata: { keyType: "string", type: "string", id: 3 } as protobuf.IMapField },
            },
            BadRequest: {
              fields: { field_violations: { rule: "repeated", type: "FieldViolation", id: 1 } },
              nested: { FieldViolation: { fields: { field: { type: "string", id: 1 }, description: { type: "string", id: 2 } } } },
            },
          },
        },
      },
    },
  },
})
const Status = rpc.lookupType("google.rpc.Status")
const ErrorInfo = rpc.lookupType("google.rpc.ErrorInfo")
const BadRequest = rpc.lookupType("google.rpc.BadRequest")

/** What a gRPC call ends with for an A2AError: its status code, its message, and the encoded google.rpc.Status. */
export interface GrpcErrorStatus {
  code: number
  details: string
  statusDetails: Buffer
}

export function grpcErrorStatus(error: A2AError): GrpcErrorStatus {
  const code = GrpcStatus[grpcStatusName(error)]
  const info = errorInfo(error)
  const details = [{ type_url: ERROR_INFO_TYPE, value: ErrorInfo.encode(info).finish() }]
  const field = info.metadata.field
  if (field !== undefined) {
    details.push({ type_url: BAD_REQUEST_TYPE, value: BadRequest.encode({ field_violations: [{ field, description: error.message }] }).finish() })
  }
  const statusDetails = Buffer.from(Status.encode({ code, message: error.message, details }).finish())
  return { code, details: error.message, statusDetails }
}

/** The google.rpc.Status a `grpc-status-details-bin` trailer holds, decoded with its ErrorInfo and BadRequest details: for tests and peers written in JS. */
export function decodeStatusDetails(bytes: Uint8Array): { code: number; message: string; errorInfo?: ReturnType<typeof errorInfo>; fieldViolations?: Array<{ field: string; description: string }> } {
  const status = Status.toObject(Status.decode(bytes), { defaults: true }) as { code: number; message: string; details: Array<{ type_url: string; value: Uint8Array }> }
  const out: ReturnType<typeof decodeStatusDetails> = { code: status.code, message: status.message }
  for (const detail of status.details) {
    if (detail.type_url === ERROR_INFO_TYPE) out.errorInfo = ErrorInfo.toObject(ErrorInfo.decode(detail.value), { defaults: true }) as ReturnType<typeof errorInfo>
    if (detail.type_url === BAD_REQUEST_TYPE) {
      out.fieldViolations = (BadRequest.toObject(BadRequest.decode(detail.value), { defaults: true }) as { field_violations: Array<{ field: string; description: string }> }).field_violations
    }
  }
  return out
}
