import { randomUUID } from "node:crypto"
import { publicMetadata, publicTask } from "../internals.js"
import { copyWith } from "../objects.js"
import type { PushConfigRecord } from "../stores/push-store.js"
import type { A2AArtifact, A2AMessage, A2APart, A2ATask, A2ATaskStatus, JsonObject, TaskState } from "../types.js"
import { A2AError, ErrorCode, ERROR_INFO_TYPE, errorInfo } from "./errors.js"
import type { TaskEvent } from "../streams/events.js"

/**
 * The one place stored shapes become wire shapes and back.
 *
 * Stored form = A2A 0.3 JSON (lowercase states, `kind` on parts). A request
 * without an `A2A-Version` header (or with 0.3) is answered in that form;
 * `A2A-Version: 1.0` gets the 1.0 forms: wrapped results, `TASK_STATE_*`,
 * `ROLE_*`, parts without `kind`, `{statusUpdate}` / `{artifactUpdate}` events.
 */
export type WireVersion = "0.3" | "1.0"

const SUPPORTED_VERSIONS: readonly WireVersion[] = ["1.0", "0.3"]

/** The version a request asked for; absent means 0.3. Patch numbers do not count. */
export function negotiateVersion(header: string | string[] | undefined): WireVersion {
  if (header === "1.0" || header === "0.3") return header
  const value = (Array.isArray(header) ? header[0] : header)?.trim() ?? ""
  if (value === "") return "0.3"
  const match = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(value)
  const majorMinor = match ? `${Number(match[1])}.${Number(match[2])}` : value
  if (majorMinor === "1.0" || majorMinor === "0.3") return majorMinor
  throw new A2AError(
    ErrorCode.VersionNotSupported,
    `A2A version ${JSON.stringify(value.slice(0, 32))} is not supported; send A2A-Version: 1.0, or 0.3 (or no header)`,
    { supportedVersions: SUPPORTED_VERSIONS },
  )
}

/**
 * The one fallback rule: an answer sent whatever the request asked for (an error body, the agent card)
 * takes the version asked for, or 0.3 (the form of a request with no header) when it names none we speak.
 */
export function answerVersion(header: string | string[] | undefined): WireVersion {
  try {
    return negotiateVersion(header)
  } catch {
    return "0.3"
  }
}

const STATE_TO_V1: Record<TaskState, string> = {
  submitted: "TASK_STATE_SUBMITTED",
  working: "TASK_STATE_WORKING",
  "input-required": "TASK_STATE_INPUT_REQUIRED",
  "auth-required": "TASK_STATE_AUTH_REQUIRED",
  completed: "TASK_STATE_COMPLETED",
  canceled: "TASK_STATE_CANCELED",
  failed: "TASK_STATE_FAILED",
  rejected: "TASK_STATE_REJECTED",
  unknown: "TASK_STATE_UNSPECIFIED",
}
const STATE_FROM_V1 = new Map(Object.entries(STATE_TO_V1).map(([stored, wire]) => [wire, stored as TaskState]))

/** The stored state a wire state names, or undefined for "no filter" values. */
export function stateFromWire(version: WireVersion, state: string): TaskState | undefined {
  if (version === "0.3") return state !== "unknown" && Object.hasOwn(STATE_TO_V1, state) ? (state as TaskState) : undefined
  // TASK_STATE_UNSPECIFIED means no filter; UNRECOGNIZED is what the official JS client sends when none is set.
  if (state === "TASK_STATE_UNSPECIFIED" || state === "UNRECOGNIZED") return undefined
  return STATE_FROM_V1.get(state)
}

/*
 * The 1.0 writers build each object field by field, skipping undefined
 * values: no rest copies and no `delete`, which would leave V8 objects in
 * slow dictionary mode for the serialization that follows (the GetTask
 * profile showed it). Only the fields 1.0 defines are written.
 */

/** Sets `key` when the value is defined. */
function put(target: JsonObject, key: string, value: unknown): void {
  if (value !== undefined) target[key] = value
}

function partToV1(part: A2APart): JsonObject {
  const out: JsonObject = {}
  switch (part.kind) {
    case "text":
      out.text = part.text
      break
    case "data":
      out.data = part.data
      break
    case "file":
      if (part.file.bytes !== undefined) out.raw = part.file.bytes
      else out.url = part.file.uri
      put(out, "filename", part.file.name)
      put(out, "mediaType", part.file.mimeType)
      break
  }
  put(out, "metadata", part.metadata)
  return out
}

function messageToV1(message: A2AMessage): JsonObject {
  const out: JsonObject = { messageId: message.messageId }
  put(out, "contextId", message.contextId)
  put(out, "taskId", message.taskId)
  out.role = message.role === "user" ? "ROLE_USER" : "ROLE_AGENT"
  out.parts = message.parts.map(partToV1)
  put(out, "metadata", message.metadata)
  put(out, "extensions", (message as { extensions?: unknown }).extensions)
  put(out, "referenceTaskIds", (message as { referenceTaskIds?: unknown }).referenceTaskIds)
  return out
}

function artifactToV1(artifact: A2AArtifact, index: number): JsonObject {
  // 1.0 requires an artifactId; Tasks saved without one get a stable positional id.
  const out: JsonObject = { artifactId: artifact.artifactId ?? `artifact-${index}` }
  put(out, "name", artifact.name)
  put(out, "description", artifact.description)
  out.parts = artifact.parts.map(partToV1)
  put(out, "metadata", artifact.metadata)
  return out
}

function statusToV1(status: A2ATaskStatus): JsonObject {
  const out: JsonObject = { state: STATE_TO_V1[status.state] ?? "TASK_STATE_UNSPECIFIED" }
  if (status.message !== undefined) out.message = messageToV1(status.message)
  put(out, "timestamp", status.timestamp)
  return out
}

function taskToV1(task: A2ATask): JsonObject {
  const out: JsonObject = { id: task.id }
  put(out, "contextId", task.contextId)
  out.status = statusToV1(task.status)
  if (task.artifacts !== undefined) out.artifacts = task.artifacts.map(artifactToV1)
  if (task.history !== undefined) out.history = task.history.map(messageToV1)
  put(out, "metadata", publicMetadata(task))
  return out
}

const task03 = (task: A2ATask): A2ATask => ({ ...publicTask(task), kind: "task" })

/** How one wire version writes what the server answers. */
export interface WireCodec {
  readonly version: WireVersion
  /** GetTask, CancelTask and ListTasks entries. */
  task(task: A2ATask): unknown
  /** SendMessage's result. */
  sendResult(task: A2ATask): unknown
  /** A stream event; `final` marks the last one (0.3 writes it, 1.0 just closes the stream). */
  streamEvent(event: TaskEvent | { type: "task"; task: A2ATask }, final: boolean): unknown
  /** A JSON-RPC error object in this version's form. */
  error(error: A2AError): { code: number; message: string; data?: unknown }
  /** A push config, as Create/Get answer it. */
  pushConfig(config: PushConfigRecord): unknown
  /** ListTaskPushNotificationConfigs' result (0.3: a bare array, no paging). */
  pushConfigList(configs: PushConfigRecord[], nextPageToken: string): unknown
}

/** 1.0 TaskPushNotificationConfig: flat, one auth scheme. */
function pushConfigToV1(config: PushConfigRecord): JsonObject {
  const out: JsonObject = { id: config.id, taskId: config.taskId, url: config.url }
  put(out, "token", config.token)
  if (config.authentication !== undefined) {
    const authentication: JsonObject = { scheme: config.authentication.scheme }
    put(authentication, "credentials", config.authentication.credentials)
    out.authentication = authentication
  }
  return out
}

/** 0.3 TaskPushNotificationConfig: `{taskId, pushNotificationConfig}`, schemes as a list. */
function pushConfigTo03(config: PushConfigRecord): JsonObject {
  const inner: JsonObject = { id: config.id, url: config.url }
  put(inner, "token", config.token)
  if (config.authentication !== undefined) {
    const authentication: JsonObject = { schemes: [config.authentication.scheme] }
    put(authentication, "credentials", config.authentication.credentials)
    inner.authentication = authentication
  }
  return { taskId: config.taskId, pushNotificationConfig: inner }
}

const codec03: WireCodec = {
  version: "0.3",
  task: task03,
  sendResult: task03,
  streamEvent(event, final) {
    if (event.type === "task") return task03(event.task)
    const { taskId, contextId } = event
    if (event.type === "artifact") {
      return { kind: "artifact-update", taskId, contextId, artifact: event.artifact, ...(event.append && { append: true }), lastChunk: event.lastChunk }
    }
    return { kind: "status-update", taskId, contextId, status: event.status, final }
  },
  error: (error) => error.toJSON(),
  pushConfig: pushConfigTo03,
  pushConfigList: (configs) => configs.map(pushConfigTo03),
}

const codec10: WireCodec = {
  version: "1.0",
  task: taskToV1,
  sendResult: (task) => ({ task: taskToV1(task) }),
  streamEvent(event) {
    if (event.type === "task") return { task: taskToV1(event.task) }
    const { taskId, contextId } = event
    if (event.type === "artifact") {
      // Events carry an artifactId (the follower names an id-less stored artifact by its index, as taskToV1 does).
      const artifact = artifactToV1(event.artifact, 0)
      return { artifactUpdate: { taskId, contextId, artifact, ...(event.append && { append: true }), lastChunk: event.lastChunk } }
    }
    return { statusUpdate: { taskId, contextId, status: statusToV1(event.status) } }
  },
  // 1.0 carries error details as a list of google.rpc ErrorInfo objects (errors.ts's, as REST and gRPC send it).
  error(error) {
    const { reason, domain, metadata } = errorInfo(error)
    const info: JsonObject = { "@type": ERROR_INFO_TYPE, reason, domain }
    if (Object.keys(metadata).length > 0) info.metadata = metadata
    return { code: error.code, message: error.message, data: [info] }
  },
  pushConfig: pushConfigToV1,
  pushConfigList: (configs, nextPageToken) => ({ configs: configs.map(pushConfigToV1), nextPageToken }),
}


export function codecFor(version: WireVersion): WireCodec {
  return version === "1.0" ? codec10 : codec03
}

/** A 1.0 part as the stored (0.3) part. The params schema has already checked its shape. */
function partFromV1(part: JsonObject): A2APart {
  const extra = part.metadata ? { metadata: part.metadata as JsonObject } : {}
  if (typeof part.text === "string") return { kind: "text", text: part.text, ...extra }
  if (part.data !== undefined) {
    // 0.3 data parts hold objects; 1.0 allows any JSON value, kept under "value".
    const data = part.data !== null && typeof part.data === "object" && !Array.isArray(part.data) ? (part.data as JsonObject) : { value: part.data }
    return { kind: "data", data, ...extra }
  }
  const file: { name?: string; mimeType?: string } = {}
  if (typeof part.filename === "string") file.name = part.filename
  if (typeof part.mediaType === "string") file.mimeType = part.mediaType
  return { kind: "file", file: part.raw !== undefined ? { ...file, bytes: part.raw as string } : { ...file, uri: part.url as string }, ...extra }
}

/** A message as it may arrive: 0.3 or 1.0 parts and roles. */
export interface WireMessage {
  kind?: "message"
  messageId?: string
  role: "user" | "agent" | "ROLE_USER" | "ROLE_AGENT"
  parts: Array<A2APart | JsonObject>
  taskId?: string
  contextId?: string
  referenceTaskIds?: string[]
  extensions?: string[]
  metadata?: JsonObject
}

/** An incoming message, 0.3 or 1.0 shaped, in the stored form; the short 0.3 form (no messageId) gets one here. */
export function messageFromWire(message: WireMessage): A2AMessage {
  const { role, parts } = message
  return copyWith(message, {
    kind: "message" as const,
    messageId: message.messageId ?? randomUUID(),
    role: role === "agent" || role === "ROLE_AGENT" ? ("agent" as const) : ("user" as const),
    parts: parts.map((part) => ("kind" in part ? (part as A2APart) : partFromV1(part))),
  })
}
