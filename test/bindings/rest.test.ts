import { Writable } from "node:stream"
import { CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest, ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig, TaskState } from "@a2a-js/sdk"
import { Client, ClientFactory, RestTransportFactory, TenantTransportDecorator } from "@a2a-js/sdk/client"
import { LegacyRestTransport } from "@a2a-js/sdk/compat/v0_3/client"
import { TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError } from "@a2a-js/sdk/errors"
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from "fastify"
import { pino } from "pino"
import t, { type Test } from "tap"
import { A2AError, ErrorCode } from "../../lib/a2a/errors.js"
import type { A2AOperations, CallContext, OperationName } from "../../lib/a2a/operations.js"
import { REST_ROUTES, RestBinding } from "../../lib/a2a/rest.js"
import { createLocalClient, type ModelFunction } from "../../lib/client/client.js"
import { toolnexusA2A, type ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { fastifyPaths } from "../../plugins/rest-routes.js"
import { serve } from "../../plugins/serve.js"
import { a2aApp, callRpc, deferred, memoryLogger, readSse, rpc, waitFor } from "../fixtures/helpers.js"

/**
 * The HTTP+JSON (REST) binding: every route over a real socket and through
 * inject, its errors as google.rpc.Status, the official SDK's REST
 * transports (1.x, and its 0.3 compatibility client), and a Task moving
 * between REST and JSON-RPC.
 */

const V1 = { "a2a-version": "1.0" }
const HOOK = "http://127.0.0.1:9/hook"

/** The model: "echo: <prompt>"; a prompt starting "wait" waits on a gate; one starting "ask" asks back (input-required). */
function model() {
  const gates = new Map<string, ReturnType<typeof deferred<string>>>()
  const respond: ModelFunction = ({ messages, signal }) => {
    const prompt = messages.at(-1)?.content ?? ""
    if (prompt.startsWith("ask")) return { text: "which one?", inputRequired: true }
    if (!prompt.startsWith("wait")) return `echo: ${prompt}`
    const gate = deferred<string>()
    gates.set(prompt, gate)
    signal?.addEventListener("abort", () => gate.reject(signal.reason))
    return gate.promise
  }
  return { respond, gates }
}

const agentOptions = (respond: ModelFunction, extra: Partial<ToolnexusA2AOptions> = {}): ToolnexusA2AOptions => ({
  client: createLocalClient(respond),
  name: "rest",
  push: { allow: ["127.0.0.1"] },
  ...extra,
})

async function listening(t: Test, extra: Partial<ToolnexusA2AOptions> = {}) {
  const m = model()
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(m.respond), a2a: { ...agentOptions(m.respond), ...extra }, logger: false })
  t.teardown(() => srv.stop())
  return { srv, http: overFetch(srv.url), ...m }
}

interface Answer {
  status: number
  headers: Record<string, string | undefined>
  text: string
  json(): any
}

type Http = (method: string, path: string, opts?: { body?: unknown; headers?: Record<string, string> }) => Promise<Answer>

/** Requests over a real socket. */
const overFetch =
  (url: string): Http =>
  async (method, path, { body, headers = {} } = {}) => {
    const res = await fetch(url + path, {
      method,
      headers: { ...(body !== undefined && { "content-type": "application/json" }), ...headers },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    })
    const text = await res.text()
    return { status: res.status, headers: Object.fromEntries(res.headers), text, json: () => JSON.parse(text) }
  }

/** The same requests through Fastify's inject. */
const overInject =
  (app: FastifyInstance): Http =>
  async (method, path, { body, headers = {} } = {}) => {
    const res = await app.inject({
      method: method as "GET",
      url: path,
      headers: { ...(body !== undefined && { "content-type": "application/json" }), ...headers },
      ...(body !== undefined && { payload: typeof body === "string" ? body : JSON.stringify(body) }),
    })
    return { status: res.statusCode, headers: res.headers as Record<string, string>, text: res.body, json: () => JSON.parse(res.body) }
  }

/** A server-sent event stream's events: `id:`, `event:` and `data:` (as JSON) of each; comments left out. */
function events(text: string): Array<{ id?: number; event?: string; data: any }> {
  return text
    .split("\n\n")
    .filter((block) => block !== "" && !block.startsWith(":"))
    .map((block) => {
      const out: { id?: number; event?: string; data: any } = { data: undefined }
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) out.id = Number(line.slice(4))
        else if (line.startsWith("event: ")) out.event = line.slice(7)
        else if (line.startsWith("data: ")) out.data = JSON.parse(line.slice(6))
      }
      return out
    })
}

const kind = (data: any) => (data.statusUpdate ? `status:${data.statusUpdate.status.state}` : Object.keys(data)[0])

const message = (text: string, extra: Record<string, unknown> = {}) => ({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }], ...extra } })

/** google.rpc.Status as §11.6 has it, with the ErrorInfo the spec requires. */
function assertStatus(t: Test, answer: Answer, http: number, status: string, reason: string, metadata: Record<string, string> = {}) {
  t.equal(answer.status, http, `HTTP ${http}`)
  t.match(answer.headers["content-type"], /^application\/a2a\+json/)
  const body = answer.json()
  t.match(body, { error: { code: http, status, message: String } })
  t.match(body.error.details[0], { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "a2a-protocol.org", metadata })
  return body.error
}

/** Every 1.0 route once, as a peer calls it; the same walk runs over a socket and through inject. */
async function walkRoutes(t: Test, http: Http, prefix = "") {
  const contextId = `ctx${prefix.replace("/", "-")}`
  const sent = await http("POST", `${prefix}/message:send`, { body: message("hello", { contextId }), headers: V1 })
  t.equal(sent.status, 200)
  t.match(sent.headers["content-type"], /^application\/a2a\+json/, "answers application/a2a+json")
  const task = sent.json().task
  t.equal(task.status.state, "TASK_STATE_COMPLETED", "SendMessage: the 1.0 SendMessageResponse, blocking")
  t.same(task.artifacts[0].parts, [{ text: "echo: hello" }])

  const got = await http("GET", `${prefix}/tasks/${task.id}?historyLength=1`, { headers: V1 })
  t.equal(got.status, 200)
  t.match(got.json(), { id: task.id, status: { state: "TASK_STATE_COMPLETED" } }, "GetTask: the Task itself")
  t.equal(got.json().history.length, 1, "historyLength from the query")

  const listed = await http("GET", `${prefix}/tasks?contextId=${contextId}&status=TASK_STATE_COMPLETED&pageSize=5&includeArtifacts=true`, { headers: V1 })
  t.match(listed.json(), { tasks: [{ id: task.id, artifacts: [{ parts: [{ text: "echo: hello" }] }] }], nextPageToken: "", totalSize: 1 }, "ListTasks, camelCase query")

  const streamed = await http("POST", `${prefix}/message:stream`, { body: message("stream me"), headers: V1 })
  t.equal(streamed.status, 200)
  t.match(streamed.headers["content-type"], /^text\/event-stream/)
  const frames = events(streamed.text)
  t.same(frames.map((f) => kind(f.data)), ["task", "status:TASK_STATE_WORKING", "artifactUpdate", "status:TASK_STATE_COMPLETED"], "data: is each StreamResponse")
  t.same(
    frames.map((f) => f.id),
    [1, 2, 3, 4],
    "id: on every event, as on JSON-RPC",
  )

  // Subscribing to a Task waiting for input gives the Task and closes (it is final for now), on GET and POST alike.
  const asking = (await http("POST", `${prefix}/message:send`, { body: message("ask me"), headers: V1 })).json().task
  t.equal(asking.status.state, "TASK_STATE_INPUT_REQUIRED")
  for (const method of ["GET", "POST"]) {
    const subscribed = await http(method, `${prefix}/tasks/${asking.id}:subscribe`, { headers: V1 })
    t.same(
      events(subscribed.text).map((f) => [f.data.task?.id, f.data.task?.status.state]),
      [[asking.id, "TASK_STATE_INPUT_REQUIRED"]],
      `${method} :subscribe`,
    )
  }
  const canceled = await http("POST", `${prefix}/tasks/${asking.id}:cancel`, { headers: V1 })
  t.equal(canceled.status, 200)
  t.match(canceled.json(), { id: asking.id, status: { state: "TASK_STATE_CANCELED" } }, "CancelTask without a body")

  const configs = `${prefix}/tasks/${task.id}/pushNotificationConfigs`
  const created = await http("POST", configs, { body: { id: "hook-1", url: HOOK, token: "tok" }, headers: V1 })
  t.equal(created.status, 201)
  t.same(created.json(), { id: "hook-1", taskId: task.id, url: HOOK, token: "tok" }, "the path names the Task")
  await http("POST", configs, { body: { id: "hook-2", url: HOOK }, headers: V1 })
  t.same((await http("GET", `${configs}/hook-1`, { headers: V1 })).json(), created.json())
  const page = (await http("GET", `${configs}?pageSize=1`, { headers: V1 })).json()
  t.match(page, { configs: [{ id: "hook-1" }], nextPageToken: String })
  const next = (await http("GET", `${configs}?pageSize=1&pageToken=${encodeURIComponent(page.nextPageToken)}`, { headers: V1 })).json()
  t.match(next, { configs: [{ id: "hook-2" }], nextPageToken: "" })
  const deleted = await http("DELETE", `${configs}/hook-1`, { headers: V1 })
  t.equal(deleted.status, 204)
  t.equal(deleted.text, "")
  assertStatus(t, await http("GET", `${configs}/hook-1`, { headers: V1 }), 404, "NOT_FOUND", "TASK_NOT_FOUND")

  assertStatus(t, await http("GET", `${prefix}/extendedAgentCard`, { headers: V1 }), 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")
  return task.id as string
}

t.test("every 1.0 route over a real socket, without and with a tenant; the tenant scopes", async (t) => {
  const { http } = await listening(t)
  const plain = await walkRoutes(t, http)
  const tenanted = await walkRoutes(t, http, "/acme")
  assertStatus(t, await http("GET", `/tasks/${tenanted}`, { headers: V1 }), 404, "NOT_FOUND", "TASK_NOT_FOUND", { taskId: tenanted })
  assertStatus(t, await http("GET", `/acme/tasks/${plain}`, { headers: V1 }), 404, "NOT_FOUND", "TASK_NOT_FOUND", { taskId: plain })
  t.equal((await http("GET", "/other/tasks", { headers: V1 })).json().totalSize, 0, "another tenant lists nothing")
})

t.test("every 1.0 route through inject", async (t) => {
  const { respond } = model()
  const app = await a2aApp(t, agentOptions(respond))
  await walkRoutes(t, overInject(app))
  await walkRoutes(t, overInject(app), "/acme")
})

t.test("a stream that is followed live, and SubscribeToTask resuming after Last-Event-ID", async (t) => {
  const { srv, http, gates } = await listening(t)
  const started = (await http("POST", "/message:send", { body: { ...message("wait twice"), configuration: { returnImmediately: true } }, headers: V1 })).json().task
  await waitFor(() => gates.has("wait twice"))
  const res = await fetch(`${srv.url}/tasks/${started.id}:subscribe`, { method: "POST", headers: V1 })
  const live = readSse(res.body!)
  await waitFor(() => live.messages.length === 1)
  t.equal(live.messages[0].task.status.state, "TASK_STATE_WORKING")
  const firstId = live.ids[0]!
  gates.get("wait twice")!.resolve("released")
  await live.done
  t.same(live.messages.map(kind), ["task", "artifactUpdate", "status:TASK_STATE_COMPLETED"])

  const resumed = await http("GET", `/tasks/${started.id}:subscribe`, { headers: { ...V1, "last-event-id": String(firstId) } })
  const frames = events(resumed.text)
  t.same(frames.map((f) => kind(f.data)), ["task", "artifactUpdate", "status:TASK_STATE_COMPLETED"], "the Task, then exactly the events after that id")
  t.equal(frames[0].id, firstId, "the Task frame carries the id sent")
  t.same(frames.slice(1).map((f) => f.id), live.ids.slice(1))
  assertStatus(t, await http("GET", `/tasks/${started.id}:subscribe`, { headers: V1 }), 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")
})

t.test("errors: google.rpc.Status with the table's HTTP status, the field named", async (t) => {
  const { http } = await listening(t)
  const notFound = assertStatus(t, await http("GET", "/tasks/no-such-task", { headers: V1 }), 404, "NOT_FOUND", "TASK_NOT_FOUND", { taskId: "no-such-task" })
  t.match(notFound.message, /no-such-task/)

  const query = assertStatus(t, await http("GET", "/tasks/x?historyLength=many", { headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS", { field: "historyLength" })
  t.match(query.message, /historyLength \(a query parameter\) must be an integer/)
  t.same(query.details[1], { "@type": "type.googleapis.com/google.rpc.BadRequest", fieldViolations: [{ field: "historyLength", description: query.message }] })
  assertStatus(t, await http("GET", "/tasks?pageSize=1&pageSize=2", { headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS", { field: "pageSize" })
  assertStatus(t, await http("GET", "/tasks?includeArtifacts=perhaps", { headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS", { field: "includeArtifacts" })
  const missing = assertStatus(t, await http("POST", "/message:send", { body: {}, headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS", { field: "message" })
  t.match(missing.message, /message is required/)
  assertStatus(t, await http("POST", "/message:send", { headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS", { field: "message" })
  assertStatus(t, await http("POST", "/message:send", { body: { message: "hi" }, headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS", { field: "message" })
  assertStatus(t, await http("POST", "/message:send", { body: [1], headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS", { field: "body" })
  const deep = assertStatus(t, await http("POST", "/message:send", { body: message("x", { parts: [{ text: 5 }] }), headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS")
  t.match(deep.message, /message\.parts\[0\]\.text must be a string/, "the params check names the field inside the message")
  assertStatus(t, await http("POST", "/tasks/x/pushNotificationConfigs", { body: { token: "t" }, headers: V1 }), 400, "INVALID_ARGUMENT", "INVALID_PARAMS", { field: "url" })
  assertStatus(t, await http("POST", "/message:send", { body: "{not json", headers: V1 }), 400, "INVALID_ARGUMENT", "PARSE_ERROR")
  const typed = await http("POST", "/message:send", { body: "x", headers: { ...V1, "content-type": "text/plain" } })
  assertStatus(t, typed, 415, "INVALID_ARGUMENT", "INVALID_REQUEST")
  const a2aJson = await http("POST", "/message:send", { body: message("typed"), headers: { ...V1, "content-type": "application/a2a+json" } })
  t.equal(a2aJson.status, 200, "application/a2a+json bodies are read")

  const noVersion = assertStatus(t, await http("GET", "/tasks/x"), 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
  t.match(noVersion.message, /send A2A-Version: 1\.0, or call the 0\.3 path \/v1\/tasks\/\{id\}/)
  assertStatus(t, await http("GET", "/tasks/x", { headers: { "a2a-version": "2.0" } }), 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
  assertStatus(t, await http("POST", "/tasks/x:cancel", { headers: V1 }), 404, "NOT_FOUND", "TASK_NOT_FOUND", { taskId: "x" })
  assertStatus(t, await http("POST", "/tasks/x:subscribe", { headers: V1 }), 404, "NOT_FOUND", "TASK_NOT_FOUND")
})

t.test("errors: 401 without credentials when auth is on, 413 past the body limit", async (t) => {
  const { http } = await listening(t, { auth: { tokens: { "rest-secret-token-0123456789": "alice" } }, bodyLimit: 2000 })
  const refused = await http("GET", "/tasks", { headers: V1 })
  const error = assertStatus(t, refused, 401, "UNAUTHENTICATED", "INVALID_REQUEST")
  t.match(error.message, /^Unauthorized/)
  t.equal(refused.headers["www-authenticate"], 'Bearer realm="a2a"')
  t.equal(refused.headers.connection, "close")
  const bearer = { ...V1, authorization: "Bearer rest-secret-token-0123456789" }
  t.equal((await http("GET", "/tasks", { headers: bearer })).json().totalSize, 0, "with the token")
  assertStatus(t, await http("POST", "/message:send", { body: message("x".repeat(3000)), headers: bearer }), 413, "INVALID_ARGUMENT", "INVALID_REQUEST")
})

t.test("errors: 429 past the rate limit, which counts REST requests too", async (t) => {
  const { http } = await listening(t, { rateLimit: { max: 1, timeWindow: 60_000 } })
  t.equal((await http("GET", "/tasks", { headers: V1 })).status, 200)
  assertStatus(t, await http("GET", "/tasks", { headers: V1 }), 429, "RESOURCE_EXHAUSTED", "INVALID_REQUEST")
})

t.test("the JSON-RPC route still answers its 401 in its own form", async (t) => {
  const { srv } = await listening(t, { auth: { tokens: { "rest-secret-token-0123456789": "alice" } } })
  const res = await fetch(srv.url + "/", { method: "POST", headers: { "content-type": "application/json", ...V1 }, body: JSON.stringify(rpc("GetTask", { id: "x" })) })
  t.equal(res.status, 401)
  t.equal(res.headers.get("www-authenticate"), 'Bearer realm="a2a"')
  t.match(await res.json(), { jsonrpc: "2.0", id: null, error: { code: -32600, message: /^Unauthorized/ } })
})

t.test("which route a path reaches: the untenanted reading wins; A2A-Version picks between a 0.3 path and tenant v1", async (t) => {
  const { http } = await listening(t)
  assertStatus(t, await http("GET", "/tasks/tasks", { headers: V1 }), 404, "NOT_FOUND", "TASK_NOT_FOUND", { taskId: "tasks" })
  const inTenantTasks = await http("POST", "/tasks/message:send", { body: message("tenant named tasks"), headers: V1 })
  t.equal(inTenantTasks.status, 200, "POST /tasks/message:send is tenant \"tasks\": no Task route takes it")
  t.same(
    (await http("GET", "/tasks?tenant=tasks", { headers: V1 })).json().tasks.map((task: any) => task.id),
    [inTenantTasks.json().task.id],
    "tenant tasks lists through the query",
  )

  const plain = (await http("POST", "/message:send", { body: message("untenanted"), headers: V1 })).json().task
  const legacy = await http("GET", `/v1/tasks/${plain.id}`)
  t.equal(legacy.status, 200, "no A2A-Version: the 0.3 path")
  t.match(legacy.headers["content-type"], /^application\/json/)
  t.equal(legacy.json().status.state, "TASK_STATE_COMPLETED")
  assertStatus(t, await http("GET", `/v1/tasks/${plain.id}`, { headers: V1 }), 404, "NOT_FOUND", "TASK_NOT_FOUND")
  const inV1 = (await http("POST", "/v1/message:send", { body: message("in tenant v1"), headers: V1 })).json().task
  t.equal((await http("GET", `/v1/tasks/${inV1.id}`, { headers: V1 })).json().id, inV1.id, "A2A-Version 1.0: tenant v1")
  t.equal((await http("GET", "/v1/tasks", { headers: V1 })).json().totalSize, 1, "ListTasks of tenant v1")
  assertStatus(t, await http("GET", "/v1/card", { headers: V1 }), 404, "UNIMPLEMENTED", "METHOD_NOT_FOUND")
})

t.test("the 0.3 paths in the 0.3 binding's shapes", async (t) => {
  const { http } = await listening(t)
  const body = { message: { messageId: "legacy-1", role: "ROLE_USER", content: [{ text: "old peer" }, { data: { data: { n: 1 } } }] }, configuration: { blocking: true } }
  const sent = await http("POST", "/v1/message:send", { body })
  t.equal(sent.status, 200)
  const task = sent.json().task
  t.match(task, { status: { state: "TASK_STATE_COMPLETED" }, artifacts: [{ parts: [{ text: /^echo: old peer/ }] }] })
  t.same(task.history[0].content, [{ text: "old peer" }, { data: { data: { n: 1 } } }], "parts as the 0.3 proto's content")
  t.equal(task.history[1].role, "ROLE_AGENT")
  t.notOk("kind" in task)

  const waiting = (await http("POST", "/v1/message:send", { body: { message: { messageId: "legacy-2", role: "ROLE_USER", content: [{ text: "ask it" }] } } })).json().task
  const asked = (await http("GET", `/v1/tasks/${waiting.id}`)).json()
  t.equal(asked.id, waiting.id)
  const canceled = (await http("POST", `/v1/tasks/${waiting.id}:cancel`)).json()
  t.equal(canceled.status.state, "TASK_STATE_CANCELLED", "the 0.3 proto's spelling")

  const streamed = events((await http("POST", "/v1/message:stream", { body: { message: { messageId: "legacy-3", role: "ROLE_USER", content: [{ text: "s" }] } } })).text)
  t.same(
    streamed.map((f) => [Object.keys(f.data)[0], f.data.statusUpdate?.final]),
    [
      ["task", undefined],
      ["statusUpdate", undefined],
      ["artifactUpdate", undefined],
      ["statusUpdate", true],
    ],
  )

  const configs = `/v1/tasks/${task.id}/pushNotificationConfigs`
  const set = await http("POST", configs, { body: { name: `tasks/${task.id}/pushNotificationConfigs/old`, pushNotificationConfig: { id: "old", url: HOOK, authentication: { schemes: ["Bearer"], credentials: "c" } } } })
  t.equal(set.status, 201)
  t.same(set.json(), { name: `tasks/${task.id}/pushNotificationConfigs/old`, pushNotificationConfig: { id: "old", url: HOOK, authentication: { schemes: ["Bearer"], credentials: "c" } } })
  t.same((await http("GET", `${configs}/old`)).json(), set.json())
  t.same((await http("GET", configs)).json(), { configs: [set.json()] })
  t.equal((await http("DELETE", `${configs}/old`)).status, 204)

  const missing = await http("GET", "/v1/tasks/nope")
  t.equal(missing.status, 404)
  t.same(missing.json(), { code: -32001, message: "Task not found: nope", data: { taskId: "nope" } }, "the 0.3 binding's error object")
  const invalid = await http("POST", "/v1/message:send", { body: { message: { role: "ROLE_USER", content: [{ text: 1 }] } } })
  t.equal(invalid.status, 400)
  t.match(invalid.json(), { code: -32602, message: /Invalid params/ })
  t.match((await http("GET", "/v1/tasks/x?historyLength=lots")).json(), { code: -32602, data: { field: "historyLength" } }, "schema refusals too")
})

t.test("the official SDK 1.x client over its REST transport: send, stream, get, list, cancel, subscribe, push configs", async (t) => {
  const { srv, gates } = await listening(t)
  const card = await (await new ClientFactory().createFromUrl(srv.url)).getAgentCard()
  const sdk = new Client(await new RestTransportFactory().create(srv.url, card), card)
  t.equal(sdk.protocolVersion, "1.0")
  const say = (text: string, extra: Record<string, unknown> = {}) => SendMessageRequest.fromJSON({ ...message(text, { contextId: "sdk" }), ...extra })

  const done = (await sdk.sendMessage(say("hello"))) as any
  t.equal(done.status.state, TaskState.TASK_STATE_COMPLETED)
  t.equal(done.artifacts[0].parts[0].content.value, "echo: hello")
  const trimmed = (await sdk.getTask(GetTaskRequest.fromJSON({ id: done.id, historyLength: 1 }))) as any
  t.equal(trimmed.history.length, 1)
  const page = await sdk.listTasks(ListTasksRequest.fromJSON({ contextId: "sdk", pageSize: 10, status: "TASK_STATE_COMPLETED" }))
  t.same(
    page.tasks.map((task) => task.id),
    [done.id],
  )

  const cases: string[] = []
  for await (const event of sdk.sendMessageStream(say("stream me"))) {
    const payload = (event as any).payload
    cases.push(payload.$case === "statusUpdate" ? `status:${TaskState[payload.value.status.state]}` : payload.$case)
  }
  t.same(cases, ["task", "status:TASK_STATE_WORKING", "artifactUpdate", "status:TASK_STATE_COMPLETED"])

  const pending = (await sdk.sendMessage(say("wait for the sdk", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => gates.has("wait for the sdk"))
  const resubscribed: string[] = []
  for await (const event of sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: pending.id }))) {
    const payload = (event as any).payload
    resubscribed.push(payload.$case === "task" ? `task:${TaskState[payload.value.status.state]}` : payload.$case === "statusUpdate" ? `status:${TaskState[payload.value.status.state]}` : payload.$case)
    if (resubscribed.length === 1) gates.get("wait for the sdk")!.resolve("released")
  }
  t.same(resubscribed, ["task:TASK_STATE_WORKING", "artifactUpdate", "status:TASK_STATE_COMPLETED"])

  const running = (await sdk.sendMessage(say("wait for cancel", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => gates.has("wait for cancel"))
  const canceled = (await sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id }))) as any
  t.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED)
  await t.rejects(sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id })), TaskNotCancelableError)
  await t.rejects(sdk.getTask(GetTaskRequest.fromJSON({ id: "no-such-task" })), TaskNotFoundError)
  await t.rejects(
    (async () => {
      for await (const _ of sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: done.id }))) break
    })(),
    UnsupportedOperationError,
  )

  const created = await sdk.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: done.id, id: "hook-1", url: HOOK, token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } }))
  t.match(created, { taskId: done.id, id: "hook-1", url: HOOK, token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } })
  t.same(await sdk.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: done.id, id: "hook-1" })), created)
  t.same((await sdk.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: done.id }))).configs, [created])
  await sdk.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: done.id, id: "hook-1" }))
  await t.rejects(sdk.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: done.id, id: "hook-1" })), TaskNotFoundError)

  // Its tenant decorator puts the tenant in the path: two tenants do not see each other's Tasks.
  const transport = await new RestTransportFactory().create(srv.url, card)
  const [acme, globex] = [new Client(new TenantTransportDecorator(transport, "acme"), card), new Client(new TenantTransportDecorator(transport, "globex"), card)]
  const acmeTask = (await acme.sendMessage(say("acme's"))) as any
  t.equal(((await acme.getTask(GetTaskRequest.fromJSON({ id: acmeTask.id }))) as any).id, acmeTask.id)
  await t.rejects(globex.getTask(GetTaskRequest.fromJSON({ id: acmeTask.id })), TaskNotFoundError)
  t.equal((await globex.listTasks(ListTasksRequest.fromJSON({}))).totalSize, 0)
})

t.test("the official SDK's 0.3 compatibility client over REST: send, get, cancel, push configs", async (t) => {
  const { srv } = await listening(t)
  const card = await (await new ClientFactory().createFromUrl(srv.url)).getAgentCard()
  const legacy = new Client(new LegacyRestTransport({ endpoint: srv.url }), card)
  t.equal(legacy.protocolVersion, "0.3")
  const sent = (await legacy.sendMessage(SendMessageRequest.fromJSON(message("from 0.3")))) as any
  t.equal(sent.status.state, TaskState.TASK_STATE_COMPLETED, "blocking, as the client asks")
  t.equal(sent.artifacts[0].parts[0].content.value, "echo: from 0.3")
  const got = (await legacy.getTask(GetTaskRequest.fromJSON({ id: sent.id }))) as any
  t.equal(got.id, sent.id)
  t.same(
    got.history.map((m: any) => m.role),
    [1, 2],
    "ROLE_USER, ROLE_AGENT",
  )
  await t.rejects(legacy.getTask(GetTaskRequest.fromJSON({ id: "no-such-task" })), TaskNotFoundError, "the 0.3 error object is read as a typed error")
  await t.rejects(legacy.cancelTask(CancelTaskRequest.fromJSON({ id: sent.id })), TaskNotCancelableError)

  const created = await legacy.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: sent.id, id: "old", url: HOOK }))
  t.match(created, { taskId: sent.id, id: "old", url: HOOK })
  t.match(await legacy.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: sent.id, id: "old" })), { id: "old", url: HOOK })
  t.same((await legacy.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: sent.id }))).configs.map((c) => c.id), ["old"])
  await legacy.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: sent.id, id: "old" }))
})

t.test("a Task created over REST is read and canceled over JSON-RPC, and seen canceled over REST", async (t) => {
  const { srv, http, gates } = await listening(t)
  const created = (await http("POST", "/message:send", { body: { ...message("wait across bindings"), configuration: { returnImmediately: true } }, headers: V1 })).json().task
  await waitFor(() => gates.has("wait across bindings"))
  const read = await callRpc(srv.url, rpc("GetTask", { id: created.id }), V1)
  t.match(read.result, { id: created.id, status: { state: "TASK_STATE_WORKING" } }, "JSON-RPC reads the REST Task")
  const canceled = await callRpc(srv.url, rpc("CancelTask", { id: created.id }), V1)
  t.equal(canceled.result.status.state, "TASK_STATE_CANCELED")
  const seen = (await http("GET", `/tasks/${created.id}`, { headers: V1 })).json()
  t.equal(seen.status.state, "TASK_STATE_CANCELED", "REST sees the cancel")
  t.same(seen, canceled.result, "the same Task in both bindings")
})

t.test("one log line per REST request, with binding rest; refusals logged too", async (t) => {
  const lines: Array<Record<string, any>> = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)))
      done()
    },
  })
  const { respond } = model()
  const loggerInstance: FastifyBaseLogger = pino({ level: "info" }, sink)
  const app = Fastify({ loggerInstance })
  await app.register(toolnexusA2A, agentOptions(respond))
  t.teardown(() => app.close())
  const http = overInject(app)
  const task = (await http("POST", "/message:send", { body: message("logged"), headers: V1 })).json().task
  await http("GET", `/tasks/${task.id}`, { headers: V1 })
  await http("GET", "/tasks/missing", { headers: V1 })
  await http("GET", "/tasks/x?historyLength=no", { headers: V1 })
  const rest = lines.filter((line) => line.binding === "rest")
  t.match(
    rest.map(({ msg, method, taskId, version, outcome, durationMs }) => ({ msg, method, taskId, version, outcome, durationMs })),
    [
      { msg: "a2a request", method: "SendMessage", taskId: task.id, version: "1.0", outcome: "ok", durationMs: Number },
      { msg: "a2a request", method: "GetTask", taskId: task.id, version: "1.0", outcome: "ok" },
      { msg: "a2a request", method: "GetTask", taskId: "missing", outcome: ErrorCode.TaskNotFound },
      { msg: "a2a request refused", method: "GetTask", outcome: ErrorCode.InvalidParams },
    ],
  )
  t.equal(rest.length, 4)
})

t.test("the route table: Fastify paths, and how path, query and body become params", async (t) => {
  const find = (method: string, path: string) => REST_ROUTES.find((route) => route.method === method && route.path === path)!
  t.same(fastifyPaths(find("POST", "/tasks/{id}:cancel")), ["/tasks/:id(.+)::cancel", "/:tenant/tasks/:id(.+)::cancel"])
  t.same(fastifyPaths(find("POST", "/message:send")), ["/message::send", "/:tenant/message::send"])
  t.same(fastifyPaths(find("GET", "/v1/tasks/{id}")), ["/v1/tasks/:id"], "a 0.3 path has no tenant form")

  const calls: Array<{ name: OperationName; params: unknown; version: string }> = []
  const refusals: string[] = []
  const operations = {
    resumable: false,
    run: async (name: OperationName, params: unknown, ctx: CallContext) => {
      calls.push({ name, params, version: ctx.version })
      return { error: new A2AError(ErrorCode.TaskNotFound, "stub") }
    },
    refused: (binding: string, error: A2AError) => refusals.push(`${binding}:${error.code}`),
  } as unknown as A2AOperations
  const binding = new RestBinding(operations)
  const log = memoryLogger()
  const call = (method: string, path: string, request: { path?: Record<string, string>; query?: Record<string, unknown>; body?: unknown }, version = "1.0") =>
    binding.call(find(method, path), { path: {}, query: {}, body: undefined, ...request }, { log, version })

  await call("POST", "/tasks/{id}:cancel", { path: { id: "t1", tenant: "acme" }, body: { id: "other", tenant: "ignored", metadata: { a: 1 } } })
  await call("GET", "/tasks", { query: { pageSize: 2, includeArtifacts: true, tenant: "q" } })
  await call("GET", "/tasks/{taskId}/pushNotificationConfigs/{configId}", { path: { taskId: "t1", configId: "c1" } })
  await call("POST", "/tasks/{taskId}/pushNotificationConfigs", { path: { taskId: "t1" }, body: { url: HOOK, taskId: "body's" } })
  await call("GET", "/v1/tasks/{id}", { path: { id: "t2" }, query: { historyLength: 3 } }, "0.3")
  await call("GET", "/v1/tasks/{id}", { path: { id: "t2" } }, "1.0")
  await call("GET", "/v1/tasks/{taskId}/pushNotificationConfigs/{configId}", { path: { taskId: "t3", configId: "c3" } }, "0.3")
  t.same(calls, [
    { name: "CancelTask", params: { id: "t1", tenant: "acme", metadata: { a: 1 } }, version: "1.0" },
    { name: "ListTasks", params: { pageSize: 2, includeArtifacts: true, tenant: "q" }, version: "1.0" },
    { name: "GetTaskPushNotificationConfig", params: { taskId: "t1", id: "c1" }, version: "1.0" },
    { name: "CreateTaskPushNotificationConfig", params: { url: HOOK, taskId: "t1" }, version: "1.0" },
    { name: "GetTask", params: { id: "t2", historyLength: 3 }, version: "0.3" },
    { name: "GetTask", params: { id: "t2", tenant: "v1" }, version: "1.0" },
    { name: "GetTaskPushNotificationConfig", params: { id: "t3", pushNotificationConfigId: "c3" }, version: "0.3" },
  ])
  const refused = await call("GET", "/tasks/{id}", { path: { id: "x" } }, "0.3")
  t.equal(refused.errorCode, ErrorCode.VersionNotSupported, "a 0.3 request on a 1.0 path runs nothing")
  t.equal(calls.length, 7)
  t.same(refusals, [`rest:${ErrorCode.VersionNotSupported}`], "and is counted as a refusal")
})
