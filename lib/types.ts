/**
 * The A2A data shapes as toolnexus stores them: the A2A 0.3 JSON forms
 * (lowercase states, parts tagged with `kind`). Conversion to other wire
 * versions happens only at the wire, never in a store.
 */

/** Where a Task is in its life. Terminal states never change again. */
export type TaskState =
  | "submitted"
  | "working"
  | "input-required"
  | "auth-required"
  | "completed"
  | "canceled"
  | "failed"
  | "rejected"
  | "unknown"

export type JsonObject = { [key: string]: unknown }

export interface A2ATextPart {
  kind: "text"
  text: string
  metadata?: JsonObject
}

/** A file carried inline (base64 `bytes`) or by reference (`uri`). */
export interface A2AFilePart {
  kind: "file"
  file: { name?: string; mimeType?: string; bytes?: string; uri?: string }
  metadata?: JsonObject
}

export interface A2ADataPart {
  kind: "data"
  data: JsonObject
  metadata?: JsonObject
}

export type A2APart = A2ATextPart | A2AFilePart | A2ADataPart

export interface A2AMessage {
  kind?: "message"
  messageId: string
  role: "user" | "agent"
  parts: A2APart[]
  taskId?: string
  contextId?: string
  metadata?: JsonObject
}

export interface A2AArtifact {
  artifactId?: string
  name?: string
  description?: string
  parts: A2APart[]
  metadata?: JsonObject
}

export interface A2ATaskStatus {
  state: TaskState
  /** The agent's word on this state: the error for `failed`, the question for `input-required`. */
  message?: A2AMessage
  /** ISO-8601 UTC time of the transition. */
  timestamp?: string
}

export interface A2ATask {
  id: string
  contextId?: string
  kind?: "task"
  status: A2ATaskStatus
  history?: A2AMessage[]
  artifacts?: A2AArtifact[]
  metadata?: JsonObject
}

/** The states after which a Task never changes. */
export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set<TaskState>(["completed", "canceled", "failed", "rejected"])

export interface AgentSkill {
  id: string
  name: string
  description: string
  tags: string[]
  examples?: string[]
  inputModes?: string[]
  outputModes?: string[]
}

export interface AgentProvider {
  organization: string
  url: string
}

/** The document served at `/.well-known/agent-card.json`. */
export interface AgentCard {
  name: string
  description: string
  version: string
  url: string
  protocolVersion: string
  preferredTransport: "JSONRPC"
  /** 1.0: every interface served, by binding and version; for GRPC the url is "host:port". */
  supportedInterfaces: Array<{ url: string; protocolBinding: "JSONRPC" | "HTTP+JSON" | "GRPC"; protocolVersion: string }>
  /** 0.3: the interfaces besides `url`'s preferred one (0.3's gRPC is not served). */
  additionalInterfaces?: Array<{ url: string; transport: "JSONRPC" | "HTTP+JSON" }>
  provider?: AgentProvider
  capabilities: { streaming: boolean; pushNotifications: boolean; extendedAgentCard?: boolean; stateTransitionHistory?: boolean }
  defaultInputModes: string[]
  defaultOutputModes: string[]
  skills: AgentSkill[]
  /** 0.3: whether agent/getAuthenticatedExtendedCard answers (1.0 says it as capabilities.extendedAgentCard). */
  supportsAuthenticatedExtendedCard?: boolean
  /** How peers authenticate, in the form of the version the card is read in (1.0 or 0.3 shapes). */
  securitySchemes?: Record<string, JsonObject>
  /** 1.0: which schemes a request must satisfy. */
  securityRequirements?: JsonObject[]
  /** 0.3: which schemes a request must satisfy. */
  security?: Array<Record<string, string[]>>
  /** JWS signatures over the card's canonical form (A2A §8.4), when the server signs its card. */
  signatures?: AgentCardSignature[]
}

/** One JWS over an agent card, in flattened form without the payload: the card itself is the payload. */
export interface AgentCardSignature {
  /** The base64url protected header: alg, kid, typ. */
  protected: string
  signature: string
  header?: JsonObject
}
