import protobuf from "protobufjs"
import { normalizeTimestamp } from "../timestamp.js"
import type { JsonObject } from "../types.js"

/**
 * Proto messages and ProtoJSON, both ways, for any message of a loaded
 * proto: the one place the gRPC binding turns what protobufjs decodes into
 * the JSON objects the A2A operations take, and what they answer into what
 * protobufjs encodes. ProtoJSON as the spec uses it: lowerCamelCase names
 * (protoc's json_name), enums by name, Timestamp as an RFC 3339 string,
 * Struct/Value/ListValue as plain JSON, bytes as base64; int64 as numbers
 * (ProtoJSON would write strings; the operations count in numbers). Fields
 * at their default value, unset optionals and empty lists are left out.
 */

/** A value that is not what its field takes; `field` is its JSON path (`message.parts[0].raw`). */
export class ProtoJsonError extends TypeError {
  constructor(
    readonly field: string,
    readonly wanted: string,
  ) {
    super(`${field} ${wanted}`)
    this.name = "ProtoJsonError"
  }
}

/**
 * Message levels a message may nest: protobufjs's limit (protoc's default, 100), which its decoder enforces
 * on what a peer sends, and its encoder on what is answered. Only Values recurse, two levels for each level of
 * JSON (a Value and its Struct or ListValue), so a Struct crosses gRPC up to about 50 levels deep, fewer than
 * the 64 JSON-RPC takes: past it, an answer is refused here, naming where, before the encoder would refuse it without.
 */
const MAX_LEVELS = protobuf.util.recursionLimit

const INT64 = new Set(["int64", "uint64", "sint64", "fixed64", "sfixed64"])
const INTEGER = new Set(["int32", "uint32", "sint32", "fixed32", "sfixed32", ...INT64])
const FLOAT = new Set(["double", "float"])
const BASE64 = /^[A-Za-z0-9+/\-_]*={0,2}$/

/** How one field is read and written, worked out once per message type. */
interface FieldPlan {
  /** Its name in the proto (and in protobufjs objects). */
  name: string
  /** Its ProtoJSON name. */
  json: string
  type: string
  repeated: boolean
  map: boolean
  /** Its message type, when it holds messages. */
  message?: protobuf.Type
  /** Its enum, when it holds one. */
  enumType?: protobuf.Enum
  /** A oneof member or a proto3 `optional`: set only when present, whatever its value. */
  explicit: boolean
}

const plans = new WeakMap<protobuf.Type, FieldPlan[]>()

function planOf(type: protobuf.Type): FieldPlan[] {
  let plan = plans.get(type)
  if (plan === undefined) {
    plan = type.fieldsArray.map((field) => {
      field.resolve()
      const resolved = field.resolvedType
      const jsonName = field.options?.json_name as string | undefined
      return {
        name: field.name,
        json: jsonName ?? jsonNameOf(field.name),
        type: field.type,
        repeated: field.repeated,
        map: field.map,
        ...(resolved instanceof protobuf.Type && { message: resolved }),
        ...(resolved instanceof protobuf.Enum && { enumType: resolved }),
        explicit: field.partOf !== null,
      }
    })
    plans.set(type, plan)
  }
  return plan
}

/** protoc's json_name: each "_x" becomes "X". */
function jsonNameOf(name: string): string {
  return name.replace(/_(.?)/g, (_, next: string) => next.toUpperCase())
}

const join = (path: string, key: string) => (path === "" ? key : `${path}.${key}`)

// ---- proto to ProtoJSON ----

/** A message of `type` (as protobufjs decodes it, or a plain object of proto field names) as ProtoJSON. */
export function toProtoJson(type: protobuf.Type, message: object): JsonObject {
  return messageToJson(type, message as Record<string, unknown>, "") as JsonObject
}

function messageToJson(type: protobuf.Type, message: Record<string, unknown>, path: string): unknown {
  const wellKnown = WELL_KNOWN_TO_JSON[type.fullName]
  if (wellKnown !== undefined) return wellKnown(namesFor(type), message, path)
  const out: JsonObject = {}
  for (const field of planOf(type)) {
    const value = message[field.name]
    if (value === null || value === undefined) continue
    const at = join(path, field.json)
    if (field.map) {
      const entries = Object.entries(value as Record<string, unknown>)
      if (entries.length === 0) continue
      const map: JsonObject = {}
      for (const [key, entry] of entries) map[key] = fieldToJson(field, entry, `${at}.${key}`)
      out[field.json] = map
    } else if (field.repeated) {
      const list = value as unknown[]
      if (list.length === 0) continue
      out[field.json] = list.map((entry, i) => fieldToJson(field, entry, `${at}[${i}]`))
    } else if (field.explicit ? Object.hasOwn(message, field.name) : field.message !== undefined || !isDefault(field, value)) {
      out[field.json] = fieldToJson(field, value, at)
    }
  }
  return out
}

/** A proto3 field without presence is unset at its type's zero value. */
function isDefault(field: FieldPlan, value: unknown): boolean {
  if (field.type === "bytes") return (value as Uint8Array).length === 0
  if (INT64.has(field.type)) return int64ToNumber(value) === 0
  return value === "" || value === 0 || value === false
}

function fieldToJson(field: FieldPlan, value: unknown, path: string): unknown {
  if (field.message) return messageToJson(field.message, value as Record<string, unknown>, path)
  if (field.enumType) return field.enumType.valuesById[value as number] ?? value
  if (field.type === "bytes") return Buffer.from(value as Uint8Array).toString("base64")
  if (INT64.has(field.type)) return int64ToNumber(value)
  return value
}

/** An int64 as protobufjs decodes it (a Long, or a number) as a number: past 2^53 it is rounded, as JSON readers would. */
function int64ToNumber(value: unknown): number {
  return typeof value === "number" ? value : Number((value as { toString(): string }).toString())
}

type ToJson = (names: WellKnownNames, message: Record<string, unknown>, path: string) => unknown

const WELL_KNOWN_TO_JSON: Record<string, ToJson | undefined> = {
  ".google.protobuf.Timestamp": timestampToJson,
  ".google.protobuf.Struct": structToJson,
  ".google.protobuf.Value": valueToJson,
  ".google.protobuf.ListValue": listToJson,
}

/** Timestamp's seconds range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z. */
const MIN_SECONDS = -62_135_596_800
const MAX_SECONDS = 253_402_300_799

/** RFC 3339 in UTC with at least milliseconds (the spec's form), and the finer digits only when there are any. */
function timestampToJson(names: WellKnownNames, message: Record<string, unknown>, path: string): string {
  const seconds = int64ToNumber(message[names.seconds])
  const nanos = Number(message[names.nanos])
  if (!(Number.isInteger(seconds) && seconds >= MIN_SECONDS && seconds <= MAX_SECONDS && Number.isInteger(nanos) && nanos >= 0 && nanos <= 999_999_999)) {
    throw new ProtoJsonError(path, "should be a Timestamp between the years 0001 and 9999")
  }
  const digits = String(nanos).padStart(9, "0").replace(/(?:000){1,2}$/, "")
  return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, `.${digits}Z`)
}

function structToJson(names: WellKnownNames, message: Record<string, unknown>, path: string): JsonObject {
  const out: JsonObject = {}
  const fields = message[names.fields] as Record<string, Record<string, unknown>>
  for (const [key, value] of Object.entries(fields)) out[key] = valueToJson(names, value, `${path}.${key}`)
  return out
}

function valueToJson(names: WellKnownNames, message: Record<string, unknown>, path: string): unknown {
  const [, number, string, bool, struct, list] = names.kinds
  const has = (name: string) => Object.hasOwn(message, name) && message[name] !== null && message[name] !== undefined
  if (has(number)) return message[number]
  if (has(string)) return message[string]
  if (has(bool)) return message[bool]
  if (has(struct)) return structToJson(names, message[struct] as Record<string, unknown>, path)
  if (has(list)) return listToJson(names, message[list] as Record<string, unknown>, path)
  return null // null_value, or no kind set
}

function listToJson(names: WellKnownNames, message: Record<string, unknown>, path: string): unknown[] {
  const values = message[names.values] as Array<Record<string, unknown>>
  return values.map((value, i) => valueToJson(names, value, `${path}[${i}]`))
}

/**
 * The field names of the well-known types as the loaded root has them: protobufjs
 * bundles struct.proto and timestamp.proto with camelCase names (`numberValue`),
 * whatever keepCase says, so they are read by field number.
 */
interface WellKnownNames {
  seconds: string
  nanos: string
  /** Struct's map. */
  fields: string
  /** ListValue's list. */
  values: string
  /** Value's kinds by field number less one: null, number, string, bool, struct, list. */
  kinds: string[]
}

const wellKnownNames = new WeakMap<protobuf.Root, WellKnownNames>()

function namesFor(type: protobuf.Type): WellKnownNames {
  const root = type.root
  let names = wellKnownNames.get(root)
  if (names === undefined) {
    const field = (typeName: string, id: number) => root.lookupType(typeName).fieldsById[id].name
    names = {
      seconds: field(".google.protobuf.Timestamp", 1),
      nanos: field(".google.protobuf.Timestamp", 2),
      fields: field(".google.protobuf.Struct", 1),
      values: field(".google.protobuf.ListValue", 1),
      kinds: [1, 2, 3, 4, 5, 6].map((id) => field(".google.protobuf.Value", id)),
    }
    wellKnownNames.set(root, names)
  }
  return names
}

// ---- ProtoJSON to proto ----

/** ProtoJSON of `type` as a plain object protobufjs encodes (proto field names, enum numbers, bytes as Buffers). Unknown fields are left out. */
export function fromProtoJson(type: protobuf.Type, json: unknown): Record<string, unknown> {
  return messageFromJson(type, json, "", 0) as Record<string, unknown>
}

function messageFromJson(type: protobuf.Type, json: unknown, path: string, level: number): unknown {
  const wellKnown = WELL_KNOWN_FROM_JSON[type.fullName]
  if (wellKnown !== undefined) return wellKnown(namesFor(type), json, path, level)
  if (!isObject(json)) throw new ProtoJsonError(path || "the message", "should be an object")
  const out: Record<string, unknown> = {}
  for (const field of planOf(type)) {
    // ProtoJSON readers take the proto name as well as the JSON name.
    const value = json[field.json] !== undefined ? json[field.json] : json[field.name]
    // null is "unset", except for a Value, where it is JSON's null.
    if (value === undefined || (value === null && field.message?.fullName !== ".google.protobuf.Value")) continue
    const at = join(path, field.json)
    if (field.map) {
      if (!isObject(value)) throw new ProtoJsonError(at, "should be an object")
      const map: Record<string, unknown> = {}
      for (const [key, entry] of Object.entries(value)) map[key] = fieldFromJson(field, entry, `${at}.${key}`, level)
      out[field.name] = map
    } else if (field.repeated) {
      if (!Array.isArray(value)) throw new ProtoJsonError(at, "should be an array")
      out[field.name] = value.map((entry, i) => fieldFromJson(field, entry, `${at}[${i}]`, level))
    } else {
      out[field.name] = fieldFromJson(field, value, at, level)
    }
  }
  return out
}

function fieldFromJson(field: FieldPlan, value: unknown, path: string, level: number): unknown {
  if (field.message) return messageFromJson(field.message, value, path, level + 1)
  if (field.enumType) {
    if (typeof value === "number" && Number.isInteger(value)) return value
    const number = typeof value === "string" ? field.enumType.values[value] : undefined
    if (number === undefined) throw new ProtoJsonError(path, `should be one of ${Object.keys(field.enumType.values).join(", ")}`)
    return number
  }
  switch (field.type) {
    case "string":
      if (typeof value !== "string") throw new ProtoJsonError(path, "should be a string")
      return value
    case "bool":
      if (typeof value !== "boolean") throw new ProtoJsonError(path, "should be true or false")
      return value
    case "bytes":
      if (typeof value !== "string" || !BASE64.test(value)) throw new ProtoJsonError(path, "should be base64 text")
      return Buffer.from(value, "base64")
  }
  const number = typeof value === "string" && value.trim() !== "" ? Number(value) : value
  if (INTEGER.has(field.type) && !Number.isInteger(number)) throw new ProtoJsonError(path, "should be a whole number")
  // ProtoJSON writes NaN as the string "NaN": any other text that is no number is refused.
  if (FLOAT.has(field.type) && (typeof number !== "number" || (Number.isNaN(number) && value !== "NaN"))) throw new ProtoJsonError(path, "should be a number")
  return number
}

type FromJson = (names: WellKnownNames, json: unknown, path: string, level: number) => unknown

const WELL_KNOWN_FROM_JSON: Record<string, FromJson | undefined> = {
  ".google.protobuf.Timestamp": (names, json, path) => timestampFromJson(names, json, path),
  ".google.protobuf.Struct": structFromJson,
  ".google.protobuf.Value": valueFromJson,
  ".google.protobuf.ListValue": listFromJson,
}

const FRACTION = /\.(\d+)(?=[Zz+-])/

/** An RFC 3339 date-time as Timestamp's seconds and nanos, every fraction digit kept (up to nanoseconds). */
function timestampFromJson(names: WellKnownNames, json: unknown, path: string): Record<string, number> {
  const iso = typeof json === "string" ? normalizeTimestamp(json.replace(FRACTION, "")) : undefined
  if (iso === undefined) throw new ProtoJsonError(path, "should be an RFC 3339 date-time such as 2026-01-31T12:00:00.000Z")
  const digits = FRACTION.exec(json as string)?.[1] ?? ""
  return { [names.seconds]: Date.parse(iso) / 1000, [names.nanos]: Number(digits.slice(0, 9).padEnd(9, "0")) }
}

function structFromJson(names: WellKnownNames, json: unknown, path: string, level: number): Record<string, unknown> {
  if (!isObject(json)) throw new ProtoJsonError(path, "should be an object")
  const fields: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(json)) {
    if (value !== undefined) fields[key] = valueFromJson(names, value, `${path}.${key}`, level + 1)
  }
  return { [names.fields]: fields }
}

function valueFromJson(names: WellKnownNames, json: unknown, path: string, level: number): Record<string, unknown> {
  if (level > MAX_LEVELS) throw new ProtoJsonError(path, `nests deeper than protobuf's ${MAX_LEVELS} message levels (about ${MAX_LEVELS / 2} levels of JSON)`)
  const [nullValue, number, string, bool, struct, list] = names.kinds
  if (json === null) return { [nullValue]: 0 }
  switch (typeof json) {
    case "number":
      return { [number]: json }
    case "string":
      return { [string]: json }
    case "boolean":
      return { [bool]: json }
  }
  if (Array.isArray(json)) return { [list]: listFromJson(names, json, path, level + 1) }
  return { [struct]: structFromJson(names, json, path, level + 1) }
}

function listFromJson(names: WellKnownNames, json: unknown, path: string, level: number): Record<string, unknown> {
  if (!Array.isArray(json)) throw new ProtoJsonError(path, "should be an array")
  return { [names.values]: json.map((value, i) => valueFromJson(names, value, `${path}[${i}]`, level + 1)) }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value)
}
