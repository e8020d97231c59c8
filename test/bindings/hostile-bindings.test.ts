import * as grpc from "@grpc/grpc-js"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { A2A_SERVICE, messageType } from "../../lib/grpc/proto.js"
import { serve, type ServedAgent } from "../../plugins/serve.js"

/**
 * Hostile input on the HTTP+JSON and gRPC bindings, as test/bindings/hostile-input.test.ts
 * is for JSON-RPC: seeded fuzz over every route and method, then one honest call.
 * Whatever arrives, the peer gets an answer or a refusal that says what was wrong
 * (a 4xx with an error body, a gRPC status other than INTERNAL or UNKNOWN); never
 * a 5xx, a hang, an unhandled rejection or a crash. The seeds are fixed, so a
 * failure names the case that can be run again.
 */

/** Generous: the suite runs on loaded 2-core machines; a hang is what this catches, not slowness. */
const ANSWER_WITHIN_MS = 15_000

const unhandled: unknown[] = []
const countUnhandled = (reason: unknown) => void unhandled.push(reason)
process.on("unhandledRejection", countUnhandled)
t.teardown(() => void process.off("unhandledRejection", countUnhandled))

/** mulberry32: a small PRNG, so a seed replays the same cases. */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

type Random = ReturnType<typeof prng>
const pick = <T>(random: Random, list: readonly T[]): T => list[Math.floor(random() * list.length)]

async function startAgent(t: Test): Promise<ServedAgent> {
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "ok"), logger: false, grpc: "127.0.0.1:0" })
  t.teardown(() => srv.stop())
  return srv
}

// ---------------------------------------------------------------------------
// HTTP+JSON

/** Path segments a peer may send in place of an id: empty-ish, encoded, traversal, control bytes, long, not UTF-8. */
const HOSTILE_IDS = ["x", "%00", "%2e%2e", "..%2F..%2Fetc%2Fpasswd", "%ZZ", "%C3%28", "%F0%9F%92%A9", "a%0d%0aX-Injected:%201", "%20", "ä", "x".repeat(99), "x".repeat(300), "-1", "null", "%7B%7D"]
const QUERY_VALUES = ["", "-1", "0", "1", "abc", "1e400", "9007199254740993", "1.5", "%00", "true", "[]", "x".repeat(2000)]
const QUERY_KEYS = ["historyLength", "pageSize", "pageToken", "contextId", "status", "statusTimestampAfter", "includeArtifacts", "tenant", "unknown"]
const VERSIONS = [undefined, "1.0", "0.3", "2.0", "", "1", "banana", "1.0, 0.3"]
const CONTENT_TYPES = ["application/json", "application/a2a+json", "text/plain", "application/json; charset=latin1", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded"]
/** The binding's routes with `{}` where a hostile id goes; tenant forms and the 0.3 /v1 paths included. */
const REST_PATHS: ReadonlyArray<[method: "GET" | "POST" | "DELETE", path: string]> = [
  ["POST", "/message:send"],
  ["POST", "/message:stream"],
  ["GET", "/tasks/{}"],
  ["GET", "/tasks"],
  ["POST", "/tasks/{}:cancel"],
  ["GET", "/tasks/{}:subscribe"],
  ["POST", "/tasks/{}/pushNotificationConfigs"],
  ["GET", "/tasks/{}/pushNotificationConfigs"],
  ["GET", "/tasks/{}/pushNotificationConfigs/{}"],
  ["DELETE", "/tasks/{}/pushNotificationConfigs/{}"],
  ["GET", "/extendedAgentCard"],
  ["POST", "/{}/message:send"],
  ["GET", "/{}/tasks/{}"],
  ["GET", "/{}/tasks"],
  ["POST", "/v1/message:send"],
  ["GET", "/v1/tasks/{}"],
  ["POST", "/v1/tasks/{}:cancel"],
  ["GET", "/v1/tasks/{}/pushNotificationConfigs"],
]

const sendBody = () => ({ message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "hi" }] }, configuration: { historyLength: 2 } })

/** A value a field should not hold: the wrong type, out of range, huge, deep, or absent. */
function hostileValue(random: Random, depth = 0): unknown {
  switch (Math.floor(random() * 12)) {
    case 0:
      return null
    case 1:
      return -1
    case 2:
      return 1e308
    case 3:
      return "x".repeat(Math.floor(random() * 5000))
    case 4:
      return []
    case 5:
      return {}
    case 6:
      return true
    case 7:
      return "\u0000\ud800"
    case 8:
      return depth < 3 ? [hostileValue(random, depth + 1), hostileValue(random, depth + 1)] : 0
    case 9:
      return depth < 3 ? { kind: hostileValue(random, depth + 1), text: hostileValue(random, depth + 1) } : "deep"
    case 10:
      return "ROLE_AGENT"
    default:
      return undefined
  }
}

/** A valid send body with one field replaced at random depth, or a body that is no JSON object at all. */
function hostileBody(random: Random): string | undefined {
  switch (Math.floor(random() * 8)) {
    case 0:
      return undefined
    case 1:
      return "{"
    case 2:
      return "[".repeat(200) + "]".repeat(200)
    case 3:
      return JSON.stringify(hostileValue(random))
    case 4:
      return '{"message":' + "{".repeat(5000)
    default: {
      const body = sendBody() as Record<string, any>
      const target = pick(random, [body, body.message, body.message.parts[0], body.configuration])
      const key = pick(random, [...Object.keys(target), "__proto__", "constructor", "tenant", "metadata", "extensions"])
      target[key] = hostileValue(random)
      return JSON.stringify(body)
    }
  }
}

function hostileRestRequest(random: Random) {
  const [method, template] = pick(random, REST_PATHS)
  const path = template.replace(/\{\}/g, () => pick(random, HOSTILE_IDS))
  const query = Array.from({ length: Math.floor(random() * 3) }, () => `${pick(random, QUERY_KEYS)}=${pick(random, QUERY_VALUES)}`).join("&")
  // Mostly a version and a content type the binding takes, so most cases reach the operations.
  const headers: Record<string, string> = { "content-type": random() < 0.7 ? "application/json" : pick(random, CONTENT_TYPES) }
  const version = random() < 0.6 ? "1.0" : pick(random, VERSIONS)
  if (version !== undefined) headers["a2a-version"] = version
  const payload = method === "POST" ? hostileBody(random) : undefined
  return { method, url: path + (query ? `?${query}` : ""), headers, payload }
}

/** What a refusal of the binding looks like: google.rpc.Status on the 1.0 paths, the 0.3 binding's error object on /v1, Fastify's own for a request it turns away before any route. */
function refusalSaysWhy(body: string): boolean {
  let parsed: any
  try {
    parsed = JSON.parse(body)
  } catch {
    return false
  }
  const message = parsed?.error?.message ?? parsed?.message
  return typeof message === "string" && message.length > 0
}

t.test("HTTP+JSON: 600 seeded hostile requests are answered or refused with a message, never a 5xx", async (t) => {
  const srv = await startAgent(t)
  const random = prng(0x5eed14)
  const statuses = new Map<number, number>()
  for (let i = 0; i < 600; i++) {
    const req = hostileRestRequest(random)
    const res = await srv.app.inject(req)
    statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
    const what = `case ${i}: ${req.method} ${req.url.slice(0, 200)} ${JSON.stringify(req.headers)} ${String(req.payload).slice(0, 200)}`
    if (res.statusCode >= 500) t.fail(`${what} → ${res.statusCode} ${res.body.slice(0, 300)}`)
    else if (res.statusCode >= 400 && !refusalSaysWhy(res.body)) t.fail(`${what} → ${res.statusCode} without a message: ${res.body.slice(0, 300)}`)
  }
  t.ok([...statuses.keys()].some((status) => status >= 400), `the fuzz reached refusals (${JSON.stringify([...statuses])})`)
  t.equal(unhandled.length, 0, "no unhandled rejection")

  // The server is whole: a real peer over a socket still gets its Task.
  const sent = await fetch(`${srv.url}/message:send`, { method: "POST", headers: { "content-type": "application/json", "a2a-version": "1.0" }, body: JSON.stringify(sendBody()) })
  t.equal(sent.status, 200)
  const task = (await sent.json()).task
  const read = await fetch(`${srv.url}/tasks/${encodeURIComponent(task.id)}`, { headers: { "a2a-version": "1.0" } })
  t.equal((await read.json()).status.state, "TASK_STATE_COMPLETED")
})

t.test("HTTP+JSON over a real socket: hostile bytes on the wire get a 4xx, and the next request on a new socket is served", async (t) => {
  const srv = await startAgent(t)
  const random = prng(0xbad5)
  for (let i = 0; i < 60; i++) {
    const req = hostileRestRequest(random)
    const res = await fetch(srv.url + req.url, {
      method: req.method,
      headers: req.headers,
      body: req.payload === undefined ? undefined : new Uint8Array(Buffer.from(req.payload)),
      signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
    }).catch((err: Error) => err)
    if (res instanceof Error) {
      t.fail(`case ${i}: ${req.method} ${req.url.slice(0, 200)}: ${res.message}`)
      continue
    }
    const body = await res.text()
    if (res.status >= 500) t.fail(`case ${i}: ${req.method} ${req.url.slice(0, 200)} → ${res.status} ${body.slice(0, 300)}`)
  }
  const card = await fetch(`${srv.url}/.well-known/agent-card.json`)
  t.equal(card.status, 200, "the server still answers")
  t.equal(unhandled.length, 0, "no unhandled rejection")
})

// ---------------------------------------------------------------------------
// gRPC

const METHODS: ReadonlyArray<[name: string, request: string, streams: boolean]> = [
  ["SendMessage", "SendMessageRequest", false],
  ["SendStreamingMessage", "SendMessageRequest", true],
  ["GetTask", "GetTaskRequest", false],
  ["ListTasks", "ListTasksRequest", false],
  ["CancelTask", "CancelTaskRequest", false],
  ["SubscribeToTask", "SubscribeToTaskRequest", true],
  ["CreateTaskPushNotificationConfig", "TaskPushNotificationConfig", false],
  ["GetTaskPushNotificationConfig", "GetTaskPushNotificationConfigRequest", false],
  ["ListTaskPushNotificationConfigs", "ListTaskPushNotificationConfigsRequest", false],
  ["DeleteTaskPushNotificationConfig", "DeleteTaskPushNotificationConfigRequest", false],
  ["GetExtendedAgentCard", "GetExtendedAgentCardRequest", false],
]

/** Valid requests to mutate: every field a method reads, filled. */
const SEEDS: Record<string, Record<string, unknown>> = {
  SendMessageRequest: {
    tenant: "t",
    message: { message_id: "m", context_id: "c", role: 1, parts: [{ text: "hi" }, { data: { fields: { a: { number_value: 1 } } } }, { url: "https://x/y", media_type: "text/plain" }] },
    configuration: { history_length: 3, accepted_output_modes: ["text/plain"], return_immediately: false },
    metadata: { fields: { k: { string_value: "v" } } },
  },
  GetTaskRequest: { tenant: "t", id: "task-1", history_length: 5 },
  ListTasksRequest: { tenant: "t", context_id: "c", status: 3, page_size: 10, page_token: "tok", history_length: 1, status_timestamp_after: { seconds: 1_700_000_000, nanos: 5 }, include_artifacts: true },
  CancelTaskRequest: { tenant: "t", id: "task-1", metadata: { fields: {} } },
  SubscribeToTaskRequest: { tenant: "t", id: "task-1" },
  TaskPushNotificationConfig: { tenant: "t", id: "cfg", task_id: "task-1", url: "https://example.com/hook", token: "tok", authentication: { scheme: "Bearer", credentials: "c" } },
  GetTaskPushNotificationConfigRequest: { tenant: "t", task_id: "task-1", id: "cfg" },
  ListTaskPushNotificationConfigsRequest: { tenant: "t", task_id: "task-1", page_size: 2, page_token: "p" },
  DeleteTaskPushNotificationConfigRequest: { tenant: "t", task_id: "task-1", id: "cfg" },
  GetExtendedAgentCardRequest: { tenant: "t" },
}

/** Bytes a method may be sent: a valid request with bits flipped, cut short, with junk appended, or noise. */
function hostileBytes(random: Random, requestType: string): Buffer {
  const valid = Buffer.from(messageType(requestType).encode(SEEDS[requestType]).finish())
  switch (Math.floor(random() * 5)) {
    case 0: {
      const bytes = Buffer.from(valid)
      for (let n = 1 + Math.floor(random() * 4); n > 0; n--) bytes[Math.floor(random() * bytes.length)] ^= 1 << Math.floor(random() * 8)
      return bytes
    }
    case 1:
      return valid.subarray(0, Math.floor(random() * valid.length))
    case 2:
      return Buffer.concat([valid, Buffer.from(Array.from({ length: 1 + Math.floor(random() * 16) }, () => Math.floor(random() * 256)))])
    case 3:
      return Buffer.from(Array.from({ length: Math.floor(random() * 64) }, () => Math.floor(random() * 256)))
    default:
      return valid
  }
}

function hostileMetadata(random: Random): grpc.Metadata {
  const md = new grpc.Metadata()
  // Mostly a version the binding serves, so most cases reach the conversion and the operations.
  const version = random() < 0.7 ? "1.0" : pick(random, VERSIONS)
  if (version) md.set("a2a-version", version)
  if (random() < 0.3) md.set("authorization", pick(random, ["Bearer", "Bearer x", "Basic ???", "x".repeat(4000)]))
  if (random() < 0.2) md.set("traceparent", pick(random, ["00-zz-zz-01", "garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]))
  if (random() < 0.2) md.set("x-junk-bin", Buffer.from([0, 255, 1]))
  return md
}

/** What a peer sees of one call: the status it ended with (OK included), the answers of a stream. */
function call(client: grpc.Client, method: string, streams: boolean, request: Buffer, md: grpc.Metadata): Promise<{ code: grpc.status; details: string }> {
  const path = `/${A2A_SERVICE}/${method}`
  const identity = (bytes: Buffer) => bytes
  const deadline = Date.now() + ANSWER_WITHIN_MS
  return new Promise((resolve) => {
    if (!streams) {
      client.makeUnaryRequest(path, identity, identity, request, md, { deadline }, (error) =>
        resolve(error ? { code: error.code, details: error.details } : { code: grpc.status.OK, details: "" }),
      )
      return
    }
    const stream = client.makeServerStreamRequest(path, identity, identity, request, md, { deadline })
    stream.on("data", () => {})
    stream.on("status", (status: grpc.StatusObject) => resolve({ code: status.code, details: status.details }))
    stream.on("error", () => {}) // the status event carries it
  })
}

t.test("gRPC: 500 seeded hostile calls end in a status that names the fault, never INTERNAL, UNKNOWN or a deadline", async (t) => {
  const srv = await startAgent(t)
  const client = new grpc.Client(srv.grpc!, grpc.credentials.createInsecure())
  t.teardown(() => client.close())
  const random = prng(0x9a9c)
  const codes = new Map<string, number>()
  for (let i = 0; i < 500; i++) {
    const [method, requestType, streams] = pick(random, METHODS)
    const bytes = hostileBytes(random, requestType)
    const md = hostileMetadata(random)
    const { code, details } = await call(client, method, streams, bytes, md)
    const name = grpc.status[code]
    codes.set(name, (codes.get(name) ?? 0) + 1)
    const what = `case ${i}: ${method} ${bytes.toString("hex").slice(0, 120)} ${JSON.stringify(md.toJSON()).slice(0, 200)}`
    if (code === grpc.status.INTERNAL || code === grpc.status.UNKNOWN || code === grpc.status.DEADLINE_EXCEEDED) t.fail(`${what} → ${name}: ${details}`)
    else if (code !== grpc.status.OK && details.trim().length === 0) t.fail(`${what} → ${name} without details`)
  }
  t.ok(codes.has("INVALID_ARGUMENT"), `the fuzz reached refusals (${JSON.stringify([...codes])})`)
  t.equal(unhandled.length, 0, "no unhandled rejection")

  // Bytes no method's path names, and a service that does not exist.
  const unknown = await call(client, "NoSuchMethod", false, Buffer.alloc(0), new grpc.Metadata())
  t.equal(unknown.code, grpc.status.UNIMPLEMENTED)

  // The server is whole: an honest call after all that completes its Task.
  const md = new grpc.Metadata()
  md.set("a2a-version", "1.0")
  const request = Buffer.from(messageType("SendMessageRequest").encode({ message: { message_id: "after", role: 1, parts: [{ text: "hi" }] } }).finish())
  const answer = await new Promise<Buffer>((resolve, reject) =>
    client.makeUnaryRequest(`/${A2A_SERVICE}/SendMessage`, (b: Buffer) => b, (b: Buffer) => b, request, md, (error, response) => (error ? reject(error) : resolve(response!))),
  )
  const decoded = messageType("SendMessageResponse").toObject(messageType("SendMessageResponse").decode(answer), { enums: String }) as any
  t.equal(decoded.task?.status?.state, "TASK_STATE_COMPLETED")
})
