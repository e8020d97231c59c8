import { Ajv, type ErrorObject, type ValidateFunction } from "ajv"
import { normalizeTimestamp, TIMESTAMP_EXAMPLE } from "../timestamp.js"
import type { JsonObject } from "../types.js"
import { decodePageToken, MAX_PAGE_SIZE, type TaskQuery } from "../stores/list.js"
import { MAX_DEPTH } from "./depth.js"
import { A2AError } from "./errors.js"
import { stateFromWire, type WireMessage, type WireVersion } from "./wire.js"

/**
 * The one place request params are checked. Each method's params have a
 * JSON Schema; a failure becomes -32602 naming the first bad field
 * (`params.message.parts[0].text must be a string`).
 *
 * Incoming messages are read leniently across versions: the role is
 * "user" or "ROLE_USER" (never the agent's), a part may be 0.3 (`{kind:"text",text}`) or 1.0
 * (`{text}`); answers are always written in the version asked for.
 */

/** Bounds that keep a single request from holding unbounded memory or CPU. */
const MAX_ID = 1024
const MAX_PARTS = 1000

const metadata = { type: "object" } as const
const id = { type: "string", minLength: 1, maxLength: MAX_ID } as const
const optionalString = { type: "string" } as const

/** A 0.3 part: tagged with kind. */
const part03 = {
  required: ["kind"],
  discriminator: { propertyName: "kind" },
  oneOf: [
    { properties: { kind: { const: "text" }, text: { type: "string" }, metadata }, required: ["text"] },
    {
      properties: {
        kind: { const: "file" },
        file: {
          type: "object",
          properties: { name: optionalString, mimeType: optionalString, bytes: optionalString, uri: optionalString },
          anyOf: [{ required: ["bytes"] }, { required: ["uri"] }],
        },
        metadata,
      },
      required: ["file"],
    },
    { properties: { kind: { const: "data" }, data: { type: "object" }, metadata }, required: ["data"] },
  ],
} as const

/** A 1.0 part: exactly one content field. */
const part10 = {
  properties: { text: { type: "string" }, raw: { type: "string" }, url: { type: "string" }, mediaType: optionalString, filename: optionalString, metadata },
  oneOf: [{ required: ["text"] }, { required: ["raw"] }, { required: ["url"] }, { required: ["data"] }],
} as const

const part = { type: "object", if: { required: ["kind"] }, then: part03, else: part10 } as const

const message = {
  type: "object",
  required: ["role", "parts"],
  properties: {
    kind: { const: "message" },
    messageId: id,
    // A peer speaks as the user: the agent's messages are this server's to write, never a request's.
    role: { enum: ["user", "ROLE_USER"] },
    parts: { type: "array", minItems: 1, maxItems: MAX_PARTS, items: part },
    taskId: id,
    contextId: id,
    referenceTaskIds: { type: "array", items: id },
    extensions: { type: "array", items: { type: "string" } },
    metadata,
  },
} as const

/** Push config limits: ours (the spec sets none), in characters. */
export const PUSH_LIMITS = {
  /** Configs one Task may have. */
  configsPerTask: 10,
  url: 2048,
  token: 8192,
  credentials: 8192,
  scheme: 64,
} as const
/** What goes into an HTTP header: printable ASCII, so no line break or control character can reach the request. */
const headerText = (maxLength: number) => ({ type: "string", maxLength, pattern: "^[\\x20-\\x7e]*$" }) as const
/** An auth scheme is an HTTP token (RFC 9110): Bearer, Basic, ... */
const scheme = { type: "string", minLength: 1, maxLength: PUSH_LIMITS.scheme, pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" } as const
const pushUrl = { type: "string", minLength: 1, maxLength: PUSH_LIMITS.url } as const
/** A config id may be "" (protobuf JSON's empty value): the server then gives one. */
const configId = { type: "string", maxLength: MAX_ID } as const

/** 1.0 TaskPushNotificationConfig: flat, `authentication: {scheme, credentials}`. */
const pushConfig10 = {
  type: "object",
  required: ["url"],
  properties: {
    tenant: { type: "string", maxLength: MAX_ID },
    id: configId,
    taskId: { type: "string", maxLength: MAX_ID },
    url: pushUrl,
    token: headerText(PUSH_LIMITS.token),
    authentication: {
      type: "object",
      required: ["scheme"],
      properties: { scheme, credentials: headerText(PUSH_LIMITS.credentials) },
    },
  },
} as const

/** 0.3 PushNotificationConfig: `authentication: {schemes: [...], credentials}`. */
const pushConfig03 = {
  type: "object",
  required: ["url"],
  properties: {
    id: configId,
    url: pushUrl,
    token: headerText(PUSH_LIMITS.token),
    authentication: {
      type: "object",
      required: ["schemes"],
      properties: { schemes: { type: "array", minItems: 1, maxItems: 16, items: scheme }, credentials: headerText(PUSH_LIMITS.credentials) },
    },
  },
} as const

const sendMessageSchema = {
  type: "object",
  required: ["message"],
  properties: {
    message,
    configuration: {
      type: "object",
      properties: {
        blocking: { type: "boolean" },
        returnImmediately: { type: "boolean" },
        historyLength: { type: "integer", minimum: 0 },
        acceptedOutputModes: { type: "array", items: { type: "string" } },
        taskPushNotificationConfig: pushConfig10,
        pushNotificationConfig: pushConfig03,
      },
    },
    metadata,
  },
} as const

const pushSchemas = {
  create10: { ...pushConfig10, required: ["taskId", "url"], properties: { ...pushConfig10.properties, taskId: id } },
  set03: { type: "object", required: ["taskId", "pushNotificationConfig"], properties: { taskId: id, pushNotificationConfig: pushConfig03, metadata } },
  get10: { type: "object", required: ["taskId", "id"], properties: { tenant: { type: "string", maxLength: MAX_ID }, taskId: id, id } },
  get03: { type: "object", required: ["id"], properties: { id, pushNotificationConfigId: configId, metadata } },
  list10: {
    type: "object",
    required: ["taskId"],
    properties: { tenant: { type: "string", maxLength: MAX_ID }, taskId: id, pageSize: { type: "integer", minimum: 0, maximum: MAX_PAGE_SIZE }, pageToken: { type: "string", maxLength: 4096 } },
  },
  list03: { type: "object", required: ["id"], properties: { id, metadata } },
  delete03: { type: "object", required: ["id", "pushNotificationConfigId"], properties: { id, pushNotificationConfigId: id, metadata } },
} as const

const taskIdSchema = {
  type: "object",
  required: ["id"],
  properties: { id, historyLength: { type: "integer", minimum: 0 }, metadata },
} as const

const listTasksSchema = {
  type: "object",
  properties: {
    contextId: id,
    status: { type: "string" },
    pageSize: { type: "integer", minimum: 1, maximum: MAX_PAGE_SIZE },
    pageToken: { type: "string", maxLength: 4096 },
    historyLength: { type: "integer", minimum: 0 },
    statusTimestampAfter: { type: "string", maxLength: 64 },
    includeArtifacts: { type: "boolean" },
    tenant: { type: "string" },
  },
} as const

export interface SendMessageParams {
  message: WireMessage
  configuration?: {
    blocking?: boolean
    returnImmediately?: boolean
    historyLength?: number
    acceptedOutputModes?: string[]
    taskPushNotificationConfig?: PushConfig10
    pushNotificationConfig?: PushConfig03
  }
  metadata?: JsonObject
}

interface PushConfig10 {
  id?: string
  taskId?: string
  url: string
  token?: string
  authentication?: { scheme: string; credentials?: string }
}

interface PushConfig03 {
  id?: string
  url: string
  token?: string
  authentication?: { schemes: string[]; credentials?: string }
}

/** A push config as a request gives it, either version, in one form; `id` absent when the server is to choose it. */
export interface PushConfigInput {
  id?: string
  url: string
  token?: string
  authentication?: { scheme: string; credentials?: string }
}

/** Which Task's config a Get, Delete or List is about. */
export interface PushConfigRef {
  taskId: string
  /** Absent for a 0.3 get without pushNotificationConfigId (meaning the config whose id is the Task's). */
  id?: string
}

export interface PushConfigPage {
  taskId: string
  /** Absent: all (a 0.3 list, or 1.0 without pageSize). */
  pageSize?: number
  pageToken?: string
}

interface TaskIdParams {
  id: string
  historyLength?: number
}

interface ListTasksParams {
  contextId?: string
  status?: string
  pageSize?: number
  pageToken?: string
  historyLength?: number
  statusTimestampAfter?: string
  includeArtifacts?: boolean
}

const ajv = new Ajv({ allErrors: false, discriminator: true, strict: false, verbose: true })
const validators = {
  sendMessage: ajv.compile<SendMessageParams>(sendMessageSchema),
  taskId: ajv.compile<TaskIdParams>(taskIdSchema),
  listTasks: ajv.compile<ListTasksParams>(listTasksSchema),
  create10: ajv.compile<PushConfig10 & { taskId: string }>(pushSchemas.create10),
  set03: ajv.compile<{ taskId: string; pushNotificationConfig: PushConfig03 }>(pushSchemas.set03),
  get10: ajv.compile<{ taskId: string; id: string }>(pushSchemas.get10),
  get03: ajv.compile<{ id: string; pushNotificationConfigId?: string }>(pushSchemas.get03),
  list10: ajv.compile<{ taskId: string; pageSize?: number; pageToken?: string }>(pushSchemas.list10),
  list03: ajv.compile<{ id: string }>(pushSchemas.list03),
  delete03: ajv.compile<{ id: string; pushNotificationConfigId: string }>(pushSchemas.delete03),
}

/** A config from either version's form; empty strings (protobuf JSON's unset) count as absent. */
function pushConfigInput(config: PushConfig10 | PushConfig03): PushConfigInput {
  const input: PushConfigInput = { url: config.url }
  if (config.id !== undefined && config.id !== "") input.id = config.id
  if (config.token !== undefined && config.token !== "") input.token = config.token
  const auth = config.authentication
  if (auth !== undefined) {
    // A 0.3 config may name several schemes; the first is the one used, as the official SDK does.
    const scheme = "schemes" in auth ? auth.schemes[0] : auth.scheme
    input.authentication = auth.credentials !== undefined && auth.credentials !== "" ? { scheme, credentials: auth.credentials } : { scheme }
  }
  return input
}

/** CreateTaskPushNotificationConfig (1.0: the flat config) or tasks/pushNotificationConfig/set (0.3: `{taskId, pushNotificationConfig}`). */
export function parsePushConfigCreate(raw: unknown, version: WireVersion): { taskId: string; config: PushConfigInput; field: string } {
  if (version === "1.0") {
    const params = check(validators.create10, raw)
    return { taskId: params.taskId, config: pushConfigInput(params), field: "params" }
  }
  const params = check(validators.set03, raw)
  return { taskId: params.taskId, config: pushConfigInput(params.pushNotificationConfig), field: "params.pushNotificationConfig" }
}

/** The inline config of SendMessage / SendStreamingMessage, if any, with the field it came in. */
export function inlinePushConfig(params: SendMessageParams): { config: PushConfigInput; field: string } | undefined {
  const configuration = params.configuration
  if (configuration?.taskPushNotificationConfig !== undefined) {
    return { config: pushConfigInput(configuration.taskPushNotificationConfig), field: "params.configuration.taskPushNotificationConfig" }
  }
  if (configuration?.pushNotificationConfig !== undefined) {
    return { config: pushConfigInput(configuration.pushNotificationConfig), field: "params.configuration.pushNotificationConfig" }
  }
  return undefined
}

/** GetTaskPushNotificationConfig `{taskId, id}` (1.0) or tasks/pushNotificationConfig/get `{id, pushNotificationConfigId?}` (0.3). */
export function parsePushConfigRef(raw: unknown, version: WireVersion): PushConfigRef {
  if (version === "1.0") {
    const { taskId, id } = check(validators.get10, raw)
    return { taskId, id }
  }
  const { id, pushNotificationConfigId } = check(validators.get03, raw)
  return pushNotificationConfigId === undefined || pushNotificationConfigId === "" ? { taskId: id } : { taskId: id, id: pushNotificationConfigId }
}

/** DeleteTaskPushNotificationConfig: the same as Get in 1.0; in 0.3 pushNotificationConfigId is required. */
export function parsePushConfigDelete(raw: unknown, version: WireVersion): Required<PushConfigRef> {
  if (version === "1.0") return check(validators.get10, raw)
  const { id, pushNotificationConfigId } = check(validators.delete03, raw)
  return { taskId: id, id: pushNotificationConfigId }
}

/** ListTaskPushNotificationConfigs `{taskId, pageSize?, pageToken?}` (1.0; pageSize 0 is unset) or tasks/pushNotificationConfig/list `{id}` (0.3). */
export function parsePushConfigList(raw: unknown, version: WireVersion): PushConfigPage {
  if (version === "0.3") return { taskId: check(validators.list03, raw).id }
  const { taskId, pageSize, pageToken } = check(validators.list10, raw)
  const page: PushConfigPage = { taskId }
  if (pageSize !== undefined && pageSize > 0) page.pageSize = pageSize
  if (pageToken !== undefined && pageToken !== "") page.pageToken = pageToken
  return page
}

/**
 * SendMessage and SendStreamingMessage params, a new task or a follow-up.
 * `messageId` is required, as both versions define it; the one exception is
 * the short 0.3 form the spec's example sends (`{role, parts}`: no `kind`,
 * no `messageId`), which the server gives an id.
 */
export function parseSendMessageParams(raw: unknown, version: WireVersion): SendMessageParams {
  const params = check(validators.sendMessage, raw)
  const { message } = params
  const shortForm = version === "0.3" && message.kind === undefined
  if (message.messageId === undefined && !shortForm) {
    throw A2AError.invalidParams("params.message.messageId", "is required: a unique id the sender gives each message")
  }
  return params
}
/** GetTask, CancelTask and SubscribeToTask: `{ id, historyLength? }`. */
export const parseTaskIdParams = (params: unknown) => check(validators.taskId, params)
/**
 * ListTasks params as a store query: the status in the version's spelling
 * (TASK_STATE_UNSPECIFIED, or the official JS client's UNRECOGNIZED, means no
 * filter), the time checked as RFC 3339 and normalized to ISO-8601 UTC, the
 * page token checked.
 */
export function parseListTasksQuery(raw: unknown, version: WireVersion): { query: TaskQuery; historyLength?: number } {
  const params = check(validators.listTasks, raw)
  const query: TaskQuery = { contextId: params.contextId, pageSize: params.pageSize, includeArtifacts: params.includeArtifacts }
  if (params.status !== undefined) {
    const state = stateFromWire(version, params.status)
    const noFilter = version === "0.3" ? params.status === "unknown" : params.status === "TASK_STATE_UNSPECIFIED" || params.status === "UNRECOGNIZED"
    if (state === undefined && !noFilter) {
      throw A2AError.invalidParams("params.status", `is not a task state: use one such as ${version === "1.0" ? "TASK_STATE_COMPLETED" : '"completed"'}`)
    }
    query.status = state
  }
  if (params.statusTimestampAfter !== undefined) {
    const after = normalizeTimestamp(params.statusTimestampAfter)
    if (after === undefined) throw A2AError.invalidParams("params.statusTimestampAfter", `must be ${TIMESTAMP_EXAMPLE}`)
    query.statusTimestampAfter = after
  }
  if (params.pageToken !== undefined && params.pageToken !== "") {
    try {
      decodePageToken(params.pageToken)
    } catch {
      throw A2AError.invalidParams("params.pageToken", "is not a nextPageToken from an earlier page")
    }
    query.pageToken = params.pageToken
  }
  return { query, historyLength: params.historyLength }
}

function check<T>(validate: ValidateFunction<T>, params: unknown): T {
  checkDepth(params)
  if (validate(params)) return params
  // An anyOf/oneOf failure says more than the sub-schema misses that precede it.
  const errors = validate.errors ?? []
  throw describe(errors.find((e) => e.keyword === "anyOf" || e.keyword === "oneOf") ?? errors[0])
}

/** Refuses values nested deeper than MAX_DEPTH, naming where. */
function checkDepth(params: unknown): void {
  const keys = pathTooDeep(params, 0)
  if (keys !== undefined) throw A2AError.invalidParams("params" + keys.map(pathSegment).join(""), `nests deeper than ${MAX_DEPTH} levels`)
}

/**
 * The keys leading to the first value nested MAX_DEPTH levels deep, or
 * undefined. The recursion stops at that depth, so it cannot overflow.
 */
function pathTooDeep(value: unknown, depth: number): string[] | undefined {
  if (value === null || typeof value !== "object") return undefined
  if (depth >= MAX_DEPTH) return []
  for (const key in value) {
    const keys = pathTooDeep((value as Record<string, unknown>)[key], depth + 1)
    if (keys !== undefined) {
      keys.unshift(key)
      return keys
    }
  }
  return undefined
}

function describe(error: ErrorObject | undefined): A2AError {
  if (!error) return A2AError.invalidParams("params", "are invalid")
  let field = "params" + pointerToPath(error.instancePath)
  let wanted = error.message ?? "is invalid"
  switch (error.keyword) {
    case "required":
      field += pathSegment(String(error.params.missingProperty))
      wanted = "is required"
      break
    case "discriminator":
      wanted = error.params.error === "mapping" ? `has an unknown kind: expected "text", "file" or "data"` : `needs a "kind" of "text", "file" or "data"`
      break
    case "enum":
      if (error.instancePath.endsWith("/role")) {
        wanted = `must be "user" (1.0: "ROLE_USER"): a request carries the user's message; the agent's messages are the server's own`
        break
      }
      wanted = `must be one of ${(error.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`
      break
    case "pattern":
      wanted = error.params.pattern === scheme.pattern ? "must be an HTTP authentication scheme such as Bearer or Basic" : "must be printable ASCII: it is sent in an HTTP header"
      break
    case "maxLength":
      wanted = `must be at most ${error.params.limit} characters`
      break
    case "const":
      wanted = `must be ${JSON.stringify(error.params.allowedValue)}`
      break
    case "anyOf":
    case "oneOf": {
      const options = (error.schema as Array<{ required: string[] }>).map((s) => s.required[0])
      const several = error.keyword === "oneOf" && error.params.passingSchemas !== null
      wanted = several ? `needs exactly one of ${options.join(", ")}, not several` : `needs one of ${options.join(", ")}`
      break
    }
    case "type":
      wanted = `must be ${error.params.type === "integer" ? "an integer" : `a${/^[aeiou]/.test(String(error.params.type)) ? "n" : ""} ${error.params.type}`}`
      break
  }
  return A2AError.invalidParams(field, wanted)
}

function pointerToPath(pointer: string): string {
  return pointer
    .split("/")
    .slice(1)
    .map((raw) => pathSegment(raw.replace(/~1/g, "/").replace(/~0/g, "~")))
    .join("")
}

function pathSegment(key: string): string {
  if (/^\d+$/.test(key)) return `[${key}]`
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return `.${key}`
  return `[${JSON.stringify(key)}]`
}

/**
 * The tenant a request names (1.0's `tenant` field, on every request; the
 * REST binding's `/{tenant}/` prefix puts it there): null for none, which is
 * a tenant of its own. 0.3 requests have no tenant.
 */
export function parseTenant(raw: unknown, version: WireVersion): string | null {
  if (version === "0.3" || raw === null || typeof raw !== "object" || Array.isArray(raw)) return null
  const tenant = (raw as { tenant?: unknown }).tenant
  if (tenant === undefined || tenant === "") return null
  if (typeof tenant !== "string") throw A2AError.invalidParams("params.tenant", "must be a string naming a tenant")
  if (tenant.length > MAX_ID) throw A2AError.invalidParams("params.tenant", `must be at most ${MAX_ID} characters`)
  return tenant
}
