import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { serve, type ServedAgent } from "../../plugins/serve.js"
import { CLI_BIN, readSse, ROOT, sseMessages, waitFor } from "../fixtures/helpers.js"

/**
 * Hostile input at the route: whatever arrives, the peer gets a JSON-RPC
 * error (HTTP 200), a JSON-RPC answer, or a 4xx with a message; never a
 * 5xx, a hang or a crash. A seeded fuzz of malformed bodies first, then the
 * named cases one by one.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type JsonObject = { [key: string]: Json }
type Path = Array<string | number>
type HeaderMap = Record<string, string>

/** What came back, from app.inject or from a real socket. */
interface Answer {
  status: number
  contentType: string
  body: string
}

const JSON_TYPE: HeaderMap = { "content-type": "application/json" }
const V1: HeaderMap = { ...JSON_TYPE, "a2a-version": "1.0" }
/** Generous: the suite runs on loaded 2-core machines; a hang is what this catches, not slowness. */
const ANSWER_WITHIN_MS = 15_000
const MIB = 1024 * 1024

const unhandled: unknown[] = []
const countUnhandled = (reason: unknown) => void unhandled.push(reason)
process.on("unhandledRejection", countUnhandled)
t.teardown(() => void process.off("unhandledRejection", countUnhandled))

async function startAgent(t: Test, bodyLimit?: number): Promise<ServedAgent> {
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "ok"), logger: false, a2a: { bodyLimit } })
  t.teardown(() => srv.stop())
  return srv
}

async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ANSWER_WITHIN_MS} ms: ${what}`)), ANSWER_WITHIN_MS)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** Posts through app.inject: the whole route, without a socket. A stream's answer is its full text once it ends. */
async function inject(srv: ServedAgent, body: string | Buffer, headers: HeaderMap = JSON_TYPE): Promise<Answer> {
  const res = await within(srv.app.inject({ method: "POST", url: "/", headers, payload: body }), "inject")
  return { status: res.statusCode, contentType: String(res.headers["content-type"] ?? ""), body: res.body }
}

/** Posts over the real socket; a stream is read to its end. Bytes, so fetch adds no content type of its own. */
async function overSocket(srv: ServedAgent, body: string | Buffer, headers: HeaderMap = JSON_TYPE): Promise<Answer> {
  const signal = AbortSignal.timeout(ANSWER_WITHIN_MS)
  const res = await fetch(srv.url + "/", { method: "POST", headers, body: new Uint8Array(Buffer.from(body)), signal })
  return { status: res.status, contentType: res.headers.get("content-type") ?? "", body: await res.text() }
}

const request = (method: string, params: JsonObject, id: Json = 1): JsonObject => ({ jsonrpc: "2.0", id, method, params })
const text = (value: JsonObject) => JSON.stringify(value)

function parsed(body: string): unknown {
  try {
    return JSON.parse(body)
  } catch {
    return undefined
  }
}

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === "object" && !Array.isArray(value)

/** The JSON-RPC error object of a plain JSON answer, or undefined. */
function rpcError(answer: Answer): { code: number; message: string; data?: unknown } | undefined {
  const message = parsed(answer.body)
  return isObject(message) && isObject(message.error) ? (message.error as { code: number; message: string }) : undefined
}

function rpcResult(answer: Answer): Record<string, unknown> | undefined {
  const message = parsed(answer.body)
  return isObject(message) && isObject(message.result) ? message.result : undefined
}

/** What is wrong with one JSON-RPC response, if anything. */
function responseProblem(message: unknown): string | undefined {
  if (!isObject(message) || message.jsonrpc !== "2.0") return "not a JSON-RPC 2.0 response object"
  if (!("id" in message)) return "a response without an id"
  if ("error" in message) {
    const error = message.error
    if (!isObject(error)) return "an error that is not an object"
    if (typeof error.code !== "number" || !Number.isInteger(error.code) || error.code > -32000 || error.code < -32768) {
      return `error code ${JSON.stringify(error.code)} outside the JSON-RPC range -32768..-32000`
    }
    if (typeof error.message !== "string" || error.message === "") return "an error without a message"
    return undefined
  }
  return message.result === undefined ? "neither a result nor an error" : undefined
}

/** A request object without an id: JSON-RPC answers it with nothing (HTTP 204). */
function isNotification(body: string | Buffer): boolean {
  const value = parsed(body.toString())
  return isObject(value) && !("id" in value)
}

/** The one rule every answer keeps: a JSON-RPC answer over HTTP 200, a 204 for a notification, or a 4xx with a message. */
function answerProblem(answer: Answer, sent: string | Buffer): string | undefined {
  const { status, contentType, body } = answer
  if (status >= 500) return `HTTP ${status}: ${body.slice(0, 200)}`
  if (status >= 400 && status < 500) {
    const error = rpcError(answer)
    return typeof error?.message === "string" && error.message !== "" ? undefined : `HTTP ${status} without a JSON error message: ${body.slice(0, 200)}`
  }
  if (status === 204) return body === "" && isNotification(sent) ? undefined : "HTTP 204 for a request that is not a notification"
  if (status !== 200) return `HTTP ${status}`
  if (contentType.startsWith("text/event-stream")) {
    const events = body.split("\n\n").filter((chunk) => chunk !== "")
    if (events.length === 0) return "an empty event stream"
    for (const event of events) {
      const data = event.replace(/^id: \d+\n/, "")
      if (!data.startsWith("data: ")) return `an event that is not data: ${event.slice(0, 100)}`
      const problem = responseProblem(parsed(data.slice("data: ".length)))
      if (problem) return `stream event: ${problem}`
    }
    return undefined
  }
  if (!contentType.startsWith("application/json")) return `HTTP 200 with content type ${JSON.stringify(contentType)}`
  return responseProblem(parsed(body))
}

/** Which layer answered, so the fuzz can show it reached each of them. */
function outcomeOf(answer: Answer): string {
  if (answer.status !== 200) return `HTTP ${answer.status}`
  if (answer.contentType.startsWith("text/event-stream")) return "stream"
  const error = rpcError(answer)
  return error ? String(error.code) : "result"
}

// ---------------------------------------------------------------------------
// The fuzz: seeded, so a failure names a case that fails again on every run.

/** mulberry32: a small seeded PRNG. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let x = state
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

class Dice {
  private readonly next: () => number
  constructor(seed: number) {
    this.next = mulberry32(seed)
  }
  fraction(): number {
    return this.next()
  }
  int(below: number): number {
    return Math.floor(this.next() * below)
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  /** Log-uniform, so small and huge sizes both come up. */
  size(min: number, max: number): number {
    return Math.round(min * Math.pow(max / min, this.next()))
  }
}

/** A task the valid requests point at: completed, so GetTask finds it and cancel or subscribe refuse. */
interface Known {
  taskId: string
  contextId: string
}

/** Valid requests of every method, as 0.3 (no header) and 1.0 peers send them. */
function validRequests(known: Known): Array<{ headers: HeaderMap; request: JsonObject }> {
  const message03: JsonObject = {
    kind: "message",
    messageId: "m-03",
    role: "user",
    parts: [
      { kind: "text", text: "hello", metadata: { n: 1 } },
      { kind: "data", data: { a: [1, 2] } },
      { kind: "file", file: { name: "a.txt", mimeType: "text/plain", bytes: "aGk=" } },
    ],
    metadata: { trace: "t" },
  }
  const message10: JsonObject = {
    messageId: "m-10",
    role: "ROLE_USER",
    parts: [{ text: "hello" }, { data: { a: 1 } }, { url: "https://example.test/a.txt", mediaType: "text/plain", filename: "a.txt" }, { raw: "aGk=" }],
    metadata: {},
  }
  const taskId = { id: known.taskId, historyLength: 1 }
  const list03 = { contextId: known.contextId, status: "completed", pageSize: 5, historyLength: 0, statusTimestampAfter: "2020-01-01T00:00:00Z", includeArtifacts: true }
  const list10 = { ...list03, status: "TASK_STATE_COMPLETED" }
  const v03: JsonObject[] = [
    request("message/send", { message: message03, configuration: { blocking: true, historyLength: 5, acceptedOutputModes: ["text/plain"] }, metadata: {} }),
    request("SendMessage", { message: message03 }, "send-1"),
    request("message/send", { message: { ...message03, taskId: known.taskId, contextId: known.contextId } }),
    request("message/stream", { message: message03 }),
    request("SendStreamingMessage", { message: message03 }, 0),
    request("tasks/get", taskId),
    request("GetTask", taskId, "get-1"),
    request("tasks/list", list03),
    request("ListTasks", {}),
    request("tasks/get", { id: "no-such-task" }),
    request("tasks/cancel", { id: known.taskId }),
    request("CancelTask", { id: known.taskId }),
    request("tasks/resubscribe", { id: known.taskId }),
    request("SubscribeToTask", { id: known.taskId }),
    request("tasks/pushNotificationConfig/set", { taskId: known.taskId, pushNotificationConfig: { url: "https://example.test/hook" } }),
    request("agent/getAuthenticatedExtendedCard", {}),
  ]
  const v10: JsonObject[] = [
    request("SendMessage", { message: message10, configuration: { returnImmediately: false, historyLength: 5, acceptedOutputModes: ["text/plain"] } }),
    request("message/send", { message: message10, configuration: { returnImmediately: true } }, "send-10"),
    request("SendStreamingMessage", { message: message10 }),
    request("GetTask", taskId),
    request("ListTasks", list10),
    request("CancelTask", { id: known.taskId }),
    request("CancelTask", { id: "no-such-task" }),
    request("SubscribeToTask", { id: known.taskId }, 7),
    request("GetExtendedAgentCard", {}),
  ]
  return [...v03.map((request) => ({ headers: JSON_TYPE, request })), ...v10.map((request) => ({ headers: V1, request }))]
}

/** A body being made hostile: JSON edits first, then raw-text edits that JSON.stringify cannot express. */
class Draft {
  /** Placeholder JSON text (a quoted marker) → the raw text that replaces it. */
  private readonly raw = new Map<string, string>()
  private readonly textEdits: Array<(body: string) => string> = []
  bytesEdit?: (body: Buffer) => Buffer
  readonly labels: string[] = []

  constructor(
    public value: Json,
    public headers: HeaderMap,
  ) {}

  /** A marker string that becomes `rawText` in the serialized body. */
  marker(rawText: string): string {
    const marker = `\u0001raw-${this.raw.size}\u0001`
    this.raw.set(JSON.stringify(marker), rawText)
    return marker
  }

  /** A marker key whose `"marker":null` member becomes `rawMember` in the serialized body. */
  memberMarker(rawMember: string): string {
    const marker = `\u0001member-${this.raw.size}\u0001`
    this.raw.set(`${JSON.stringify(marker)}:null`, rawMember)
    return marker
  }

  editText(edit: (body: string) => string): void {
    this.textEdits.push(edit)
  }

  body(): string | Buffer {
    let body = JSON.stringify(this.value) ?? ""
    for (const [placeholder, rawText] of this.raw) body = body.split(placeholder).join(rawText)
    for (const edit of this.textEdits) body = edit(body)
    return this.bytesEdit ? this.bytesEdit(Buffer.from(body)) : body
  }
}

function pathsOf(value: Json, at: Path = []): Path[] {
  if (value === null || typeof value !== "object") return []
  const entries: Array<[string | number, Json]> = Array.isArray(value) ? value.map((item, i) => [i, item]) : Object.entries(value)
  return entries.flatMap(([key, child]) => [[...at, key], ...pathsOf(child, [...at, key])])
}

function objectPathsOf(value: Json): Path[] {
  return [[], ...pathsOf(value)].filter((path) => isObject(valueAt(value, path)))
}

function valueAt(root: Json, path: Path): Json | undefined {
  let node: Json | undefined = root
  for (const key of path) {
    if (node === null || typeof node !== "object") return undefined
    node = (node as Record<string | number, Json>)[key]
  }
  return node
}

function setAt(root: Json, path: Path, value: Json | undefined): Json {
  if (path.length === 0) return value ?? null
  const parent = valueAt(root, path.slice(0, -1))
  if (parent === null || typeof parent !== "object") return root
  const key = path[path.length - 1]
  const container = parent as Record<string | number, Json>
  if (value !== undefined) container[key] = value
  else if (Array.isArray(parent) && typeof key === "number") parent.splice(key, 1)
  else delete container[key]
  return root
}

const show = (path: Path) => (path.length === 0 ? "the body" : path.join("."))

/** Values of every other type, and the strings that fool lax code. */
function hostileValue(dice: Dice): Json {
  return dice.pick<() => Json>([
    () => null,
    () => 0,
    () => -1,
    () => -0.5,
    () => 1e308,
    () => Number.MAX_SAFE_INTEGER + 2,
    () => true,
    () => false,
    () => "",
    () => dice.pick(["NaN", "Infinity", "-Infinity", "-1", "null", "undefined", "true", "0x1F", "1e999", "[object Object]"]),
    () => dice.pick(["constructor", "__proto__", "prototype", "toString", "hasOwnProperty"]),
    () => dice.pick(["\u0000", "\ud800", "😀".repeat(50), "../../etc/passwd", "<script>alert(1)</script>", "TASK_STATE_COMPLETED", "ROLE_AGENT", "2.0"]),
    () => "x".repeat(dice.size(1000, 200_000)),
    () => [],
    () => [null],
    () => ["SendMessage", 1, {}],
    () => ({}),
    () => ({ length: -1, toString: "x", valueOf: 1 }),
    () => ({ kind: "text" }),
  ])()
}

/** Raw literals JSON.stringify never writes: some are still JSON (1e999, -0), most are not. */
const RAW_LITERALS = ["NaN", "Infinity", "-Infinity", "undefined", "1e999", "-0", "01", ".5", "'x'", '"unterminated', "0x10", "tru", "[,]", "{,}", "1_000"]

/** Keys that pollute a prototype in naive merges; JSON.stringify drops __proto__, so they go in as raw text. */
const POLLUTING_KEYS = [
  '"__proto__":{"polluted":true}',
  '"__proto__":{"toString":"polluted"}',
  '"__proto\\u005f_":{"polluted":true}',
  '"constructor":{"prototype":{"polluted":true}}',
  '"constructor":{"polluted":true}',
  '"prototype":{"polluted":true}',
]

const HOSTILE_METHODS = [
  "constructor",
  "__proto__",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "isPrototypeOf",
  "propertyIsEnumerable",
  "__defineGetter__",
  "__lookupSetter__",
  "prototype",
  "",
  " ",
  "sendmessage",
  "SendMessage ",
  "message/send\u0000",
  "tasks/",
  "../SendMessage",
  "😀",
]

const HOSTILE_VERSIONS = ["2.0", "0.2", "1", "1.0.0.0", "latest", "  1.0  ", "1.0, 0.3", "v1.0", "x".repeat(4000)]

const CONTENT_TYPES = [
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/xml",
  "application/jsonx",
  "application/json; charset=utf-16",
  "application/a2a+json",
  "application/json-rpc",
  "APPLICATION/JSON",
  "*/*",
  "",
]

function deepText(dice: Dice, depth: number): string {
  switch (dice.int(3)) {
    case 0:
      return "[".repeat(depth) + "]".repeat(depth)
    case 1:
      return '{"a":'.repeat(depth) + "0" + "}".repeat(depth)
    default:
      return '[{"a":'.repeat(depth) + "null" + "}]".repeat(depth)
  }
}

/** One JSON-level mutation; several may pile up on a draft. */
function mutateValue(draft: Draft, dice: Dice): void {
  const paths = pathsOf(draft.value)
  const anyPath = () => (paths.length > 0 ? dice.pick(paths) : [])
  switch (dice.int(9)) {
    case 0:
    case 1:
    case 2: {
      const path = anyPath()
      const value = hostileValue(dice)
      draft.value = setAt(draft.value, path, value)
      draft.labels.push(`${show(path)} = ${JSON.stringify(value).slice(0, 40)}`)
      break
    }
    case 3: {
      const path = anyPath()
      draft.value = setAt(draft.value, path, undefined)
      draft.labels.push(`delete ${show(path)}`)
      break
    }
    case 4: {
      const path = anyPath()
      const literal = dice.pick(RAW_LITERALS)
      draft.value = setAt(draft.value, path, draft.marker(literal))
      draft.labels.push(`${show(path)} = raw ${literal}`)
      break
    }
    case 5: {
      const objects = objectPathsOf(draft.value)
      if (objects.length === 0) break
      const path = dice.pick(objects)
      const target = valueAt(draft.value, path)
      const key = dice.pick(POLLUTING_KEYS)
      if (isObject(target)) {
        target[draft.memberMarker(key)] = null
        draft.labels.push(`add ${key} at ${show(path)}`)
      }
      break
    }
    case 6: {
      const depth = dice.size(10, 20_000)
      const deep = draft.marker(deepText(dice, depth))
      // Half land in a metadata object the schema accepts as any object, so they reach the store.
      const path: Path = dice.chance(0.5)
        ? dice.pick<Path>([["params", "metadata"], ["params", "message", "metadata"], ["params", "message", "parts", 0, "metadata"]])
        : anyPath()
      const parent = valueAt(draft.value, path.slice(0, -1))
      if (parent === null || typeof parent !== "object") break
      draft.value = setAt(draft.value, path, path[path.length - 1] === "metadata" ? { deep } : deep)
      draft.labels.push(`${show(path)} nested ${depth} deep`)
      break
    }
    case 7: {
      const hugeId = "i".repeat(100_000)
      const where = dice.pick(["id", "params.id", "raw"])
      if (where === "id") draft.value = setAt(draft.value, ["id"], hugeId)
      else if (where === "params.id") draft.value = setAt(draft.value, ["params", "id"], hugeId)
      else draft.value = setAt(draft.value, ["id"], draft.marker(dice.pick(["1e999", "123456789012345678901234567890", "-0", "1.5e-320"])))
      draft.labels.push(`huge id at ${where}`)
      break
    }
    default: {
      const method = dice.chance(0.1) ? "m".repeat(100_000) : dice.pick(HOSTILE_METHODS)
      draft.value = setAt(draft.value, ["method"], method)
      draft.labels.push(`method ${JSON.stringify(method).slice(0, 40)}`)
    }
  }
}

/** One raw-text or transport mutation: truncation, stray bytes, batches, headers, size. */
function mutateText(draft: Draft, dice: Dice): void {
  switch (dice.int(9)) {
    case 0:
    case 1: {
      const cut = dice.chance(0.5) ? dice.int(40) : -1 - dice.int(60)
      draft.editText((body) => (cut >= 0 ? body.slice(0, cut) : body.slice(0, Math.max(0, body.length + cut))))
      draft.labels.push(`truncated at ${cut}`)
      break
    }
    case 2: {
      const count = 1 + dice.int(8)
      const edits = Array.from({ length: count }, () => ({ at: dice.fraction(), byte: dice.int(256), overwrite: dice.chance(0.5) }))
      draft.bytesEdit = (bytes) => {
        let out = Buffer.from(bytes)
        for (const { at, byte, overwrite } of edits) {
          const i = Math.floor(at * out.length)
          if (overwrite && i < out.length) out[i] = byte
          else out = Buffer.concat([out.subarray(0, i), Buffer.from([byte]), out.subarray(i)])
        }
        return out
      }
      draft.labels.push(`${count} random bytes`)
      break
    }
    case 3: {
      const shape = dice.pick(["[]", "[one]", "[one,one]", "up to 1000 of one", "[[one]]", "[1,null,\"x\"]"])
      draft.editText((body) => {
        if (shape === "[]" || shape === '[1,null,"x"]') return shape
        // Up to 1000 copies, kept near the body limit so a padded body cannot blow up the test itself.
        if (shape === "up to 1000 of one") return `[${Array.from({ length: Math.max(2, Math.min(1000, Math.floor(1_500_000 / (body.length + 1)))) }, () => body).join(",")}]`
        return shape.replace(/one/g, body)
      })
      draft.labels.push(`batch ${shape}`)
      break
    }
    case 4: {
      const version = dice.pick(HOSTILE_VERSIONS)
      draft.headers = { ...draft.headers, "a2a-version": version }
      draft.labels.push(`a2a-version ${JSON.stringify(version).slice(0, 20)}`)
      break
    }
    case 5: {
      const type = dice.pick(CONTENT_TYPES)
      const { "content-type": _dropped, ...rest } = draft.headers
      draft.headers = dice.chance(0.2) ? rest : { ...rest, "content-type": type }
      draft.labels.push(draft.headers["content-type"] === undefined ? "no content type" : `content type ${JSON.stringify(type)}`)
      break
    }
    case 6: {
      const size = dice.chance(0.5) ? 2 * MIB : dice.size(100_000, 900_000)
      draft.value = setAt(draft.value, ["params", "metadata"], { pad: "p".repeat(size) })
      draft.labels.push(`padded by ${size} bytes`)
      break
    }
    case 7: {
      const root = dice.pick(["null", "42", '"string"', "true", "{}", "-0", "1e999", '""', " ", "\n"])
      draft.editText(() => root)
      draft.labels.push(`body ${JSON.stringify(root)}`)
      break
    }
    default: {
      const key = dice.pick(["method", "id", "jsonrpc", "params"])
      const dup = dice.pick(['"constructor"', "null", '"1.0"', "{}", '"GetTask"'])
      // Duplicate keys: JSON.parse keeps the last one.
      draft.editText((body) => body.replace(/}\s*$/, `,"${key}":${dup}}`))
      draft.labels.push(`duplicate ${key}: ${dup}`)
    }
  }
}

interface HostileCase {
  name: string
  body: string | Buffer
  headers: HeaderMap
}

function hostileCases(known: Known, count: number, seed: number): HostileCase[] {
  const dice = new Dice(seed)
  const valid = validRequests(known)
  return Array.from({ length: count }, (_unused, i) => {
    const base = dice.pick(valid)
    const draft = new Draft(structuredClone(base.request), { ...base.headers })
    const mutations = 1 + (dice.chance(0.25) ? dice.int(3) : 0)
    for (let m = 0; m < mutations; m++) {
      if (dice.chance(0.6)) mutateValue(draft, dice)
      else mutateText(draft, dice)
    }
    const method = isObject(base.request) && typeof base.request.method === "string" ? base.request.method : "?"
    const version = base.headers["a2a-version"] ?? "0.3"
    return { name: `#${i} ${method} (${version}): ${draft.labels.join("; ") || "unchanged"}`, body: draft.body(), headers: draft.headers }
  })
}

// ---------------------------------------------------------------------------

const FUZZ_CASES = 400
const FUZZ_SEED = 0x70017e55
/** Every this-many cases also goes over the real socket. */
const SOCKET_EVERY = 25

const sendBlocking = (text: string) => request("SendMessage", { message: { messageId: randomUUID(), role: "user", parts: [{ kind: "text", text }] }, configuration: { blocking: true } })

async function completedTask(t: Test, srv: ServedAgent): Promise<Known> {
  const task = rpcResult(await inject(srv, JSON.stringify(sendBlocking("known"))))
  t.equal(task?.status && (task.status as { state: string }).state, "completed", "the known task completed")
  return { taskId: String(task?.id), contextId: String(task?.contextId) }
}

/** The server still works: a blocking SendMessage completes, over inject and over the socket, and ListTasks answers. */
async function assertAlive(t: Test, srv: ServedAgent, known: Known): Promise<void> {
  for (const answer of [await inject(srv, text(sendBlocking("still there?"))), await overSocket(srv, text(sendBlocking("still there?")))]) {
    const task = rpcResult(answer)
    t.match(task, { kind: "task", status: { state: "completed" }, artifacts: [{ parts: [{ kind: "text", text: "ok" }] }] }, "a valid blocking SendMessage completes")
  }
  const listed = await inject(srv, text(request("ListTasks", { pageSize: 100 })))
  t.same(rpcError(listed), undefined, "ListTasks answers with a result")
  t.ok(Array.isArray(rpcResult(listed)?.tasks), "ListTasks lists tasks")
  const got = await inject(srv, text(request("GetTask", { id: known.taskId })), V1)
  t.match(rpcResult(got), { id: known.taskId, status: { state: "TASK_STATE_COMPLETED" } }, "GetTask reads a task from before")
}

/** Object.prototype.toString as it was before any hostile body arrived. */
const ORIGINAL_TO_STRING: unknown = Object.getOwnPropertyDescriptor(Object.prototype, "toString")?.value

function assertNotPolluted(t: Test): void {
  t.equal(({} as Record<string, unknown>).polluted, undefined, "Object.prototype has no polluted")
  t.notOk(Object.hasOwn(Object.prototype, "polluted"), "Object.prototype has no own polluted key")
  t.equal(Object.getOwnPropertyDescriptor(Object.prototype, "toString")?.value, ORIGINAL_TO_STRING, "Object.prototype.toString is untouched")
  t.equal(([] as unknown as Record<string, unknown>).polluted, undefined, "Array.prototype has no polluted")
}

t.test(`a seeded fuzz of ${FUZZ_CASES} malformed bodies: each gets a JSON-RPC answer or a 4xx, never a 5xx or a hang`, async (t) => {
  const srv = await startAgent(t)
  const known = await completedTask(t, srv)
  const cases = hostileCases(known, FUZZ_CASES, FUZZ_SEED)
  const problems: string[] = []
  const outcomes = new Map<string, number>()
  for (const [i, hostile] of cases.entries()) {
    const routes: Array<["inject" | "socket", () => Promise<Answer>]> = [["inject", () => inject(srv, hostile.body, hostile.headers)]]
    if (i % SOCKET_EVERY === 0) routes.push(["socket", () => overSocket(srv, hostile.body, hostile.headers)])
    for (const [route, send] of routes) {
      let answer: Answer
      try {
        answer = await send()
      } catch (err) {
        problems.push(`${hostile.name} [${route}]: ${(err as Error).message}`)
        continue
      }
      const problem = answerProblem(answer, hostile.body)
      if (problem) problems.push(`${hostile.name} [${route}]: ${problem}`)
      const outcome = outcomeOf(answer)
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
    }
  }
  t.same(problems, [], "every hostile body got a JSON-RPC answer over HTTP 200, a 204 for a notification, or a 4xx with a message")
  // The fuzz is only worth something if it reaches every layer: parser, envelope, method table, params, store, streams, limits.
  for (const outcome of ["-32700", "-32600", "-32601", "-32602", "-32001", "-32009", "result", "stream", "HTTP 413", "HTTP 415"]) {
    t.ok(outcomes.has(outcome), `the fuzz reached an answer of ${outcome}`)
  }
  t.comment(`fuzz outcomes: ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`)
  await assertAlive(t, srv, known)
  assertNotPolluted(t)
  t.same(unhandled, [], "no unhandled rejection")
})

t.test("bodies that are not JSON are parse errors (-32700) over HTTP 200", async (t) => {
  const srv = await startAgent(t)
  const notJson: Array<[string, string | Buffer]> = [
    ["invalid JSON", "{nope"],
    ["truncated JSON", '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":'],
    ["a cut-off string", '{"jsonrpc":"2.0","id":1,"method":"GetT'],
    ["trailing garbage", '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a"}} trailing'],
    ["single quotes", "{'jsonrpc':'2.0'}"],
    ["NaN", '{"jsonrpc":"2.0","id":NaN,"method":"GetTask"}'],
    ["invalid UTF-8 bytes", Buffer.from([0xff, 0xfe, 0x00, 0x7b])],
  ]
  for (const [what, body] of notJson) {
    const answer = await inject(srv, body)
    t.equal(answer.status, 200, `${what}: HTTP 200`)
    t.match(parsed(answer.body), { jsonrpc: "2.0", id: null, error: { code: -32700, message: /not valid JSON/ } }, `${what}: -32700`)
  }
  const empty = await inject(srv, "")
  t.equal(empty.status, 200, "an empty body: HTTP 200")
  t.match(parsed(empty.body), { jsonrpc: "2.0", id: null, error: { code: -32700, message: /body is empty/ } }, "an empty body: -32700")
  const overSocketAnswer = await overSocket(srv, "{nope")
  t.match(parsed(overSocketAnswer.body), { error: { code: -32700 } }, "invalid JSON over the socket: -32700")
})

t.test("JSON that is not one request object is an invalid request (-32600)", async (t) => {
  const srv = await startAgent(t)
  const valid = text(request("GetTask", { id: "x" }))
  const notARequest: Array<[string, string]> = [
    ["null", "null"],
    ["a string", '"string"'],
    ["a number", "42"],
    ["a boolean", "true"],
    ["an empty object", "{}"],
    ["jsonrpc 1.0", text({ ...request("GetTask", { id: "x" }), jsonrpc: "1.0" })],
    ["params as an array", text({ ...request("GetTask", {}), params: ["x"] })],
    ["params as null", text({ ...request("GetTask", {}), params: null })],
    ["an object id", text({ ...request("GetTask", { id: "x" }), id: { a: 1 } })],
    ["an empty method", text(request("", {}))],
    ["a numeric method", text({ ...request("GetTask", {}), method: 7 })],
  ]
  for (const [what, body] of notARequest) {
    const answer = await inject(srv, body)
    t.equal(answer.status, 200, `${what}: HTTP 200`)
    t.match(parsed(answer.body), { jsonrpc: "2.0", error: { code: -32600, message: /^Invalid request: / } }, `${what}: -32600`)
  }
  // JSON-RPC 2.0 allows batches; this server refuses them whole, with one error, whatever their size.
  const batches: Array<[string, string]> = [
    ["an empty batch []", "[]"],
    ["a batch of one", `[${valid}]`],
    ["a batch of two", `[${valid},${valid}]`],
    ["a batch of 2000", `[${Array.from({ length: 2000 }, () => valid).join(",")}]`],
    ["a batch of junk", '[1,null,"x"]'],
    ["a nested batch", `[[${valid}]]`],
  ]
  for (const [what, body] of batches) {
    const answer = await inject(srv, body)
    t.equal(answer.status, 200, `${what}: HTTP 200`)
    t.match(parsed(answer.body), { jsonrpc: "2.0", id: null, error: { code: -32600, message: /batches are not supported/ } }, `${what}: one -32600`)
  }
})

t.test("method names from Object.prototype are unknown methods (-32601)", async (t) => {
  const srv = await startAgent(t)
  const names = ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf", "isPrototypeOf", "propertyIsEnumerable", "toLocaleString", "__defineGetter__"]
  for (const name of names) {
    for (const headers of [JSON_TYPE, V1]) {
      const answer = await inject(srv, text(request(name, { id: "x" }, name)), headers)
      t.equal(answer.status, 200, `${name}: HTTP 200`)
      t.match(parsed(answer.body), { jsonrpc: "2.0", id: name, error: { code: -32601, message: new RegExp(`^Method not found: ${name}\\.`) } }, `${name}: -32601`)
    }
  }
  const long = await inject(srv, text(request("m".repeat(100_000), {})))
  t.equal(rpcError(long)?.code, -32601, "a 100 kB method name: -32601")
  t.ok((rpcError(long)?.message.length ?? Infinity) < 2000, "the answer does not echo the whole method name")
})

t.test("prototype-pollution keys are refused and pollute nothing", async (t) => {
  const srv = await startAgent(t)
  const send = '{"role":"user","parts":[{"kind":"text","text":"hi"}]'
  const poisoned: Array<[string, string]> = [
    ["__proto__ in params", '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","__proto__":{"polluted":true}}}'],
    ["__proto__ in a message", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":${send},"__proto__":{"polluted":true}}}}`],
    ["__proto__ in metadata", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":${send},"metadata":{"__proto__":{"polluted":true}}}}}`],
    ["__proto__ at the top", '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a"},"__proto__":{"polluted":true}}'],
    ["an escaped __proto__", '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","__proto\\u005f_":{"polluted":true}}}'],
    ["constructor.prototype in params", '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","constructor":{"prototype":{"polluted":true}}}}'],
    ["constructor.prototype in a part", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"user","parts":[{"kind":"data","data":{"constructor":{"prototype":{"polluted":true}}}}]}}}`],
  ]
  for (const [what, body] of poisoned) {
    const answer = await inject(srv, body)
    t.equal(answer.status, 200, `${what}: HTTP 200`)
    t.match(parsed(answer.body), { jsonrpc: "2.0", error: { code: -32700, message: /__proto__ or constructor/ } }, `${what}: refused with -32700`)
    assertNotPolluted(t)
  }
  // Keys that are harmless as own properties may pass, but still pollute nothing.
  const harmless: Array<[string, string]> = [
    ["a plain constructor key", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":${send},"metadata":{"constructor":{"polluted":true}}},"configuration":{"blocking":true}}}`],
    ["a prototype key", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":${send},"metadata":{"prototype":{"polluted":true}}},"configuration":{"blocking":true}}}`],
  ]
  for (const [what, body] of harmless) {
    const answer = await inject(srv, body)
    t.equal(answerProblem(answer, body), undefined, `${what}: a JSON-RPC answer`)
    assertNotPolluted(t)
  }
})

t.test("deeply nested values get an answer, never a 5xx, a hang or a crash", async (t) => {
  const srv = await startAgent(t)
  const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth)
  const nestedObject = (depth: number) => '{"a":'.repeat(depth) + "0" + "}".repeat(depth)
  const cases: Array<[string, string]> = [
    ["a 20k-deep array in params.metadata", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hi"}]},"metadata":{"deep":${nested(20_000)}},"configuration":{"blocking":true}}}`],
    ["a 20k-deep array in message.metadata", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"deep":${nested(20_000)}}},"configuration":{"blocking":true}}}`],
    ["a 20k-deep object in a data part", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"data":${nestedObject(20_000)}}]}}}`],
    ["a 20k-deep stream request", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-1","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"deep":${nested(20_000)}}}}}`],
    ["a 20k-deep GetTask id", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":${nested(20_000)}}}`],
    ["a 20k-deep envelope id", `{"jsonrpc":"2.0","id":${nested(20_000)},"method":"GetTask","params":{"id":"a"}}`],
    ["a 200k-deep body", nested(200_000)],
  ]
  for (const [what, body] of cases) {
    const answer = await inject(srv, body)
    t.ok(answer.status < 500, `${what}: no 5xx (HTTP ${answer.status})`)
    t.equal(answerProblem(answer, body), undefined, `${what}: a JSON-RPC answer`)
  }
  const socketAnswer = await overSocket(srv, cases[0][1])
  t.equal(answerProblem(socketAnswer, cases[0][1]), undefined, "a 20k-deep body over the socket: a JSON-RPC answer")
  t.same(unhandled, [], "no unhandled rejection")
})

t.test("a 1 MiB deeply nested body is refused before it is parsed, wherever the depth is", async (t) => {
  const srv = await startAgent(t)
  const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth)
  const seen = new Set<string>()
  const parse = JSON.parse
  // Records the bodies JSON.parse is handed; parsing itself is unchanged.
  JSON.parse = function (this: unknown, text: string, reviver?: Parameters<typeof parse>[1]) {
    if (typeof text === "string" && text.length > 1_000_000) seen.add(text)
    return parse.call(JSON, text, reviver)
  } as typeof JSON.parse
  t.teardown(() => {
    JSON.parse = parse
  })
  const cases: Array<[string, string]> = [
    ["in params.metadata", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","metadata":{"deep":${nested(520_000)}}}}`],
    ["in an envelope member besides params", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a"},"extra":${nested(520_000)}}`],
    ["as the whole body", nested(520_000)],
  ]
  for (const [where, body] of cases) {
    t.ok(body.length > 1_000_000 && body.length < 1024 * 1024, `${where}: ${body.length} bytes, under the body limit`)
    const answer = await inject(srv, body)
    t.equal(answer.status, 200, `${where}: HTTP 200`)
    t.match(parse(answer.body), { jsonrpc: "2.0", id: null, error: { code: -32602, message: "Invalid params: params nests deeper than 64 levels" } }, `${where}: -32602`)
    t.notOk(seen.has(body), `${where}: JSON.parse never saw the body`)
  }
})

t.test("a task accepted with deeply nested metadata can still be read and listed", async (t) => {
  // Depths a store copy may handle once but not twice: accepting such a task must not break reading it, or listing the others.
  for (const depth of [1000, 2500, 3500]) {
    const srv = await startAgent(t)
    const body = `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"deep":${"[".repeat(depth)}${"]".repeat(depth)}}},"configuration":{"blocking":true}}}`
    const sent = await inject(srv, body)
    t.equal(answerProblem(sent, body), undefined, `${depth} deep: SendMessage gets a JSON-RPC answer`)
    const task = rpcResult(sent)
    if (!task) {
      t.ok(rpcError(sent), `${depth} deep: refused with a JSON-RPC error`)
      continue
    }
    const got = await inject(srv, text(request("GetTask", { id: String(task.id) })))
    t.same(rpcError(got), undefined, `${depth} deep: GetTask reads the task it accepted`)
    const listed = await inject(srv, text(request("ListTasks", {})))
    t.same(rpcError(listed), undefined, `${depth} deep: ListTasks still lists`)
    await srv.stop()
  }
})

t.test("huge ids and texts", async (t) => {
  const srv = await startAgent(t)
  const hugeId = "i".repeat(100_000)
  const getTask = await inject(srv, text(request("GetTask", { id: hugeId })))
  t.equal(getTask.status, 200)
  t.match(parsed(getTask.body), { jsonrpc: "2.0", id: 1, error: { code: -32602, message: /params\.id/ } }, "a 100 kB task id in GetTask: -32602")
  t.ok(getTask.body.length < 2000, "the answer does not echo the 100 kB id")
  const envelope = await inject(srv, text(request("GetTask", { id: "x" }, hugeId)))
  t.match(parsed(envelope.body), { jsonrpc: "2.0", id: null, error: { code: -32600, message: /"id"/ } }, "a 100 kB request id: -32600 with id null")
  for (const id of ["1e999", "123456789012345678901234567890", "-0"]) {
    const body = `{"jsonrpc":"2.0","id":${id},"method":"GetTask","params":{"id":"x"}}`
    t.equal(answerProblem(await inject(srv, body), body), undefined, `id ${id}: a JSON-RPC answer`)
  }
  const bigText = "t".repeat(900 * 1024)
  const accepted = await inject(srv, text(sendBlocking(bigText)))
  t.equal(accepted.status, 200, "a 900 kB text part under the 1 MiB limit is accepted")
  t.match(rpcResult(accepted), { status: { state: "completed" } }, "and its task completes")
  const echoed = (rpcResult(accepted)?.history as Array<{ parts: Array<{ text: string }> }> | undefined)?.[0]?.parts[0]?.text
  t.equal(echoed?.length, bigText.length, "the whole text was kept")
  const version = await inject(srv, text(request("GetTask", { id: "x" })), { ...JSON_TYPE, "a2a-version": "v".repeat(4000) })
  t.match(parsed(version.body), { error: { code: -32009 } }, "a 4 kB A2A-Version: -32009")
  t.ok(version.body.length < 1000, "the answer does not echo the whole header")
})

t.test("bodies over the limit get 413, and the limit is configurable", async (t) => {
  const srv = await startAgent(t)
  const twoMiB = text(sendBlocking("x".repeat(2 * MIB)))
  for (const [route, answer] of [["inject", await inject(srv, twoMiB)], ["socket", await overSocket(srv, twoMiB)]] as const) {
    t.equal(answer.status, 413, `a 2 MiB body over ${route}: HTTP 413`)
    t.match(parsed(answer.body), { jsonrpc: "2.0", id: null, error: { code: -32600, message: /limit is 1048576 bytes/ } }, `over ${route}: the message names the limit`)
  }
  const small = await startAgent(t, 4096)
  const over = await inject(small, text(sendBlocking("x".repeat(5000))))
  t.equal(over.status, 413, "5000 bytes over a 4096-byte limit: HTTP 413")
  t.match(parsed(over.body), { error: { code: -32600, message: /limit is 4096 bytes/ } })
  const under = await inject(small, text(sendBlocking("x".repeat(3000))))
  t.match(rpcResult(under), { status: { state: "completed" } }, "3000 bytes under it: accepted")
  await assertAlive(t, srv, await completedTask(t, srv))
})

t.test("follow-ups of up to 1 MiB each cannot grow a Task past maxTaskBytes (4 MiB): -32602, and the Task stays as it was", async (t) => {
  // A model that asks again whatever it is told, except "done": the Task waits for input after every turn.
  const client = createLocalClient(({ messages }) => (messages.at(-1)?.content === "done" ? "ok" : { text: "And?", inputRequired: true }))
  const srv = await serve("127.0.0.1:0", { client, logger: false })
  t.teardown(() => srv.stop())
  const follow = (taskId: string | undefined, body: string) =>
    request("SendMessage", { message: { messageId: randomUUID(), role: "user", parts: [{ kind: "text", text: body }], ...(taskId && { taskId }) }, configuration: { blocking: true } })
  const chunk = "f".repeat(MIB - 1024)
  const first = rpcResult(await inject(srv, text(follow(undefined, chunk))))
  t.match(first, { status: { state: "input-required" } })
  const taskId = String(first?.id)
  let refused: { code: number; message: string; data?: unknown } | undefined
  let taken = 0
  for (let i = 0; i < 6 && refused === undefined; i++) {
    const answer = i % 2 ? await overSocket(srv, text(follow(taskId, chunk))) : await inject(srv, text(follow(taskId, chunk)))
    t.equal(answerProblem(answer, ""), undefined, `follow-up ${i + 1}: a JSON-RPC answer`)
    refused = rpcError(answer)
    if (refused === undefined) taken++
  }
  t.equal(taken, 3, "three more messages of almost 1 MiB fit beside the first (and the questions), a fourth does not")
  t.match(refused, { code: -32602, message: /over this agent's limit of 4194304 bytes per Task \(maxTaskBytes\); start a new task instead/, data: { maxTaskBytes: 4194304 } })
  const stored = rpcResult(await inject(srv, text(request("GetTask", { id: taskId }))))
  t.match(stored, { status: { state: "input-required" } }, "the Task is still waiting for input")
  t.equal((stored?.history as unknown[]).length, 8, "with the four messages taken and their questions")
  t.match(rpcResult(await inject(srv, text(follow(taskId, "done")))), { status: { state: "completed" } }, "and a small follow-up still finishes it")
})

t.test("unsupported content types get 415", async (t) => {
  const srv = await startAgent(t)
  const body = text(request("GetTask", { id: "x" }))
  for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"]) {
    for (const [route, answer] of [["inject", await inject(srv, body, { "content-type": type })], ["socket", await overSocket(srv, body, { "content-type": type })]] as const) {
      t.equal(answer.status, 415, `${type} over ${route}: HTTP 415`)
      t.match(parsed(answer.body), { jsonrpc: "2.0", error: { code: -32005, message: /^Unsupported content type/ } }, `${type} over ${route}: -32005 (ContentTypeNotSupported), saying why`)
    }
  }
  // Without a content type a body cannot be read as JSON: 415 too.
  for (const [route, answer] of [["inject", await inject(srv, body, {})], ["socket", await overSocket(srv, body, {})]] as const) {
    t.equal(answer.status, 415, `no content type over ${route}: HTTP 415`)
    t.match(parsed(answer.body), { error: { code: -32005, message: /^Unsupported content type ""/ } })
  }
  // Without a content type and without a body there is nothing to parse: the request is not a request object.
  const nothing = await inject(srv, "", {})
  t.equal(nothing.status, 200, "no content type and no body: HTTP 200")
  t.match(parsed(nothing.body), { jsonrpc: "2.0", error: { code: -32600 } }, "no content type and no body: -32600")
  for (const type of ["application/json; charset=utf-8", "application/json-rpc", "application/a2a+json"]) {
    t.match(parsed((await inject(srv, body, { "content-type": type })).body), { error: { code: -32001 } }, `${type} is read as JSON`)
  }
})

t.test("streams over the real socket end when the echo task completes; hostile stream requests get a JSON-RPC error", async (t) => {
  const srv = await startAgent(t)
  const message03 = { kind: "message", messageId: "s-03", role: "user", parts: [{ kind: "text", text: "stream" }] }
  const stream03 = await overSocket(srv, text(request("message/stream", { message: message03 })))
  t.match(stream03.contentType, /^text\/event-stream/)
  t.equal(answerProblem(stream03, ""), undefined, "0.3: every event is a JSON-RPC response")
  t.match(stream03.body.trim().split("\n\n").at(-1), /"final":true/, "0.3: the last event is final")
  const stream10 = await overSocket(srv, text(request("SendStreamingMessage", { message: { messageId: "s-10", role: "ROLE_USER", parts: [{ text: "stream" }] } })), V1)
  t.equal(answerProblem(stream10, ""), undefined, "1.0: every event is a JSON-RPC response")
  t.match(stream10.body.trim().split("\n\n").at(-1), /TASK_STATE_COMPLETED/, "1.0: the last event is the completed status")
  const stream10Id = sseMessages(stream10.body)[0].result.task.id
  // 0.3 answers a streaming method refused before its stream begins as a stream of that one error, as its official client expects.
  for (const [what, body] of [
    ["a 0.3 stream with bad params", text(request("message/stream", { message: { role: "robot", parts: [] } }))],
    ["a 0.3 subscription with a huge id", text(request("tasks/resubscribe", { id: "i".repeat(100_000) }))],
  ]) {
    const answer = await overSocket(srv, body, JSON_TYPE)
    t.equal(answer.status, 200, `${what}: HTTP 200`)
    t.match(answer.contentType, /^text\/event-stream/, `${what}: an event stream`)
    const events = sseMessages(answer.body)
    t.equal(events.length, 1, `${what}: of one event`)
    t.match(events[0], { jsonrpc: "2.0", id: 1, error: { code: Number } }, `${what}: the JSON-RPC error`)
    t.notMatch(answer.body, /^id:/m, `${what}: with no id to resume from`)
  }
  const hostile: Array<[string, string, HeaderMap]> = [
    ["a stream with bad params", text(request("SendStreamingMessage", { message: { role: "robot", parts: [] } })), V1],
    ["a subscription to nothing", text(request("SubscribeToTask", { id: "nope" })), V1],
    ["a subscription with a huge id", text(request("SubscribeToTask", { id: "i".repeat(100_000) })), V1],
    ["a stream in a batch", `[${text(request("message/stream", { message: message03 }))}]`, JSON_TYPE],
    ...["x", "-1", "1e3", "0x10", " 9".repeat(3000), "99999999999999999999", "1.5", "", "\u00e9"].map(
      (id): [string, string, HeaderMap] => [`a resume from Last-Event-ID ${JSON.stringify(id.slice(0, 12))}`, text(request("SubscribeToTask", { id: "nope" })), { ...V1, "last-event-id": id }],
    ),
    ["a resume past the end of a finished Task", text(request("SubscribeToTask", { id: stream10Id })), { ...V1, "last-event-id": "999" }],
  ]
  for (const [what, body, headers] of hostile) {
    const answer = await overSocket(srv, body, headers)
    t.equal(answer.status, 200, `${what}: HTTP 200`)
    t.match(answer.contentType, /^application\/json/, `${what}: a plain JSON answer, not a stream`)
    t.equal(answerProblem(answer, body), undefined, `${what}: a JSON-RPC error`)
    t.ok(rpcError(answer), `${what}: an error`)
  }
})

t.test("a stream flood by one principal is refused past its cap while another still streams, and the refused ones leave no Task", async (t) => {
  const ALICE = "alice-secret-0123456789"
  const BOB = "bob-secret-0123456789ab"
  // "hold" runs until the server stops; anything else is answered at once.
  const client = createLocalClient(({ messages, signal }) =>
    messages.at(-1)?.content === "hold" ? new Promise<string>((_resolve, reject) => signal?.addEventListener("abort", () => reject(signal.reason), { once: true })) : "answered",
  )
  const srv = await serve("127.0.0.1:0", { client, logger: false, a2a: { auth: { tokens: { [ALICE]: "alice", [BOB]: "bob" } }, maxStreamsPerPrincipal: 3, shutdownGraceMs: 0 } })
  t.teardown(() => srv.stop())
  const as = (secret: string): HeaderMap => ({ ...JSON_TYPE, authorization: `Bearer ${secret}` })
  const stream = (secret: string, words: string) => fetch(srv.url + "/", { method: "POST", headers: as(secret), body: text(request("message/stream", { message: { messageId: randomUUID(), role: "user", parts: [{ kind: "text", text: words }] } })) })

  const flood = await within(Promise.all(Array.from({ length: 40 }, () => stream(ALICE, "hold"))), "alice's flood")
  // 0.3: every answer is an event stream; a refused one holds just its error and ends.
  t.ok(flood.every((res) => res.status === 200 && /^text\/event-stream/.test(res.headers.get("content-type") ?? "")), "every answer is an event stream")
  const all = flood.map((res) => readSse(res.body!))
  await waitFor(() => all.every((r) => r.messages.length > 0), ANSWER_WITHIN_MS, "a first event on every answer")
  const readers = all.filter((r) => r.messages[0].error === undefined)
  const refused = all.filter((r) => !readers.includes(r))
  t.equal(readers.length, 3, "alice holds exactly her 3 streams")
  for (const r of refused) {
    const events = await r.done
    t.equal(events.length, 1, "a refused stream ends after its one event")
    t.match(events[0], { jsonrpc: "2.0", error: { code: -32603, message: /maxStreamsPerPrincipal \(3\)/ } })
  }
  await waitFor(() => readers.every((r) => r.messages.some((m) => m.result?.status?.state === "working")), ANSWER_WITHIN_MS, "alice's streams to be working")

  const bob = await within(stream(BOB, "answer me").then((res) => readSse(res.body!).done), "bob's stream")
  t.match(bob.at(-1), { result: { status: { state: "completed" }, final: true } }, "bob streams to the end while alice is at her cap")

  const list = async (secret: string) => (await (await fetch(srv.url + "/", { method: "POST", headers: as(secret), body: text(request("ListTasks", {})) })).json()).result
  t.equal((await list(ALICE)).totalSize, 3, "alice's 37 refused streams created no Task")
  t.equal((await list(BOB)).totalSize, 1)
  await srv.stop()
  await within(Promise.all(readers.map((r) => r.done)), "alice's streams to end on stop")
})

t.test("the command refuses bad limit values with its usage and exit code 2, naming the flag", async (t) => {
  const cases: Array<[string, string[], NodeJS.ProcessEnv]> = [
    ["--request-timeout", ["--request-timeout", "soon"], {}],
    ["--request-timeout", ["--request-timeout", "0"], {}],
    ["--headers-timeout", ["--headers-timeout=-1s"], {}],
    ["--headers-timeout", ["--request-timeout", "1s", "--headers-timeout", "2s"], {}],
    ["--idle-timeout", ["--idle-timeout", "1e3"], {}],
    ["--stream-heartbeat", ["--stream-heartbeat", "25d"], {}],
    ["--stream-heartbeat", ["--stream-heartbeat", "１０s"], {}],
    ["--max-streams", ["--max-streams", "0"], {}],
    ["--model-max-response", ["--model-max-response", "lots"], {}],
    ["--model-max-line", [], { TOOLNEXUS_MODEL_MAX_LINE: "8 parsecs" }],
    ["--model-turn-timeout", ["--model-turn-timeout", "0"], {}],
    ["--max-streams", [], { TOOLNEXUS_MAX_STREAMS: "-3" }],
    ["--max-streams-per-principal", ["--max-streams-per-principal", "9".repeat(400)], {}],
    ["--unowned-tasks-belong-to", ["--unowned-tasks-belong-to", "ops"], {}],
  ]
  await Promise.all(
    cases.map(async ([flag, args, env]) => {
      const child = spawn(process.execPath, [CLI_BIN, "--port", "0", "--store", "memory", ...args], { cwd: ROOT, env: { ...process.env, TOOLNEXUS_TOKENS: "", ...env } })
      let stderr = ""
      child.stderr.on("data", (chunk) => (stderr += chunk))
      child.stdout.resume()
      const code = await within(new Promise<number | null>((resolve) => child.once("exit", resolve)), `toolnexus ${args.join(" ")}`)
      const what = `${args.join(" ")} ${JSON.stringify(env)}`
      t.equal(code, 2, `${what}: exit code 2`)
      t.match(stderr, new RegExp(`^toolnexus: ${flag} (\\(\\d+ ms\\) )?should`), `${what}: names ${flag}`)
      t.match(stderr, /Usage: toolnexus/, `${what}: prints the usage`)
    }),
  )
})

t.test("hostile push-config params, both versions and inline: -32602 (or -32001) naming the field, never a 5xx, and nothing stored", async (t) => {
  const srv = await startAgent(t)
  const { taskId } = await completedTask(t, srv)
  const huge = "h".repeat(100_000)
  const urls: Json[] = [
    null, 42, [], {}, "", huge, "http://\u0000/", "javascript:alert(1)", "file:///etc/passwd", "http://[fe80::1%25eth0]/", "http://0/", "http://2130706433/",
    "http://[::ffff:127.0.0.1]/", "http://[::]/", "http://127.0.0.1.nip.io.invalid/", "gopher://127.0.0.1:25/", "http://%31%32%37.0.0.1/", "https://xn--/",
  ]
  const configs: Json[] = [
    ...urls.map((url) => ({ url })),
    { url: "https://203.0.113.1/", token: 1 },
    { url: "https://203.0.113.1/", token: "a\nb" },
    { url: "https://203.0.113.1/", authentication: "Bearer x" },
    { url: "https://203.0.113.1/", authentication: { scheme: ["Bearer"] } },
    { url: "https://203.0.113.1/", authentication: { scheme: "Bearer", credentials: { toString: "x" } } },
    { url: "https://203.0.113.1/", id: huge },
    { url: "https://203.0.113.1/", id: 7 },
    { url: "https://203.0.113.1/", authentication: { schemes: "Bearer" } },
    { url: "https://203.0.113.1/", authentication: { schemes: [huge] } },
    { __proto__: { url: "https://203.0.113.1/" } },
  ]
  const problems: string[] = []
  const codes = new Set<number>()
  const check = async (name: string, body: JsonObject, headers: HeaderMap) => {
    const answer = await inject(srv, text(body), headers)
    const problem = answerProblem(answer, text(body))
    if (problem) problems.push(`${name}: ${problem}`)
    const error = rpcError(answer)
    if (error === undefined) problems.push(`${name}: accepted (${answer.body.slice(0, 120)})`)
    else {
      codes.add(error.code)
      if (error.code !== -32602 && error.code !== -32001) problems.push(`${name}: ${error.code} ${error.message}`)
      if (answer.body.length > 4000) problems.push(`${name}: echoed ${answer.body.length} characters`)
    }
  }
  for (const [i, config] of configs.entries()) {
    const flat = isObject(config) ? config : { url: config }
    await check(`create10 #${i}`, request("CreateTaskPushNotificationConfig", { taskId, ...(flat) }), V1)
    await check(`set03 #${i}`, request("tasks/pushNotificationConfig/set", { taskId, pushNotificationConfig: config }), JSON_TYPE)
    await check(`inline10 #${i}`, request("SendMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "x" }] }, configuration: { taskPushNotificationConfig: config } }), V1)
    await check(`inline03 #${i}`, request("message/send", { message: { role: "user", parts: [{ kind: "text", text: "x" }] }, configuration: { pushNotificationConfig: config } }), JSON_TYPE)
  }
  for (const [name, params] of [
    ["get10 no id", { taskId }],
    ["get10 huge task id", { taskId: huge, id: "x" }],
    ["list10 bad page size", { taskId, pageSize: -1 }],
    ["list10 page size too big", { taskId, pageSize: 1e9 }],
    ["list10 forged token", { taskId, pageToken: Buffer.from('{"after":7}').toString("base64url") }],
    ["delete10 id array", { taskId, id: ["x"] }],
  ] as Array<[string, JsonObject]>) {
    const method = name.startsWith("get") ? "GetTaskPushNotificationConfig" : name.startsWith("list") ? "ListTaskPushNotificationConfigs" : "DeleteTaskPushNotificationConfig"
    await check(name, request(method, params), V1)
  }
  await check("get03 config id object", request("tasks/pushNotificationConfig/get", { id: taskId, pushNotificationConfigId: {} }), JSON_TYPE)
  await check("list03 no id", request("tasks/pushNotificationConfig/list", { taskId }), JSON_TYPE)
  t.same(problems, [], "every hostile push request got -32602 or -32001 over HTTP 200")
  t.ok(codes.has(-32602))
  const listed = rpcResult(await inject(srv, text(request("ListTaskPushNotificationConfigs", { taskId })), V1))
  t.same(listed, { configs: [], nextPageToken: "" }, "nothing was stored")
  t.same(unhandled, [], "no unhandled rejection")
})

t.test("no unhandled rejection happened in the whole file", async (t) => {
  t.same(unhandled, [])
  assertNotPolluted(t)
})
