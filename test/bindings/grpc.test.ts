import {
  AgentCard,
  CancelTaskRequest,
  GetTaskRequest,
  ListTasksRequest,
  SendMessageRequest,
  SubscribeToTaskRequest,
  TaskPushNotificationConfig,
  TaskState,
} from "@a2a-js/sdk"
import { ClientFactory, type Client } from "@a2a-js/sdk/client"
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc"
import { RequestMalformedError, TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors"
import * as grpc from "@grpc/grpc-js"
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify"
import { createPrivateKey } from "node:crypto"
import net from "node:net"
import { pino } from "pino"
import protobuf from "protobufjs"
import t, { type Test } from "tap"
import { TaskEvents } from "../../lib/streams/events.js"
import { StoreFollower } from "../../lib/streams/follower.js"
import { A2AOperations } from "../../lib/a2a/operations.js"
import { TaskRunner } from "../../lib/a2a/runner.js"
import { codecFor } from "../../lib/a2a/wire.js"
import { createLocalClient } from "../../lib/client/client.js"
import { fromProtoJson, ProtoJsonError, toProtoJson } from "../../lib/grpc/convert.js"
import { messageType } from "../../lib/grpc/proto.js"
import { splitAddress } from "../../lib/grpc/address.js"
import { A2AGrpcServer } from "../../lib/grpc/server.js"
import { decodeStatusDetails, STATUS_DETAILS_KEY } from "../../lib/grpc/status.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { A2ATask } from "../../lib/types.js"
import { parseCli, USAGE } from "../../lib/cli.js"
import { toolnexusA2A, type ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { serve, type SecureFastifyInstance } from "../../plugins/serve.js"
import { deferred, gatedModel, injectRpc, memoryLogger, rpc, selfSignedCertificate, startCli, waitFor } from "../fixtures/helpers.js"
import { pushConfigRoundTrip, sendAndGet } from "../fixtures/sdk-scenarios.js"

/**
 * The gRPC binding (lib/grpc): the spec's A2AService on an address of its own, driven by the official
 * @a2a-js/sdk 1.x gRPC client, by a raw grpc-js client where the SDK cannot send what is tested, and
 * across bindings with the plugin's JSON-RPC route. ProtoJSON conversion is checked round trip.
 */

// ---------------------------------------------------------------------------
// Conversion: proto messages <-> the ProtoJSON the operations take and give

const codec = codecFor("1.0")

/** Encodes ProtoJSON as `type` and decodes it back: what a gRPC peer would receive, and the server read. */
const roundTrip = (name: string, json: unknown) => {
  const type = messageType(name)
  return toProtoJson(type, type.decode(type.encode(fromProtoJson(type, json)).finish()))
}

/** A Task with every kind of content: text, file bytes and URL, data, a status message, artifacts, metadata. */
const richTask: A2ATask = {
  id: "task-1",
  contextId: "ctx-1",
  kind: "task",
  status: {
    state: "input-required",
    timestamp: "2026-01-31T12:00:00.123Z",
    message: { kind: "message", messageId: "m3", role: "agent", parts: [{ kind: "text", text: "which file?" }] },
  },
  history: [
    {
      kind: "message",
      messageId: "m1",
      role: "user",
      contextId: "ctx-1",
      parts: [
        { kind: "text", text: "hello", metadata: { lang: "en" } },
        { kind: "file", file: { name: "a.bin", mimeType: "application/octet-stream", bytes: Buffer.from([0, 1, 2, 250, 255]).toString("base64") } },
        { kind: "file", file: { uri: "https://files.example.com/b.pdf", mimeType: "application/pdf" } },
        { kind: "data", data: { n: 1.5, ok: true, nothing: null, list: [1, "two", { three: [3] }], nested: { deep: { deeper: "x" } } } },
      ],
      metadata: { trace: "abc", count: 3 },
    },
  ],
  artifacts: [{ artifactId: "art-1", name: "answer", description: "the answer", parts: [{ kind: "text", text: "" }], metadata: { score: 0 } }],
  metadata: { shared: { flag: false } },
}

t.test("convert: a real Task, Message and stream events survive proto and back, equal to what JSON-RPC sends", async (t) => {
  const task = codec.task(richTask)
  t.same(roundTrip("Task", task), task, "Task")
  const message = codec.sendResult({ ...richTask, status: { state: "completed" } })
  t.same(roundTrip("SendMessageResponse", message), message, "SendMessageResponse {task}")
  const history = (task as { history: unknown[] }).history
  t.same(roundTrip("SendMessageResponse", { message: history[0] }), { message: history[0] }, "SendMessageResponse {message}")
  for (const event of [
    codec.streamEvent({ type: "task", task: richTask }, false),
    codec.streamEvent({ type: "status", taskId: "task-1", contextId: "ctx-1", status: { state: "working", timestamp: "2026-01-31T12:00:01.000Z" } }, false),
    codec.streamEvent({ type: "artifact", taskId: "task-1", contextId: "ctx-1", artifact: { artifactId: "a", parts: [{ kind: "text", text: "chunk" }] }, append: true, lastChunk: true }, false),
  ]) {
    t.same(roundTrip("StreamResponse", event), event, `StreamResponse ${Object.keys(event as object)[0]}`)
  }
  // A bool at false is proto3's unset: ProtoJSON leaves it out, and a peer reads it as false all the same.
  const chunk = codec.streamEvent({ type: "artifact", taskId: "t", contextId: "c", artifact: { artifactId: "a", parts: [{ kind: "text", text: "x" }] }, append: false, lastChunk: false }, false)
  t.same(roundTrip("StreamResponse", chunk), { artifactUpdate: { taskId: "t", contextId: "c", artifact: { artifactId: "a", parts: [{ text: "x" }] } } })
  const listed = { tasks: [task], nextPageToken: "next", pageSize: 1, totalSize: 7 }
  t.same(roundTrip("ListTasksResponse", listed), listed, "ListTasksResponse")
})

t.test("convert: ProtoJSON's forms: defaults left out, enums by name, timestamps to the nanosecond, bytes as base64", async (t) => {
  t.same(roundTrip("ListTasksResponse", { tasks: [], nextPageToken: "", pageSize: 0, totalSize: 0 }), {}, "zero values and empty lists are not written")
  t.same(roundTrip("GetTaskRequest", { id: "x", historyLength: 0 }), { id: "x", historyLength: 0 }, "a proto3 optional set to 0 is kept: it was set")
  t.same(roundTrip("Part", { text: "" }), { text: "" }, "a oneof member is kept at its zero value")
  t.same(roundTrip("Part", { data: null }), { data: null }, "a data part may hold JSON null")
  t.same(roundTrip("Part", { data: [1, "a"] }), { data: [1, "a"] }, "or any JSON value")
  t.same(roundTrip("Part", { raw: "AAEC+v8=" }), { raw: "AAEC+v8=" })
  t.same(roundTrip("Part", { raw: "-_8" }), { raw: "+/8=" }, "URL-safe base64 is read, standard base64 written")
  t.same(roundTrip("TaskStatus", { state: "TASK_STATE_WORKING", timestamp: "2026-01-31T12:00:00.123456789Z" }), { state: "TASK_STATE_WORKING", timestamp: "2026-01-31T12:00:00.123456789Z" })
  t.same(roundTrip("TaskStatus", { timestamp: "2026-01-31T12:00:00.123456Z" }).timestamp, "2026-01-31T12:00:00.123456Z", "microseconds keep six digits")
  t.same(roundTrip("TaskStatus", { timestamp: "2026-01-31T13:00:00+01:00" }).timestamp, "2026-01-31T12:00:00.000Z", "an offset is read; UTC with milliseconds is written")
  t.same(roundTrip("TaskStatus", { state: 2 }), { state: "TASK_STATE_WORKING" }, "an enum given by number is written by name")
  t.same(roundTrip("Message", { message_id: "m", role: "ROLE_USER", parts: [{ text: "x" }] }).messageId, "m", "proto field names are read too")
  t.same(roundTrip("Message", { messageId: "m", role: "ROLE_USER", parts: [{ text: "x" }], futureField: 1 }), { messageId: "m", role: "ROLE_USER", parts: [{ text: "x" }] }, "unknown fields are left out")
  const card = { name: "a", securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer" } } }, securityRequirements: [{ schemes: { bearer: { list: [] } } }] }
  t.same(roundTrip("AgentCard", card), { name: "a", securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer" } } }, securityRequirements: [{ schemes: { bearer: {} } }] }, "maps of messages")
  t.same(roundTrip("AgentCard", { name: "a", securitySchemes: {} }), { name: "a" }, "an empty map is left out")
  t.same(roundTrip("TaskStatus", { state: 99 }), { state: 99 }, "an enum number this proto does not name stays a number")

  // Decoding the bytes protobufjs writes for a Timestamp past the year 9999 (ProtoJSON has no form for it).
  const status = messageType("TaskStatus")
  const far = status.decode(status.encode({ timestamp: { seconds: 253_402_300_800, nanos: 0 } }).finish())
  t.throws(() => toProtoJson(status, far), { name: "ProtoJsonError", field: "timestamp", message: /between the years 0001 and 9999/ })

})

t.test("convert: the scalar kinds a2a.proto lacks: int64 as numbers both ways, bytes and doubles at their defaults", async (t) => {
  const root = protobuf.Root.fromJSON({
    nested: {
      Counter: {
        fields: { total: { type: "int64", id: 1 }, ids: { rule: "repeated", type: "uint64", id: 2 }, blob: { type: "bytes", id: 3 }, ratio: { type: "double", id: 4 } },
      },
    },
  })
  const type = root.lookupType("Counter")
  const both = (json: unknown) => toProtoJson(type, type.decode(type.encode(fromProtoJson(type, json)).finish()))
  t.same(both({ total: 9_007_199_254_740_991, ids: ["5", 0] }), { total: 9_007_199_254_740_991, ids: [5, 0] })
  t.same(both({ total: "0", blob: "", ratio: 0 }), {}, "zero, empty bytes and 0.0 are the defaults, left out")
  t.same(both({ ratio: "1.5" }), { ratio: 1.5 })
  t.ok(Number.isNaN(both({ ratio: "NaN" }).ratio), "NaN as ProtoJSON writes it")
  t.same(toProtoJson(type, { total: 5 }), { total: 5 }, "an int64 given as a number")
  t.throws(() => fromProtoJson(type, { ratio: "lots" }), { field: "ratio", message: /should be a number/ })
  t.throws(() => fromProtoJson(type, { ratio: true }), { field: "ratio", message: /should be a number/ })
  t.throws(() => fromProtoJson(type, { total: "twelve" }), { field: "total", message: /whole number/ })
})

t.test("convert: a value of the wrong form names its field", async (t) => {
  const fails = (name: string, json: unknown, field: string | RegExp, wanted: RegExp) => {
    t.throws(() => fromProtoJson(messageType(name), json), { name: "ProtoJsonError", field, message: wanted }, String(field))
  }
  fails("TaskStatus", { timestamp: "yesterday" }, "timestamp", /RFC 3339/)
  fails("TaskStatus", { timestamp: 1769860800 }, "timestamp", /RFC 3339/)
  fails("TaskStatus", { state: "TASK_STATE_DREAMING" }, "state", /should be one of TASK_STATE_UNSPECIFIED/)
  fails("TaskStatus", { state: true }, "state", /should be one of/)
  fails("Message", { messageId: 7 }, "messageId", /should be a string/)
  fails("Message", { parts: {} }, "parts", /should be an array/)
  fails("Message", { parts: [{ raw: "not base64!" }] }, "parts[0].raw", /base64/)
  fails("Message", { metadata: [] }, "metadata", /should be an object/)
  fails("Task", { status: "done" }, "status", /should be an object/)
  fails("AgentCapabilities", { streaming: "yes" }, "streaming", /true or false/)
  fails("ListTasksResponse", { pageSize: 1.5 }, "pageSize", /whole number/)
  fails("AuthorizationCodeOAuthFlow", { scopes: ["read"] }, "scopes", /should be an object/)
  fails("SendMessageResponse", "task", "the message", /should be an object/)
  t.throws(() => fromProtoJson(messageType("google.protobuf.ListValue"), {}), { field: "", message: /should be an array/ })
  // protobuf's limit of 100 message levels is about 50 of JSON in a Struct: deeper is refused here, naming where, before protobufjs would refuse it without.
  const nested = (levels: number) => {
    let value: unknown = "bottom"
    for (let i = 0; i < levels; i++) value = { next: value }
    return value
  }
  const encodes = (name: string, json: unknown) => messageType(name).encode(fromProtoJson(messageType(name), json)).finish()
  t.doesNotThrow(() => encodes("Message", { metadata: nested(50) }), "50 levels fit")
  fails("Message", { metadata: nested(51) }, /^metadata(\.next){51}$/, /nests deeper than protobuf's 100 message levels \(about 50 levels of JSON\)/)
  t.doesNotThrow(() => encodes("Task", { id: "t", history: [{ metadata: nested(49) }] }), "one level less inside a Task's message, as protobufjs counts")
  fails("Task", { id: "t", history: [{ metadata: nested(50) }] }, /^history\[0\]\.metadata(\.next){50}$/, /nests deeper/)
  t.ok(new ProtoJsonError("a.b", "should be x") instanceof TypeError)
})

// ---------------------------------------------------------------------------
// A served agent and the official SDK's gRPC client


interface GrpcAgent {
  app: FastifyInstance
  /** The bound gRPC address, "127.0.0.1:<port>". */
  address: string
  sdk: Client
  gates: ReturnType<typeof gatedModel>["gates"]
  signals: AbortSignal[]
  /** Every log line the app wrote. */
  lines: Array<Record<string, any>>
}

/** A Fastify app with the plugin, its gRPC binding on 127.0.0.1:0, and the official SDK client over gRPC; closed when the test ends. */
async function grpcAgent(t: Test, opts: Partial<ToolnexusA2AOptions> = {}, tls?: { key: string; cert: string }): Promise<GrpcAgent> {
  const model = gatedModel()
  const lines: Array<Record<string, any>> = []
  const loggerInstance: FastifyBaseLogger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) })
  const app = Fastify({ loggerInstance })
  await app.register(toolnexusA2A, { client: createLocalClient(model.respond), name: "grpc-agent", push: { allow: ["127.0.0.1"] }, ...opts })
  t.teardown(() => app.close())
  await app.ready()
  const address = await app.toolnexusGrpc.listen("127.0.0.1:0", tls && { tls })
  // Over TLS the client dials the name the certificate gives (a TLS server name may not be an IP address).
  const sdk = await sdkFor(app, tls ? address.replace("127.0.0.1", "localhost") : address, tls && grpc.credentials.createSsl(Buffer.from(tls.cert)))
  return { app, address, sdk, lines, ...model }
}

/** The official client over gRPC, from the plugin's card with its interfaces pointed at `address` (the card's own GRPC entry is wired elsewhere). */
async function sdkFor(app: FastifyInstance | SecureFastifyInstance, address: string, credentials?: grpc.ChannelCredentials): Promise<Client> {
  const card = (await app.inject({ url: "/.well-known/agent-card.json", headers: { "a2a-version": "1.0" } })).json()
  card.supportedInterfaces = [{ url: address, protocolBinding: "GRPC", protocolVersion: "1.0" }]
  return new ClientFactory({ transports: [new GrpcTransportFactory(credentials && { grpcChannelCredentials: credentials })] }).createFromAgentCard(AgentCard.fromJSON(card))
}

const say = (text: string, extra: Record<string, unknown> = {}) => SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] }, ...extra })
const stateOf = (payload: any) => TaskState[payload.value.status.state]
const HOOK = "http://127.0.0.1:9/hook"

/** Reads a stream to its end: each event as "task:STATE", "status:STATE" or its case; `each` sees them as they come. */
async function readStream(stream: AsyncIterable<unknown>, each: (seen: string[]) => void = () => {}): Promise<string[]> {
  const seen: string[] = []
  for await (const event of stream) {
    const payload = (event as any).payload
    seen.push(payload.$case === "task" ? `task:${stateOf(payload)}` : payload.$case === "statusUpdate" ? `status:${stateOf(payload)}` : payload.$case)
    each(seen)
  }
  return seen
}

t.test("official SDK over gRPC: blocking send, returnImmediately, get with historyLength, list with paging and filters", async (t) => {
  const { sdk } = await grpcAgent(t)
  await sendAndGet(t, sdk)

  const contextId = "ctx-grpc"
  const ids: string[] = []
  for (let i = 0; i < 3; i++) ids.push(((await sdk.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: `l-${i}`, contextId, role: "ROLE_USER", parts: [{ text: `n${i}` }] } }))) as any).id)
  const seen: string[] = []
  let pageToken = ""
  do {
    const page = await sdk.listTasks(ListTasksRequest.fromJSON({ contextId, pageSize: 2, pageToken }))
    t.equal(page.totalSize, 3)
    seen.push(...page.tasks.map((task) => task.id))
    pageToken = page.nextPageToken
  } while (pageToken)
  t.same(seen.sort(), [...ids].sort(), "the pages hold each task of the context once")
  const completed = await sdk.listTasks(ListTasksRequest.fromJSON({ status: "TASK_STATE_COMPLETED", includeArtifacts: true, statusTimestampAfter: "2020-01-01T00:00:00Z" }))
  t.equal(completed.totalSize, 5)
  t.ok(completed.tasks.every((task) => task.artifacts.length === 1), "includeArtifacts brings the artifacts")
})

t.test("official SDK over gRPC: a server stream per SendStreamingMessage and SubscribeToTask", async (t) => {
  const { sdk, gates } = await grpcAgent(t)
  t.same(await readStream(sdk.sendMessageStream(say("stream me"))), ["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "artifactUpdate", "status:TASK_STATE_COMPLETED"], "the call ends at completion")

  const pending = (await sdk.sendMessage(say("wait to subscribe", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => gates.has("wait to subscribe"))
  const subscribed = await readStream(sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: pending.id })), (seen) => {
    if (seen.length === 1) gates.get("wait to subscribe")!.resolve("released")
  })
  t.same(subscribed, ["task:TASK_STATE_WORKING", "artifactUpdate", "status:TASK_STATE_COMPLETED"])
  await t.rejects(readStream(sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: pending.id }))), UnsupportedOperationError, "a finished task takes no subscription")
  await t.rejects(readStream(sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: "no-such-task" }))), { name: "TaskNotFoundError", status: grpc.status.NOT_FOUND })
})

t.test("official SDK over gRPC: cancel stops a running task; a second cancel is FAILED_PRECONDITION", async (t) => {
  const { sdk, signals } = await grpcAgent(t)
  const running = (await sdk.sendMessage(say("wait for cancel", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => signals.length === 1)
  const canceled = (await sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id }))) as any
  t.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED)
  t.equal(signals[0].aborted, true, "the model request saw the abort")
  await t.rejects(sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id })), { name: "TaskNotCancelableError", status: grpc.status.FAILED_PRECONDITION })
  await t.rejects(sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id })), TaskNotCancelableError)
})

t.test("official SDK over gRPC: create, get, list and delete push configs", async (t) => {
  const { sdk } = await grpcAgent(t)
  const { taskId } = await pushConfigRoundTrip(t, sdk, HOOK)
  await t.rejects(
    sdk.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId, url: "http://10.0.0.1/hook" })),
    { name: "RequestMalformedError", status: grpc.status.INVALID_ARGUMENT },
    "the SSRF guard holds on gRPC too",
  )
})

t.test("errors are gRPC statuses whose grpc-status-details-bin holds the ErrorInfo (and a BadRequest naming the field)", async (t) => {
  const { sdk, lines } = await grpcAgent(t)
  const missing = await sdk.getTask(GetTaskRequest.fromJSON({ id: "no-such-task" })).catch((err: unknown) => err as any)
  t.ok(missing instanceof TaskNotFoundError, "the SDK reads TASK_NOT_FOUND")
  t.equal(missing.status, grpc.status.NOT_FOUND)
  t.same(missing.metadata, { taskId: "no-such-task" })
  t.match(missing.message, /Task not found: no-such-task/)
  t.match(decodeStatusDetails(missing.statusDetailsBin), {
    code: grpc.status.NOT_FOUND,
    message: "Task not found: no-such-task",
    errorInfo: { reason: "TASK_NOT_FOUND", domain: "a2a-protocol.org", metadata: { taskId: "no-such-task" } },
  })

  // No parts: proto3 sends no empty list, so the message arrives without the field.
  const noParts = SendMessageRequest.fromJSON({ message: { messageId: "m-empty", role: "ROLE_USER", parts: [] } })
  const invalid = await sdk.sendMessage(noParts).catch((err: unknown) => err as any)
  t.ok(invalid instanceof RequestMalformedError, "INVALID_PARAMS")
  t.equal(invalid.status, grpc.status.INVALID_ARGUMENT)
  t.equal(invalid.metadata.field, "params.message.parts", "the ErrorInfo names the field")
  t.match(decodeStatusDetails(invalid.statusDetailsBin).fieldViolations, [{ field: "params.message.parts", description: /params\.message\.parts is required/ }])

  t.match(
    lines.filter((line) => line.binding === "grpc" && line.msg === "a2a request"),
    [
      { method: "GetTask", taskId: "no-such-task", version: "1.0", outcome: -32001, status: "NOT_FOUND", durationMs: Number, reqId: /^grpc-\d+$/ },
      { method: "SendMessage", outcome: -32602, status: "INVALID_ARGUMENT" },
    ],
    "one log line per call, with the JSON-RPC route's fields",
  )
})

/** One unary call with a raw grpc-js client: what the SDK would not send (a version, bytes that are no message). */
async function rawCall(address: string, method: string, request: Uint8Array, metadata: Record<string, string> | grpc.Metadata = {}): Promise<{ error?: grpc.ServiceError; response?: Buffer }> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure())
  let md = metadata
  if (!(md instanceof grpc.Metadata)) {
    md = new grpc.Metadata()
    for (const [key, value] of Object.entries(metadata)) md.set(key, value)
  }
  try {
    return await new Promise((resolve) => {
      client.makeUnaryRequest(`/lf.a2a.v1.A2AService/${method}`, (bytes: Buffer) => bytes, (bytes: Buffer) => bytes, Buffer.from(request), md, (error, response) =>
        resolve(error ? { error } : { response }),
      )
    })
  } finally {
    client.close()
  }
}

const encoded = (name: string, value: Record<string, unknown>) => messageType(name).encode(value).finish()
const reasonOf = (error: grpc.ServiceError | undefined) => decodeStatusDetails(error!.metadata.get(STATUS_DETAILS_KEY)[0] as Buffer).errorInfo?.reason

t.test("a raw gRPC peer: a2a-version 1.0 or none is served, 0.3 and others refused; bad bytes and bad fields are INVALID_ARGUMENT", async (t) => {
  const { address, sdk } = await grpcAgent(t)
  const task = (await sdk.sendMessage(say("hi"))) as any
  const get = encoded("GetTaskRequest", { id: task.id })
  const answered = await rawCall(address, "GetTask", get)
  t.equal(toProtoJson(messageType("Task"), messageType("Task").decode(answered.response!)).id, task.id, "no a2a-version: 1.0, the only version of this service")
  t.ok((await rawCall(address, "GetTask", get, { "a2a-version": "1.0.2" })).response, "a patch version is 1.0")
  for (const version of ["0.3", "2.0"]) {
    const { error } = await rawCall(address, "GetTask", get, { "a2a-version": version })
    t.equal(error?.code, grpc.status.FAILED_PRECONDITION, `a2a-version ${version}`)
    t.equal(reasonOf(error), "VERSION_NOT_SUPPORTED")
    t.match(error?.details, /send a2a-version: 1\.0/, `a2a-version ${version}: says what to send`)
    t.notMatch(error?.details, /or 0\.3/, `a2a-version ${version}: never offers 0.3, which gRPC refuses`)
  }
  const garbage = await rawCall(address, "GetTask", Buffer.from([0xff, 0xff, 0xff]))
  t.equal(garbage.error?.code, grpc.status.INVALID_ARGUMENT)
  t.equal(reasonOf(garbage.error), "PARSE_ERROR")
  t.match(garbage.error?.details, /not a valid GetTaskRequest message/)
  const farFuture = await rawCall(address, "ListTasks", encoded("ListTasksRequest", { status_timestamp_after: { seconds: 253_402_300_800 } }))
  t.equal(farFuture.error?.code, grpc.status.INVALID_ARGUMENT)
  t.match(decodeStatusDetails(farFuture.error!.metadata.get(STATUS_DETAILS_KEY)[0] as Buffer), { errorInfo: { reason: "INVALID_PARAMS", metadata: { field: "params.statusTimestampAfter" } } })
  const extended = await rawCall(address, "GetExtendedAgentCard", encoded("GetExtendedAgentCardRequest", {}))
  t.equal(extended.error?.code, grpc.status.FAILED_PRECONDITION, "no extended card: UNSUPPORTED_OPERATION")
  const deleted = await rawCall(address, "DeleteTaskPushNotificationConfig", encoded("DeleteTaskPushNotificationConfigRequest", { task_id: task.id, id: "none" }))
  t.same(deleted.response, Buffer.alloc(0), "DeleteTaskPushNotificationConfig answers an Empty")
})

t.test("a request message larger than bodyLimit is RESOURCE_EXHAUSTED", async (t) => {
  const { address } = await grpcAgent(t, { bodyLimit: 1024 })
  const big = await rawCall(address, "SendMessage", encoded("SendMessageRequest", { message: { message_id: "m", role: 1, parts: [{ text: "x".repeat(2000) }] } }))
  t.equal(big.error?.code, grpc.status.RESOURCE_EXHAUSTED)
})

t.test("auth: the same tokens as the HTTP routes, from authorization or x-api-key metadata; none is UNAUTHENTICATED", async (t) => {
  const alice = "alice-secret-0123456789"
  const bob = "bob-secret-0123456789ab"
  const { sdk, address, lines } = await grpcAgent(t, { auth: { tokens: { [alice]: "alice", [bob]: "bob" } } })
  const refused = await sdk.getTask(GetTaskRequest.fromJSON({ id: "any" })).catch((err: unknown) => err as any)
  t.equal(refused.status, grpc.status.UNAUTHENTICATED)
  t.match(lines.find((line) => line.msg === "a2a request refused"), { binding: "grpc", method: "GetTask", status: "UNAUTHENTICATED", outcome: "UNAUTHENTICATED" })
  t.notOk(JSON.stringify(lines).includes(alice), "no credential is logged")

  const asAlice = { serviceParameters: { authorization: `Bearer ${alice}` } }
  const task = (await sdk.sendMessage(say("mine"), asAlice)) as any
  t.equal(task.status.state, TaskState.TASK_STATE_COMPLETED)
  t.equal(((await sdk.getTask(GetTaskRequest.fromJSON({ id: task.id }), { serviceParameters: { "x-api-key": alice } })) as any).id, task.id, "x-api-key works too")
  await t.rejects(sdk.getTask(GetTaskRequest.fromJSON({ id: task.id }), { serviceParameters: { authorization: `Bearer ${bob}` } }), TaskNotFoundError, "another principal's task is not found")
  t.equal((await rawCall(address, "GetTask", encoded("GetTaskRequest", { id: task.id }), { authorization: "Bearer wrong-token-0123456789" })).error?.code, grpc.status.UNAUTHENTICATED)
})

t.test("auth: a host's verify() gets the gRPC call as a request (headers, ip, url); a throwing verify refuses", async (t) => {
  const seen: any[] = []
  const verify = (request: any) => {
    seen.push(request)
    if (request.headers["x-user"] === "boom") throw new Error("verify failed")
    return request.headers["x-user"] === "carol" ? "carol" : undefined
  }
  const { address, lines } = await grpcAgent(t, { auth: { verify } })
  const get = encoded("GetTaskRequest", { id: "missing" })
  const carol = new grpc.Metadata()
  carol.set("x-user", "carol")
  carol.add("x-tag", "a")
  carol.add("x-tag", "b")
  carol.set("x-trace-bin", Buffer.from([1, 2]))
  t.equal((await rawCall(address, "GetTask", get, carol)).error?.code, grpc.status.NOT_FOUND, "carol is let in")
  t.match(seen[0], { binding: "grpc", method: "POST", url: "/lf.a2a.v1.A2AService/GetTask", ip: "127.0.0.1", headers: { "x-user": "carol", "x-tag": "a, b" } })
  t.notOk("x-trace-bin" in seen[0].headers, "binary metadata is no header")
  t.equal((await rawCall(address, "GetTask", get, { "x-user": "dave" })).error?.code, grpc.status.UNAUTHENTICATED)
  t.equal((await rawCall(address, "GetTask", get, { "x-user": "boom" })).error?.code, grpc.status.UNAUTHENTICATED)
  t.match(lines.find((line) => line.msg === "opts.auth.verify threw"), { binding: "grpc", err: { message: "verify failed" } })
})

t.test("across bindings: a Task created over gRPC is read over JSON-RPC, canceled over gRPC, seen canceled over JSON-RPC", async (t) => {
  const { app, sdk, signals } = await grpcAgent(t)
  const created = (await sdk.sendMessage(say("wait across bindings", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => signals.length === 1)
  const read = (await injectRpc(app, rpc("GetTask", { id: created.id }), { "a2a-version": "1.0" })).json()
  t.match(read.result, { id: created.id, contextId: created.contextId, status: { state: "TASK_STATE_WORKING" } })
  t.same(read.result.history[0].parts, [{ text: "wait across bindings" }])
  const canceled = (await sdk.cancelTask(CancelTaskRequest.fromJSON({ id: created.id }))) as any
  t.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED)
  t.equal((await injectRpc(app, rpc("GetTask", { id: created.id }), { "a2a-version": "1.0" })).json().result.status.state, "TASK_STATE_CANCELED")
  const viaGrpc = (await sdk.getTask(GetTaskRequest.fromJSON({ id: created.id }))) as any
  const viaRpc = (await injectRpc(app, rpc("GetTask", { id: created.id }), { "a2a-version": "1.0" })).json().result
  t.same(viaGrpc.status.timestamp, viaRpc.status.timestamp, "the same Task on both")
})

t.test("a stream ends when its peer cancels the call (the slot is given back), and when the app closes", async (t) => {
  const { app, sdk, gates, lines } = await grpcAgent(t, { shutdownGraceMs: 0, maxStreamsPerPrincipal: 1 })
  const cancel = new AbortController()
  const first = readStream(sdk.sendMessageStream(say("wait one"), { signal: cancel.signal }), (seen) => {
    if (seen.length === 2) cancel.abort()
  })
  await t.rejects(first, "the canceled call ends the client's read")
  await waitFor(() => lines.some((line) => line.method === "SendStreamingMessage" && line.msg === "a2a request"), 15_000, "the server's end of the stream")
  t.ok(gates.has("wait one"), "the task goes on")

  let opened!: () => void
  const open = new Promise<void>((resolve) => (opened = resolve))
  const second = readStream(sdk.sendMessageStream(say("wait two")), (seen) => seen.length === 2 && opened()).catch((err: unknown) => err as any)
  await open // the one slot was given back: a second stream opens
  await app.close()
  // Within the grace (0 here) the running task is failed, and its stream ends on that final status, as on JSON-RPC.
  t.same(await second, ["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "status:TASK_STATE_FAILED"], "the close ended the open stream")
})

t.test("a stream past the stream caps is refused RESOURCE_EXHAUSTED, saying which cap", async (t) => {
  const { sdk, lines } = await grpcAgent(t, { shutdownGraceMs: 0, maxStreamsPerPrincipal: 1 })
  let opened!: () => void
  const open = new Promise<void>((resolve) => (opened = resolve))
  const cancel = new AbortController()
  const first = readStream(sdk.sendMessageStream(say("wait held"), { signal: cancel.signal }), (seen) => seen.length === 2 && opened()).catch(() => [])
  await open
  const refused = await readStream(sdk.sendMessageStream(say("wait refused"))).then(
    () => undefined,
    (err: unknown) => err as Error & { code?: unknown },
  )
  t.match(refused?.message, /maxStreamsPerPrincipal \(1\)/, "the message names the cap")
  t.match(refused?.message, /sendStreamingMessage: 8 /, "the status is RESOURCE_EXHAUSTED (8)")
  await waitFor(() => lines.some((entry) => entry.method === "SendStreamingMessage" && entry.status === "RESOURCE_EXHAUSTED"), 15_000, "the refusal's log line")
  cancel.abort()
  await first
})

t.test("TLS: the same certificate serves gRPC; a plaintext client is not answered", async (t) => {
  const { cert, key } = selfSignedCertificate(t)
  const { app, sdk, address } = await grpcAgent(t, {}, { key, cert })
  t.equal(((await sdk.sendMessage(say("secure"))) as any).status.state, TaskState.TASK_STATE_COMPLETED)
  // An encrypted key and its passphrase, as serve()'s https option takes them.
  const passphrase = "correct horse"
  const encryptedKey = createPrivateKey(key).export({ type: "pkcs8", format: "pem", cipher: "aes-256-cbc", passphrase }) as string
  const secondAddress = await app.toolnexusGrpc.listen("127.0.0.1:0", { tls: { key: encryptedKey, cert, passphrase } })
  const second = await sdkFor(app, secondAddress.replace("127.0.0.1", "localhost"), grpc.credentials.createSsl(Buffer.from(cert)))
  t.equal(((await second.getTask(GetTaskRequest.fromJSON({ id: ((await sdk.sendMessage(say("again"))) as any).id }))) as any).status.state, TaskState.TASK_STATE_COMPLETED, "an encrypted key with its passphrase")
  const plain = new grpc.Client(address, grpc.credentials.createInsecure())
  t.teardown(() => plain.close())
  const error = await new Promise<grpc.ServiceError>((resolve) =>
    plain.makeUnaryRequest("/lf.a2a.v1.A2AService/GetTask", (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), new grpc.Metadata(), { deadline: Date.now() + 3000 }, (err) => resolve(err!)),
  )
  t.ok(error.code === grpc.status.UNAVAILABLE || error.code === grpc.status.DEADLINE_EXCEEDED, `refused: ${error.code}`)
})

t.test("the decorator: listen before the app is ready is refused; addresses lists what was bound; a bad address names itself", async (t) => {
  const app = Fastify()
  await app.register(toolnexusA2A, { client: createLocalClient(() => "x") })
  t.teardown(() => app.close())
  await t.rejects(app.toolnexusGrpc.listen("127.0.0.1:0"), /after await app.ready\(\)/)
  await app.ready()
  await t.rejects(app.toolnexusGrpc.listen("nowhere"), { name: "TypeError", message: /"nowhere" should be "host:port"/ })
  const first = await app.toolnexusGrpc.listen("127.0.0.1:0")
  const second = await app.toolnexusGrpc.listen(":0")
  t.match(first, /^127\.0\.0\.1:\d+$/)
  t.match(second, /^127\.0\.0\.1:\d+$/, "no host: 127.0.0.1")
  t.same(app.toolnexusGrpc.addresses, [first, second])
  const taken = net.createServer()
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
  t.teardown(() => taken.close())
  const busy = `127.0.0.1:${(taken.address() as net.AddressInfo).port}`
  grpc.setLogVerbosity(grpc.logVerbosity.NONE) // grpc-js would also print the failed bind on stderr
  t.teardown(() => grpc.setLogVerbosity(grpc.logVerbosity.ERROR))
  await t.rejects(app.toolnexusGrpc.listen(busy), { message: `toolnexus: gRPC could not listen on ${busy}: No address added out of total 1 resolved` }, "a port in use")
  t.same(splitAddress("[::1]:50051"), { host: "[::1]", port: 50051 })
  t.throws(() => splitAddress(50051 as never), /should be "host:port"/)
  t.throws(() => splitAddress("127.0.0.1:70000"), /port 0-65535/)
})

t.test("last-event-id metadata reaches SubscribeToTask; an answer that cannot be encoded is INTERNAL, logged in full", async (t) => {
  const store = new InMemoryTaskStore()
  // A host's store may hold what no Timestamp can say.
  await store.save({ id: "junk", contextId: "c", kind: "task", status: { state: "completed", timestamp: "last tuesday" } })
  await store.save({ id: "junk-working", contextId: "c", kind: "task", status: { state: "working", timestamp: "last tuesday" } })
  const { sdk, lines } = await grpcAgent(t, { store, recoverInterrupted: false })
  const resumed = await readStream(sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: "junk" }), { serviceParameters: { "last-event-id": "soon" } })).catch((err: unknown) => err as any)
  t.equal(resumed.status, grpc.status.INVALID_ARGUMENT)
  t.equal(resumed.metadata.field, "Last-Event-ID", "the operation read the metadata")
  const junk = await sdk.getTask(GetTaskRequest.fromJSON({ id: "junk" })).catch((err: unknown) => err as any)
  t.equal(junk.status, grpc.status.INTERNAL)
  t.match(junk.message, /could not encode its answer/)
  t.match(lines.find((line) => line.msg === "grpc answer could not be encoded"), { binding: "grpc", method: "GetTask", err: { message: /status\.timestamp should be an RFC 3339 date-time/ } })
  const followed = await readStream(sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: "junk-working" }))).catch((err: unknown) => err as any)
  t.equal(followed.status, grpc.status.INTERNAL, "a stream event that cannot be encoded ends the stream INTERNAL")
  t.match(lines.filter((line) => line.msg === "grpc answer could not be encoded").at(-1), { method: "SubscribeToTask", err: { message: /task\.status\.timestamp/ } })
})

t.test("a stream whose reader falls 10000 events behind is ended RESOURCE_EXHAUSTED, after waiting on the peer's flow control", async (t) => {
  const CHUNKS = 12_000
  const client = createLocalClient(async function* () {
    for (let i = 0; i < CHUNKS; i++) yield `${i} `
  })
  const { sdk, lines } = await grpcAgent(t, { client })
  const stream = sdk.sendMessageStream(say("flood"))[Symbol.asyncIterator]()
  t.equal(((await stream.next()).value as any).payload.$case, "task", "the first event; then the peer reads nothing")
  await waitFor(() => lines.some((line) => line.msg === "a2a stream reader fell too far behind; its call was ended"), 20_000, "the cut-off")
  let read = 1
  const ended = await (async () => {
    for (let next = await stream.next(); !next.done; next = await stream.next()) read++
  })().catch((err: unknown) => err as any)
  t.equal(ended.status, grpc.status.RESOURCE_EXHAUSTED)
  t.ok(read < CHUNKS, `the peer got what was on its way (${read} events), not the rest`)
  t.match(lines.find((line) => line.method === "SendStreamingMessage" && line.msg === "a2a request"), { status: "RESOURCE_EXHAUSTED", outcome: "RESOURCE_EXHAUSTED", stream: true })
})

t.test("A2AGrpcServer alone (no Fastify): close() ends open streams and is idempotent; the host's closing signal ends them too", async (t) => {
  const log = memoryLogger()
  const store = new InMemoryTaskStore()
  const gate = deferred<string>()
  const events = new TaskEvents()
  const runner = new TaskRunner({ store, client: createLocalClient(() => gate.promise), log, events })
  const operations = new A2AOperations({ store, runner, events, follower: new StoreFollower({ store, runner, log }) })
  t.teardown(async () => {
    gate.resolve("done")
    await runner.stop(0)
  })
  const connect = async (server: A2AGrpcServer) => {
    const url = await server.listen("127.0.0.1:0")
    const card = { name: "alone", description: "", version: "1", supportedInterfaces: [{ url, protocolBinding: "GRPC", protocolVersion: "1.0" }], capabilities: { streaming: true }, defaultInputModes: [], defaultOutputModes: [], skills: [] }
    return new ClientFactory({ transports: [new GrpcTransportFactory()] }).createFromAgentCard(AgentCard.fromJSON(card))
  }
  /** A stream of a task that waits: `opened` once the task and its working status came, `ended` with how the call ended. */
  const waitingStream = (sdk: Client, text: string) => {
    let opened!: () => void
    const open = new Promise<void>((resolve) => (opened = resolve))
    const ended = readStream(sdk.sendMessageStream(say(text)), (seen) => seen.length === 2 && opened()).catch((err: unknown) => err as any)
    return { open, ended }
  }

  const alone = new A2AGrpcServer({ operations, log })
  const first = waitingStream(await connect(alone), "wait alone")
  await first.open
  await Promise.all([alone.close(), alone.close()])
  t.equal((await first.ended).status, grpc.status.UNAVAILABLE, "close() ended the stream")
  t.match((await first.ended).message, /shutting down/)

  const closing = new AbortController()
  const hosted = new A2AGrpcServer({ operations, log, closing: closing.signal })
  t.teardown(() => hosted.close())
  const sdk = await connect(hosted)
  const second = waitingStream(sdk, "wait hosted")
  await second.open
  closing.abort()
  t.equal((await second.ended).status, grpc.status.UNAVAILABLE, "the closing signal ended the stream")
  const tasksBefore = (await store.list({})).totalSize
  const late = await readStream(sdk.sendMessageStream(say("wait late"))).catch((err: unknown) => err as any)
  t.equal(late.status, grpc.status.UNAVAILABLE, "a stream opened while the host closes ends at once")
  t.equal((await store.list({})).totalSize, tasksBefore, "and starts no task")
  t.match(
    log.lines.filter((line) => line.msg === "a2a request"),
    [{ binding: "grpc", method: "SendStreamingMessage", stream: true, status: "UNAVAILABLE" }, { status: "UNAVAILABLE" }, { status: "UNAVAILABLE" }],
  )

  // A failure in the binding itself (here its logger) is logged and answered INTERNAL: the call does not hang, the process goes on.
  const failing = { ...log, child: () => { throw new Error("no logger today") } }
  const broken = new A2AGrpcServer({ operations, log: failing })
  t.teardown(() => broken.close())
  const brokenSdk = await connect(broken)
  t.match(await brokenSdk.getTask(GetTaskRequest.fromJSON({ id: "x" })).catch((err: unknown) => err as any), { status: grpc.status.INTERNAL, message: /Internal error in GetTask/ })
  t.match(await readStream(brokenSdk.sendMessageStream(say("x"))).catch((err: unknown) => err as any), { status: grpc.status.INTERNAL })
  t.match(log.lines.filter((line) => line.msg === "grpc call failed"), [{ method: "GetTask", err: { message: "no logger today" } }, { method: "SendStreamingMessage" }])
})

// ---------------------------------------------------------------------------
// serve() and the toolnexus command

t.test("serve(addr, { grpc }): gRPC on its own address, with https's certificate; a bad address is refused before anything listens", async (t) => {
  const { cert, key } = selfSignedCertificate(t)
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "served"), logger: false, https: { key, cert }, grpc: "127.0.0.1:0" })
  t.teardown(() => srv.stop())
  t.match(srv.grpc, /^127\.0\.0\.1:\d+$/)
  t.not(srv.grpc, new URL(srv.url).host, "an address of its own")
  const sdk = await sdkFor(srv.app, srv.grpc!.replace("127.0.0.1", "localhost"), grpc.credentials.createSsl(Buffer.from(cert)))
  t.equal(((await sdk.sendMessage(say("hi"))) as any).status.state, TaskState.TASK_STATE_COMPLETED, "over TLS, with the HTTPS certificate")
  const plain = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false })
  t.teardown(() => plain.stop())
  t.notOk("grpc" in plain, "no grpc option: no gRPC")
  await t.rejects(serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false, grpc: "50051" }), { name: "TypeError", message: /gRPC address "50051" should be "host:port"/ })
})

t.test("parseCli: --grpc HOST:PORT (or TOOLNEXUS_GRPC), checked", async (t) => {
  t.equal((parseCli(["--grpc", "127.0.0.1:50051"], {}) as any).grpc, "127.0.0.1:50051")
  t.equal((parseCli([], { TOOLNEXUS_GRPC: "[::1]:0" }) as any).grpc, "[::1]:0")
  t.notOk("grpc" in (parseCli([], {}) as object), "absent: no gRPC")
  t.throws(() => parseCli(["--grpc", "everywhere"], {}), { message: '--grpc should be HOST:PORT with a port 0-65535, e.g. 127.0.0.1:50051, got "everywhere"' })
  t.match(USAGE, /--grpc HOST:PORT .*\n.*TOOLNEXUS_GRPC; default: no gRPC/)
})

t.test("the toolnexus command serves gRPC with --grpc: the start-up line gives its address", async (t) => {
  const { lines } = await startCli(t, ["--port", "0", "--store", "memory", "--grpc", "127.0.0.1:0"])
  const address = String(lines.find((line) => line.msg === "toolnexus agent listening")?.grpc)
  t.match(address, /^127\.0\.0\.1:\d+$/)
  const sent = await rawCall(address, "SendMessage", encoded("SendMessageRequest", { message: { message_id: "m", role: 1, parts: [{ text: "hello" }] } }))
  const answer = toProtoJson(messageType("SendMessageResponse"), messageType("SendMessageResponse").decode(sent.response!)) as any
  t.equal(answer.task.status.state, "TASK_STATE_COMPLETED")
  t.same(answer.task.artifacts[0].parts, [{ text: "echo: hello" }], "the offline echo agent, over gRPC")
})
