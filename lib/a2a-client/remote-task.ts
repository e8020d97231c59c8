import { stateFromWire } from "../a2a/wire.js"
import { TERMINAL_STATES, type JsonObject, type TaskState } from "../types.js"

/**
 * What a remote agent answered, read the same whatever its version and
 * binding: 0.3 JSON (`kind`, lowercase states), 1.0 (`TASK_STATE_*`, parts
 * without `kind`), 0.3 REST (`content` for a message's parts,
 * `TASK_STATE_CANCELLED`) and gRPC's ProtoJSON (the 1.0 form).
 */

/** A remote Task as the tool needs it: where it is and its text. */
export interface RemoteTask {
  kind: "task"
  id: string
  contextId?: string
  state: TaskState
  /** The status message's text: the question of input-required, the reason of failed. */
  statusText: string
  /** The artifacts' text, in order. */
  artifactText: string
  /** The last agent message of the history, for a Task that answered without an artifact. */
  lastAgentText: string
}

/** The agent answered with a message and no Task. */
export interface RemoteMessage {
  kind: "message"
  contextId?: string
  taskId?: string
  text: string
}

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === "object" && !Array.isArray(value)

/** States the agent stops at until we speak again (or forever). */
export function isSettled(state: TaskState): boolean {
  return TERMINAL_STATES.has(state) || state === "input-required" || state === "auth-required" || state === "unknown"
}

function stateOf(value: unknown): TaskState {
  const text = typeof value === "string" ? value : ""
  if (text === "TASK_STATE_CANCELLED") return "canceled"
  return (text.startsWith("TASK_STATE_") ? stateFromWire("1.0", text) : stateFromWire("0.3", text)) ?? "unknown"
}

/** One part as text: text as it is, data as JSON, a file as a line naming it. */
function partText(part: unknown): string {
  if (!isObject(part)) return ""
  if (typeof part.text === "string") return part.text
  if (part.data !== undefined) return JSON.stringify(part.data)
  const file = isObject(part.file) ? part.file : part
  const name = [file.name, file.filename].find((value) => typeof value === "string")
  const where = [file.uri, file.url, file.fileWithUri].find((value) => typeof value === "string")
  return `[file${name ? ` ${name}` : ""}${where ? ` at ${where}` : ""}]`
}

/** A message's or an artifact's text: its parts (0.3 REST messages call them content). */
function textOf(holder: unknown): string {
  if (!isObject(holder)) return ""
  const parts = Array.isArray(holder.parts) ? holder.parts : Array.isArray(holder.content) ? holder.content : []
  return parts.map(partText).join("")
}

const optional = (value: unknown) => (typeof value === "string" && value !== "" ? value : undefined)

/** A Task in any of the forms; throws when it has no id. */
export function readTask(value: unknown): RemoteTask {
  if (!isObject(value) || typeof value.id !== "string" || value.id === "") throw new Error(`the agent answered something that is not a Task: ${JSON.stringify(value)?.slice(0, 200)}`)
  const status = isObject(value.status) ? value.status : {}
  const history = Array.isArray(value.history) ? value.history.filter(isObject) : []
  const lastAgent = history.filter((message) => message.role === "agent" || message.role === "ROLE_AGENT").at(-1)
  return {
    kind: "task",
    id: value.id,
    contextId: optional(value.contextId),
    state: stateOf(status.state),
    statusText: textOf(status.message),
    artifactText: (Array.isArray(value.artifacts) ? value.artifacts : []).map(textOf).filter((text) => text !== "").join("\n"),
    lastAgentText: textOf(lastAgent),
  }
}

/** SendMessage's result: 1.0 and REST `{task}` / `{message}` (0.3 REST's proto also `{msg}`), 0.3 JSON-RPC a bare Task or Message. */
export function readSendResult(value: unknown): RemoteTask | RemoteMessage {
  if (isObject(value)) {
    if (isObject(value.task)) return readTask(value.task)
    const message = isObject(value.message) ? value.message : isObject(value.msg) ? value.msg : value.kind === "message" ? value : undefined
    if (message) return { kind: "message", contextId: optional(message.contextId), taskId: optional(message.taskId), text: textOf(message) }
  }
  return readTask(value)
}
