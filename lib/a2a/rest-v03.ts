import type { JsonObject } from "../types.js"

/**
 * The shapes of A2A 0.3's HTTP+JSON binding: the ProtoJSON of the 0.3
 * a2a.proto, which is not the 0.3 JSON-RPC form the operations speak
 * (`content` for a message's parts, `{file: {fileWithUri}}`,
 * `TASK_STATE_CANCELLED`, `{task}` around a sent message's Task, push
 * configs named `tasks/{id}/pushNotificationConfigs/{configId}`). A 0.3
 * REST request is turned into 0.3 JSON-RPC params here, and a 0.3 result
 * back into the REST form; nothing else about the call differs.
 *
 * Reading is lenient, as the rest of the server is: a field of the wrong
 * shape is handed on as it is, for the params check to name it.
 */

/** 0.3 proto's TaskState names (its canceled is spelled CANCELLED). */
const STATES: Readonly<Record<string, string>> = {
  submitted: "TASK_STATE_SUBMITTED",
  working: "TASK_STATE_WORKING",
  "input-required": "TASK_STATE_INPUT_REQUIRED",
  "auth-required": "TASK_STATE_AUTH_REQUIRED",
  completed: "TASK_STATE_COMPLETED",
  canceled: "TASK_STATE_CANCELLED",
  failed: "TASK_STATE_FAILED",
  rejected: "TASK_STATE_REJECTED",
  unknown: "TASK_STATE_UNSPECIFIED",
}

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === "object" && !Array.isArray(value)

/** Sets `key` when the value is defined and not proto3's empty string. */
function put(target: JsonObject, key: string, value: unknown): void {
  if (value !== undefined && value !== "") target[key] = value
}

// ---------------------------------------------------------------------------
// Results: 0.3 JSON-RPC form in, 0.3 REST form out

function part(part: JsonObject): JsonObject {
  switch (part.kind) {
    case "text":
      return { text: part.text }
    case "data":
      return { data: { data: part.data } }
    case "file": {
      const file = isObject(part.file) ? part.file : {}
      const out: JsonObject = file.bytes !== undefined ? { fileWithBytes: file.bytes } : { fileWithUri: file.uri }
      put(out, "mimeType", file.mimeType)
      return { file: out }
    }
  }
  return {}
}

const parts = (list: unknown): JsonObject[] => (Array.isArray(list) ? list.filter(isObject).map(part) : [])

function message(msg: JsonObject): JsonObject {
  const out: JsonObject = {}
  put(out, "messageId", msg.messageId)
  put(out, "contextId", msg.contextId)
  put(out, "taskId", msg.taskId)
  out.role = msg.role === "agent" ? "ROLE_AGENT" : "ROLE_USER"
  out.content = parts(msg.parts)
  put(out, "metadata", msg.metadata)
  put(out, "extensions", msg.extensions)
  return out
}

function status(value: unknown): JsonObject {
  const status = isObject(value) ? value : {}
  const out: JsonObject = { state: STATES[String(status.state)] ?? "TASK_STATE_UNSPECIFIED" }
  if (isObject(status.message)) out.message = message(status.message)
  put(out, "timestamp", status.timestamp)
  return out
}

function artifact(value: JsonObject): JsonObject {
  const out: JsonObject = {}
  put(out, "artifactId", value.artifactId)
  put(out, "name", value.name)
  put(out, "description", value.description)
  out.parts = parts(value.parts)
  put(out, "metadata", value.metadata)
  put(out, "extensions", value.extensions)
  return out
}

/** A Task (GetTask, CancelTask, a stream's first event). */
export function task(value: unknown): JsonObject {
  const task = isObject(value) ? value : {}
  const out: JsonObject = { id: task.id }
  put(out, "contextId", task.contextId)
  out.status = status(task.status)
  if (Array.isArray(task.artifacts)) out.artifacts = task.artifacts.filter(isObject).map(artifact)
  if (Array.isArray(task.history)) out.history = task.history.filter(isObject).map(message)
  put(out, "metadata", task.metadata)
  return out
}

/** SendMessage's result: a SendMessageResponse, `{task}` or `{message}`. */
export function sendResult(value: unknown): JsonObject {
  return isObject(value) && value.kind === "message" ? { message: message(value) } : { task: task(value) }
}

/** One stream event as a StreamResponse: `{task}`, `{message}`, `{statusUpdate}` or `{artifactUpdate}`. */
export function streamResponse(value: unknown): JsonObject {
  const event = isObject(value) ? value : {}
  switch (event.kind) {
    case "status-update": {
      const out: JsonObject = { taskId: event.taskId, contextId: event.contextId, status: status(event.status) }
      if (event.final === true) out.final = true
      put(out, "metadata", event.metadata)
      return { statusUpdate: out }
    }
    case "artifact-update": {
      const out: JsonObject = { taskId: event.taskId, contextId: event.contextId, artifact: artifact(isObject(event.artifact) ? event.artifact : {}) }
      if (event.append === true) out.append = true
      if (event.lastChunk === true) out.lastChunk = true
      put(out, "metadata", event.metadata)
      return { artifactUpdate: out }
    }
    case "message":
      return { message: message(event) }
  }
  return { task: task(event) }
}

/** A TaskPushNotificationConfig: the JSON-RPC `{taskId, pushNotificationConfig}` with the resource name in place of taskId. */
export function pushConfig(value: unknown): JsonObject {
  const record = isObject(value) ? value : {}
  const config = isObject(record.pushNotificationConfig) ? record.pushNotificationConfig : {}
  return { name: `tasks/${String(record.taskId)}/pushNotificationConfigs/${String(config.id)}`, pushNotificationConfig: config }
}

/** ListTaskPushNotificationConfig's response: the JSON-RPC result is a bare list. */
export function pushConfigList(value: unknown): JsonObject {
  return { configs: Array.isArray(value) ? value.map(pushConfig) : [] }
}

// ---------------------------------------------------------------------------
// Requests: 0.3 REST form in, 0.3 JSON-RPC params out

const ROLES: Readonly<Record<string, string>> = { ROLE_USER: "user", ROLE_AGENT: "agent" }

function partFromRest(value: unknown): unknown {
  if (!isObject(value)) return value
  if (value.text !== undefined) return { kind: "text", text: value.text }
  if (isObject(value.file)) {
    const { fileWithUri, fileWithBytes, mimeType } = value.file
    const file: JsonObject = fileWithBytes !== undefined ? { bytes: fileWithBytes } : { uri: fileWithUri }
    put(file, "mimeType", mimeType)
    return { kind: "file", file }
  }
  if (isObject(value.data)) return { kind: "data", data: value.data.data }
  return value
}

function messageFromRest(value: unknown): unknown {
  if (!isObject(value)) return value
  const out: JsonObject = { kind: "message" }
  put(out, "messageId", value.messageId)
  put(out, "contextId", value.contextId)
  put(out, "taskId", value.taskId)
  out.role = typeof value.role === "string" ? (ROLES[value.role] ?? value.role) : value.role
  out.parts = Array.isArray(value.content) ? value.content.map(partFromRest) : value.content
  put(out, "metadata", value.metadata)
  if (Array.isArray(value.extensions) && value.extensions.length > 0) out.extensions = value.extensions
  return out
}

function configurationFromRest(value: unknown): unknown {
  if (!isObject(value)) return value
  const out: JsonObject = {}
  if (Array.isArray(value.acceptedOutputModes) && value.acceptedOutputModes.length > 0) out.acceptedOutputModes = value.acceptedOutputModes
  put(out, "pushNotificationConfig", value.pushNotification)
  // proto3's int32: 0 is unset, not "no history".
  if (value.historyLength !== 0) put(out, "historyLength", value.historyLength)
  put(out, "blocking", value.blocking)
  return out
}

/** SendMessage / SendStreamingMessage: a 0.3 SendMessageRequest `{message: {role, content}, configuration?, metadata?}`. */
export function sendParams(body: unknown): unknown {
  if (!isObject(body)) return body
  const params: JsonObject = { message: messageFromRest(body.message) }
  if (body.configuration !== undefined) params.configuration = configurationFromRest(body.configuration)
  put(params, "metadata", body.metadata)
  return params
}
