import { Ajv, type ErrorObject, type ValidateFunction } from "ajv"
import type { A2AMessage, JsonObject } from "../types.js"
import { A2AError } from "./errors.js"

/**
 * The one place request params are checked. Each method's params have a
 * JSON Schema; a failure becomes -32602 naming the first bad field
 * (`params.message.parts[0].text must be string`).
 */

/** Bounds that keep a single request from holding unbounded memory or CPU. */
const MAX_ID = 1024
const MAX_PARTS = 1000

const metadata = { type: "object" } as const
const id = { type: "string", minLength: 1, maxLength: MAX_ID } as const

const part = {
  type: "object",
  required: ["kind"],
  discriminator: { propertyName: "kind" },
  oneOf: [
    {
      properties: { kind: { const: "text" }, text: { type: "string" }, metadata },
      required: ["text"],
    },
    {
      properties: {
        kind: { const: "file" },
        file: {
          type: "object",
          properties: { name: { type: "string" }, mimeType: { type: "string" }, bytes: { type: "string" }, uri: { type: "string" } },
          anyOf: [{ required: ["bytes"] }, { required: ["uri"] }],
        },
        metadata,
      },
      required: ["file"],
    },
    {
      properties: { kind: { const: "data" }, data: { type: "object" }, metadata },
      required: ["data"],
    },
  ],
} as const

const message = {
  type: "object",
  required: ["role", "parts"],
  properties: {
    kind: { const: "message" },
    messageId: id,
    role: { enum: ["user", "agent"] },
    parts: { type: "array", minItems: 1, maxItems: MAX_PARTS, items: part },
    taskId: id,
    contextId: id,
    referenceTaskIds: { type: "array", items: id },
    metadata,
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
        historyLength: { type: "integer", minimum: 0 },
        acceptedOutputModes: { type: "array", items: { type: "string" } },
      },
    },
    metadata,
  },
} as const

const getTaskSchema = {
  type: "object",
  required: ["id"],
  properties: { id, historyLength: { type: "integer", minimum: 0 }, metadata },
} as const

export interface SendMessageParams {
  message: Omit<A2AMessage, "messageId"> & { messageId?: string }
  configuration?: { blocking?: boolean; historyLength?: number; acceptedOutputModes?: string[] }
  metadata?: JsonObject
}

export interface GetTaskParams {
  id: string
  historyLength?: number
}

const ajv = new Ajv({ allErrors: false, discriminator: true, strict: false })
const validators = {
  sendMessage: ajv.compile<SendMessageParams>(sendMessageSchema),
  getTask: ajv.compile<GetTaskParams>(getTaskSchema),
}

export const parseSendMessageParams = (params: unknown) => check(validators.sendMessage, params)
export const parseGetTaskParams = (params: unknown) => check(validators.getTask, params)

function check<T>(validate: ValidateFunction<T>, params: unknown): T {
  if (validate(params)) return params
  // An anyOf failure says more than the sub-schema misses that precede it.
  const errors = validate.errors ?? []
  throw describe(errors.find((e) => e.keyword === "anyOf") ?? errors[0])
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
      field = "params" + pointerToPath(error.instancePath)
      break
    case "enum":
      wanted = `must be one of ${(error.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`
      break
    case "const":
      wanted = `must be ${JSON.stringify(error.params.allowedValue)}`
      break
    case "anyOf":
      wanted = "needs bytes or uri"
      break
    case "type":
      wanted = `must be ${error.params.type === "integer" ? "an integer" : `a${/^[aeiou]/.test(String(error.params.type)) ? "n" : ""} ${error.params.type}`}`
      break
  }
  return A2AError.invalidParams(field, wanted)
}

function pointerToPath(pointer: string): string {
  if (pointer === "") return ""
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
