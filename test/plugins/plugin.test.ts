import Fastify, { type FastifyInstance } from "fastify"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { toolnexusA2A, toolnexusA2APlugin, type ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { a2aApp, injectRpc as post, RecordingStore, rpc, tmpDir, userMessage, waitFor } from "../fixtures/helpers.js"

const client = createLocalClient(() => "pong")

const build = (t: Test, opts: Partial<ToolnexusA2AOptions> = {}, before?: (app: FastifyInstance) => void) => a2aApp(t, { client, ...opts }, before)

t.test("serves JSON-RPC on POST / and decorates the app with the store", async (t) => {
  const store = new RecordingStore()
  const app = await build(t, { store })
  t.equal(app.taskStore, store, "a host store is used as it is")
  const res = await post(app, rpc("SendMessage", { message: userMessage("ping") }))
  t.equal(res.statusCode, 200)
  t.match(res.headers["content-type"], /application\/json/)
  const id = res.json().result.id
  await waitFor(() => store.statesOf(id).includes("completed"))
  const got = await post(app, rpc("GetTask", { id }))
  t.equal(got.json().result.artifacts[0].parts[0].text, "pong")
})

t.test("lives beside the app's own routes, error handler and parsers without changing them", async (t) => {
  const app = await build(t, { prefix: "/agents/desk" }, (app) => {
    app.setErrorHandler((err: Error, _req, reply) => reply.code(418).send({ mine: true, message: err.message }))
    app.addContentTypeParser("text/csv", { parseAs: "string" }, (_req, body, done) => done(null, { csv: body }))
    app.post("/echo", async (req) => req.body)
    app.get("/boom", async () => {
      throw new Error("app error")
    })
  })
  t.same((await app.inject({ method: "GET", url: "/boom" })).json(), { mine: true, message: "app error" }, "the app's error handler still answers its routes")
  t.same((await app.inject({ method: "POST", url: "/echo", headers: { "content-type": "text/csv" }, payload: "a,b" })).json(), { csv: "a,b" })
  const badJsonOnApp = await app.inject({ method: "POST", url: "/echo", headers: { "content-type": "application/json" }, payload: "{nope" })
  t.equal(badJsonOnApp.statusCode, 418, "the app's own JSON errors still go to its handler")
  const badJsonOnAgent = await post(app, "{nope", {}, "/agents/desk/")
  t.equal(badJsonOnAgent.statusCode, 200)
  t.equal(badJsonOnAgent.json().error.code, -32700)
  const csvOnAgent = await app.inject({ method: "POST", url: "/agents/desk/", headers: { "content-type": "text/csv" }, payload: "a,b" })
  t.equal(csvOnAgent.statusCode, 415, "the app's csv parser does not reach the agent route")
  const card = (await app.inject({ method: "GET", url: "/agents/desk/.well-known/agent-card.json", headers: { host: "example.test:8080" } })).json()
  t.equal(card.url, "http://example.test:8080/agents/desk/")
  t.equal((await app.inject({ method: "GET", url: "/.well-known/agent-card.json" })).statusCode, 404, "nothing is mounted outside the prefix")
})

t.test("HTTP-level errors are JSON-RPC error bodies with the right status", async (t) => {
  const app = await build(t, { bodyLimit: 200 })
  const empty = await post(app, "")
  t.equal(empty.statusCode, 200)
  t.match(empty.json(), { jsonrpc: "2.0", id: null, error: { code: -32700, message: /body is empty/ } })
  const truncated = await post(app, '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":')
  t.match(truncated.json(), { id: null, error: { code: -32700, message: /not valid JSON/ } })
  const poisoned = await post(app, '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"__proto__":{"x":1}}}')
  t.equal(poisoned.json().error.code, -32700, "a __proto__ key is refused")
  const big = await post(app, rpc("SendMessage", { message: userMessage("x".repeat(500)) }))
  t.equal(big.statusCode, 413)
  t.match(big.json(), { error: { code: -32600, message: /limit is 200 bytes/ } })
  const text = await app.inject({ method: "POST", url: "/", headers: { "content-type": "text/plain" }, payload: "hello" })
  t.equal(text.statusCode, 415)
  t.match(text.json(), { error: { code: -32005, message: /Unsupported content type "text\/plain"/ } })
  const rpcType = await post(app, rpc("GetTask", { id: "x" }), { "content-type": "application/json-rpc" })
  t.equal(rpcType.json().error.code, -32001, "application/json-rpc is parsed as JSON")
  const notification = await post(app, { jsonrpc: "2.0", method: "GetTask", params: { id: "x" } })
  t.equal(notification.statusCode, 204)
  t.equal(notification.body, "")
})

t.test("HTTP-level refusals answer in the version asked for", async (t) => {
  const app = await build(t)
  const res = await post(app, "{bad", { "a2a-version": "1.0" })
  t.match(res.json().error, { code: -32700, data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "PARSE_ERROR" }] })
  const old = await post(app, "{bad")
  t.notOk(old.json().error.data, "0.3 keeps the plain form")
})

t.test("the agent card carries the 1.0 and 0.3 fields and the host's card options", async (t) => {
  const skills = [{ id: "desk", name: "Help desk", description: "Answers tickets", tags: ["support"] }]
  const app = await build(t, { name: "audited-desk", description: "A desk", version: "2.1.0", provider: { organization: "Acme", url: "https://acme.test" }, skills })
  const res = await app.inject({ method: "GET", url: "/.well-known/agent-card.json", headers: { host: "127.0.0.1:9999" } })
  t.equal(res.statusCode, 200)
  t.match(res.json(), {
    name: "audited-desk",
    description: "A desk",
    version: "2.1.0",
    url: "http://127.0.0.1:9999/",
    protocolVersion: "0.3.0",
    preferredTransport: "JSONRPC",
    supportedInterfaces: [{ url: "http://127.0.0.1:9999/", protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    provider: { organization: "Acme" },
    capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false },
    skills,
  })
  const fixed = await build(t, { url: "https://agents.acme.test/desk/" })
  t.equal((await fixed.inject({ method: "GET", url: "/.well-known/agent-card.json" })).json().url, "https://agents.acme.test/desk/")
})

t.test("bad options fail at registration, naming the option", async (t) => {
  const cases: Array<[Partial<ToolnexusA2AOptions>, RegExp]> = [
    [{ client: undefined }, /opts\.agent or opts\.client is required/],
    [{ client: {} as never }, /opts\.client should be a client with run/],
    [{ store: "redis:x" }, /opts\.store is not a store selector: Unknown A2A store "redis:x"/],
    [{ store: { get: async () => undefined } as unknown as TaskStore }, /opts\.store is not a store selector: Unknown A2A store \(an object without get\/save methods\)/],
    [{ store: "file:/dev/null/tasks" }, /opts\.store could not be opened: .*(ENOTDIR|EACCES)/],
    [{ toolkit: {} as never }, /opts\.toolkit should be a toolkit/],
    [{ prefix: "agents" }, /opts\.prefix should be a path starting with "\/"/],
    [{ bodyLimit: -1 }, /opts\.bodyLimit should be a positive integer/],
    [{ shutdownGraceMs: Number.NaN }, /opts\.shutdownGraceMs/],
    [{ name: "" }, /opts\.name should be a non-empty string/],
    [{ skills: [{ id: "x" }] as never }, /opts\.skills\[0\]\.name should be a string/],
    [{ provider: { organization: "x" } as never }, /opts\.provider should be/],
    [{ retention: { terminalTtl: "a while" } }, /^toolnexus: opts\.retention should be \{ terminalTtl: <ms, or a duration such as "30d"/],
    [{ push: "on" as never }, /^toolnexus: opts\.push should be an object such as \{ allow: \["hooks\.internal"\] \}, or false/],
    [{ push: { allow: "x" as never } }, /^toolnexus: opts\.push\.allow should be an array of "HOST" or "HOST:PORT" strings/],
    [{ push: { allow: ["hooks.internal:99999"] } }, /^toolnexus: opts\.push\.allow: push allow-list entry "hooks\.internal:99999" has a port outside 1-65535/],
    [{ retention: { terminalTtl: "30d" }, store: new RecordingStore() }, /^toolnexus: opts\.retention applies to a store built from a selector .*give your own store object its retention when you build it/],
  ]
  for (const [opts, message] of cases) {
    const app = Fastify()
    await t.rejects(Promise.resolve(app.register(toolnexusA2A, { client, ...opts }).ready()), message, JSON.stringify(Object.keys(opts)))
    await app.close()
  }
  const twice = Fastify()
  twice.register(toolnexusA2A, { client })
  twice.register(toolnexusA2A, { client, prefix: "/two" })
  await t.rejects(Promise.resolve(twice.ready()), /already has a taskStore/)
  await twice.close()
})

t.test("close() closes a store the plugin built, never a host's store", async (t) => {
  let closed = 0
  const hostStore = Object.assign(new RecordingStore(), { close: async () => void closed++ })
  const app = Fastify()
  await app.register(toolnexusA2A, { client, store: hostStore })
  await app.close()
  t.equal(closed, 0, "the host's store stays open")

  const dir = tmpDir(t)
  const closeSpy = t.capture(FileTaskStore.prototype, "close", async () => {})
  const owned = Fastify()
  await owned.register(toolnexusA2A, { client, store: `file:${dir}` })
  t.type(owned.taskStore, FileTaskStore)
  await owned.close()
  t.equal(closeSpy.args().length, 1, "the store built from file:<dir> was closed")
})

t.test("a blocking request waiting on a task does not hold close() past the grace period", async (t) => {
  const store = new RecordingStore()
  const app = Fastify()
  const never = createLocalClient(({ signal }) => new Promise((_r, reject) => signal?.addEventListener("abort", () => reject(signal.reason))))
  await app.register(toolnexusA2A, { client: never, store, shutdownGraceMs: 20 })
  const pending = post(app, rpc("SendMessage", { message: userMessage("x"), configuration: { blocking: true } }))
  await waitFor(() => store.saves.some((s) => s.status.state === "working"))
  await app.close()
  const res = await pending
  t.equal(res.json().result.status.state, "failed", "the waiting request got the failed task")
})

t.test("the unwrapped plugin stays encapsulated and takes Fastify's own prefix", async (t) => {
  const app = Fastify()
  await app.register(toolnexusA2APlugin, { client, prefix: "/agents/desk" })
  t.teardown(() => app.close())
  await app.ready()
  t.equal(app.hasDecorator("taskStore"), false, "taskStore stays inside its context")
  const res = await post(app, rpc("GetTask", { id: "x" }), {}, "/agents/desk/")
  t.equal(res.json().error.code, -32001, "mounted once under the prefix")
  t.equal((await post(app, rpc("GetTask", { id: "x" }), {}, "/agents/desk/agents/desk/")).statusCode, 404, "not twice")
  const card = (await app.inject({ url: "/agents/desk/.well-known/agent-card.json", headers: { host: "h.test" } })).json()
  t.equal(card.url, "http://h.test/agents/desk/")
})
