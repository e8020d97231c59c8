import type { JsonObject } from "../types.js"
import type { ProtocolVersion } from "./card.js"
import type { RemoteMessage, RemoteTask } from "./remote-task.js"

/** The three calls the tool makes, the same over every binding and version. */
export interface AgentTransport {
  /** Sends a message without waiting for the work (0.3 `blocking: false`, 1.0 `returnImmediately`). */
  send(message: OutgoingMessage, signal?: AbortSignal): Promise<RemoteTask | RemoteMessage>
  get(taskId: string, signal?: AbortSignal): Promise<RemoteTask>
  cancel(taskId: string, signal?: AbortSignal): Promise<RemoteTask>
  /** Frees what the transport holds open (a gRPC channel). */
  close(): void
}

/** A user message with text, continuing a context or an interrupted Task when given. */
export interface OutgoingMessage {
  messageId: string
  text: string
  contextId?: string
  taskId?: string
}

/**
 * The message in the form a version's wire takes: 0.3 JSON-RPC parts with `kind`; 1.0 (JSON-RPC, REST,
 * gRPC's ProtoJSON) `ROLE_USER` and plain parts; 0.3 REST (`content`) is the 1.0 form with parts renamed.
 */
export function wireMessage(version: ProtocolVersion, message: OutgoingMessage): JsonObject {
  const ids = { ...(message.contextId && { contextId: message.contextId }), ...(message.taskId && { taskId: message.taskId }) }
  if (version === "0.3") return { kind: "message", messageId: message.messageId, role: "user", parts: [{ kind: "text", text: message.text }], ...ids }
  return { messageId: message.messageId, role: "ROLE_USER", parts: [{ text: message.text }], ...ids }
}

/** SendMessage's configuration asking for the Task at once: 1.0 waits unless told, 0.3 returns unless told. */
export function sendConfiguration(version: ProtocolVersion): JsonObject {
  return version === "1.0" ? { returnImmediately: true } : { blocking: false }
}
