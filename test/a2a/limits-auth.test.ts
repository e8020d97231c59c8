import Fastify from "fastify"
import t, { type Test } from "tap"
import { TaskEvents } from "../../lib/streams/events.js"
import { TaskRunner } from "../../lib/a2a/runner.js"
import { createLocalClient } from "../../lib/client/client.js"
import type { ChatMessage } from "../../lib/models/model.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { toolnexusA2A, type ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { a2aApp, deferred, injectRpc, memoryLogger, RecordingStore, rpc, sampleTask, sseMessages, userMessage, waitFor } from "../fixtures/helpers.js"

const ALICE = "alice-secret-0123456789"
const BOB = "bob-secret-0123456789ab"

async function app(t: Test, opts: Partial<ToolnexusA2AOptions> = {}) {
  const store = new RecordingStore()
  const instance = await a2aApp(t, { client: createLocalClient(() => "ok"), store, ...opts })
  const post = (body: unknown, headers: Record<string, string> = {}) => injectRpc(instance, body, headers)
  return { instance, store, post }
}

const as = (secret: string) => ({ authorization: `Bearer ${secret}` })

t.test("authentication: missing or wrong credentials get 401 with a JSON-RPC error", async (t) => {
  const { post } = await app(t, { auth: { tokens: { [ALICE]: "alice" } } })
  for (const headers of [{}, as("wrong-secret-0123456789"), { authorization: "Basic abc" }, { "x-api-key": "nope" }] as Array<Record<string, string>>) {
    const res = await post(rpc("GetTask", { id: "x" }), headers)
    t.equal(res.statusCode, 401, JSON.stringify(headers))
    t.match(res.json(), { jsonrpc: "2.0", id: null, error: { code: -32600, message: /Unauthorized/ } })
    t.match(res.headers["www-authenticate"], /Bearer/)
  }
  t.equal((await post(rpc("GetTask", { id: "x" }), as(ALICE))).json().error.code, -32001, "a bearer token gets in")
  t.equal((await post(rpc("GetTask", { id: "x" }), { "x-api-key": ALICE })).json().error.code, -32001, "so does the same secret as an API key")
})

t.test("tasks belong to the principal that created them", async (t) => {
  const { post } = await app(t, { auth: { tokens: { [ALICE]: "alice", [BOB]: "bob" } } })
  const sent = (await post(rpc("SendMessage", { message: userMessage("mine", { contextId: "shared-ctx" }), configuration: { blocking: true } }), as(ALICE))).json()
  const id = sent.result.id
  t.equal(sent.result.status.state, "completed")
  t.notOk(sent.result.metadata, "the owner record never reaches the wire")

  t.equal((await post(rpc("GetTask", { id }), as(ALICE))).json().result.id, id, "the owner reads it")
  t.same((await post(rpc("GetTask", { id }), as(BOB))).json().error.code, -32001, "another principal gets not found on get")
  t.same((await post(rpc("CancelTask", { id }), as(BOB))).json().error.code, -32001, "... on cancel")
  t.same(sseMessages((await post(rpc("SubscribeToTask", { id }), as(BOB))).body)[0].error.code, -32001, "... on subscribe (0.3: a stream of the one error)")
  t.same((await post(rpc("SendMessage", { message: userMessage("hijack", { taskId: id }) }), as(BOB))).json().error.code, -32001, "... on a follow-up message")
  const bobList = (await post(rpc("ListTasks", { contextId: "shared-ctx" }), as(BOB))).json().result
  t.same([bobList.totalSize, bobList.tasks], [0, []], "... and on list")
  const aliceList = (await post(rpc("ListTasks", { contextId: "shared-ctx" }), as(ALICE))).json().result
  t.equal(aliceList.totalSize, 1)
})

t.test("a shared contextId does not carry one principal's conversation to another", async (t) => {
  const seen: ChatMessage[][] = []
  const { post } = await app(t, {
    client: createLocalClient(({ messages }) => (seen.push(messages), "ok")),
    auth: { tokens: { [ALICE]: "alice", [BOB]: "bob" } },
  })
  const send = (secret: string, text: string) =>
    post(rpc("SendMessage", { message: userMessage(text, { contextId: "support-chat" }), configuration: { blocking: true } }), as(secret))
  await send(ALICE, "my card PIN is 4321")
  await send(BOB, "hi")
  await send(ALICE, "and my address?")
  t.same(seen[1].map((m) => m.content), ["hi"], "Bob's model sees none of Alice's turns")
  t.same(seen[2].map((m) => m.content), ["my card PIN is 4321", "ok", "and my address?"], "Alice's sees only hers")
})

t.test("a verify hook decides the principal; a throwing hook refuses", async (t) => {
  const { post } = await app(t, {
    auth: {
      verify: (request) => {
        const user = request.headers["x-user"]
        if (user === "crash") throw new Error("identity service down")
        return typeof user === "string" ? user : undefined
      },
    },
  })
  t.equal((await post(rpc("GetTask", { id: "x" }), { "x-user": "carol" })).json().error.code, -32001)
  t.equal((await post(rpc("GetTask", { id: "x" }))).statusCode, 401)
  t.equal((await post(rpc("GetTask", { id: "x" }), { "x-user": "crash" })).statusCode, 401)
})

t.test("the agent card stays public and advertises the schemes in each version's form", async (t) => {
  const { instance } = await app(t, { auth: { tokens: { [ALICE]: "alice" } } })
  const v1 = (await instance.inject({ url: "/.well-known/agent-card.json", headers: { "a2a-version": "1.0" } })).json()
  t.match(v1.securitySchemes, { bearer: { httpAuthSecurityScheme: { scheme: "Bearer" } }, apiKey: { apiKeySecurityScheme: { location: "header", name: "x-api-key" } } })
  t.ok(v1.securityRequirements)
  const v03 = await instance.inject({ url: "/.well-known/agent-card.json" })
  t.equal(v03.statusCode, 200)
  t.match(v03.json().securitySchemes, { bearer: { type: "http", scheme: "bearer" }, apiKey: { type: "apiKey", in: "header", name: "x-api-key" } })
  t.equal(v03.headers.vary, "A2A-Version, Host, X-Forwarded-Host, X-Forwarded-Proto", "no a2a.url: the card also varies by what its URL is read from")
})

t.test("a verify-only auth does not advertise token schemes it does not take", async (t) => {
  const { instance } = await app(t, { auth: { verify: () => "someone" } })
  const card = (await instance.inject({ url: "/.well-known/agent-card.json", headers: { "a2a-version": "1.0" } })).json()
  t.notOk(card.securitySchemes)
})

t.test("auth options are checked at registration", async (t) => {
  for (const [auth, message] of [
    [{}, /needs tokens/],
    [{ tokens: { short: "x" } }, /shorter than 16 characters/],
    [{ tokens: { [ALICE]: "" } }, /non-empty principal/],
  ] as const) {
    const instance = Fastify()
    await t.rejects(Promise.resolve(instance.register(toolnexusA2A, { client: createLocalClient(() => "x"), auth: auth }).ready()), message)
    await instance.close()
  }
})

t.test("a rate limit answers 429 with a JSON-RPC error", async (t) => {
  const { post } = await app(t, { rateLimit: { max: 2, timeWindow: 60_000 } })
  t.equal((await post(rpc("GetTask", { id: "x" }))).statusCode, 200)
  t.equal((await post(rpc("GetTask", { id: "x" }))).statusCode, 200)
  const limited = await post(rpc("GetTask", { id: "x" }))
  t.equal(limited.statusCode, 429)
  t.match(limited.json(), { jsonrpc: "2.0", error: { code: -32600, message: /Too many requests: at most 2 per/ } })
})

t.test("tasks beyond maxRunning wait their turn; beyond maxQueued they are refused", async (t) => {
  const gates: Array<ReturnType<typeof deferred<string>>> = []
  const store = new RecordingStore()
  const runner = new TaskRunner({
    store,
    client: createLocalClient(() => {
      const gate = deferred<string>()
      gates.push(gate)
      return gate.promise
    }),
    log: memoryLogger(),
    events: new TaskEvents(),
    maxRunning: 2,
    maxQueued: 1,
  })
  const a = await runner.start(userMessage("a") as never)
  const b = await runner.start(userMessage("b") as never)
  const c = await runner.start(userMessage("c") as never)
  await waitFor(() => gates.length === 2)
  t.same(store.statesOf(c.task.id), ["submitted"], "the third waits, still submitted")
  await t.rejects(runner.start(userMessage("d") as never), { code: -32603, message: /at capacity \(2 tasks running, 1 waiting\)/ })
  gates[0].resolve("done a")
  await a.settled
  await waitFor(() => gates.length === 3)
  t.same(store.statesOf(c.task.id), ["submitted", "working"], "it starts when a slot frees")
  gates[1].resolve("done b")
  gates[2].resolve("done c")
  t.equal((await b.settled).status.state, "completed")
  t.equal((await c.settled).status.state, "completed")
})

t.test("a queued task can be canceled before it starts, and stop() fails the ones still waiting", async (t) => {
  const store = new RecordingStore()
  const hold = deferred<string>()
  const runner = new TaskRunner({ store, client: createLocalClient(() => hold.promise), log: memoryLogger(), events: new TaskEvents(), maxRunning: 1 })
  const first = await runner.start(userMessage("1") as never)
  const second = await runner.start(userMessage("2") as never)
  const third = await runner.start(userMessage("3") as never)
  const canceled = await runner.cancel(second.task.id)
  t.equal(canceled.status.state, "canceled")
  t.equal((await second.settled).status.state, "canceled")
  t.same(store.statesOf(second.task.id), ["submitted", "canceled"], "it never ran")
  await runner.stop(10)
  t.equal((await third.settled).status.state, "failed")
  t.match((await store.get(third.task.id))?.status.message?.parts[0], { text: /before the task started/ })
  t.equal((await first.settled).status.state, "failed")
})

t.test("InMemoryTaskStore drops finished tasks first when full, and after their TTL", async (t) => {
  const task = sampleTask
  // One owner (no authentication) may fill the whole store here.
  const bounded = new InMemoryTaskStore({ maxTasks: 3, maxTasksPerOwner: 3 })
  await bounded.save(task("done-1", "completed"))
  await bounded.save(task("open-1", "working"))
  await bounded.save(task("done-2", "failed"))
  await bounded.save(task("open-2", "submitted"))
  t.equal((await bounded.list({})).totalSize, 3)
  t.equal(await bounded.get("done-1"), undefined, "the oldest finished task made room")
  await bounded.save(task("open-3", "working"))
  await t.rejects(bounded.save(task("open-4", "working")), { name: "StoreFullError", limit: "maxTasks" }, "a new task that leaves no room is refused")
  t.ok(await bounded.get("open-1"), "unfinished tasks are never dropped")
  t.equal((await bounded.list({})).totalSize, 3)

  // The store's clock, moved by hand: the TTL is then exact, however slow the machine.
  let now = Date.parse("2026-01-01T00:00:00Z")
  t.capture(Date, "now", () => now)
  const ttl = new InMemoryTaskStore({ terminalTtlMs: 20 })
  await ttl.save(task("short", "completed"))
  await ttl.save(task("running", "working"))
  now += 19
  t.ok(await ttl.get("short"), "kept until its TTL is up")
  now += 1
  t.equal(await ttl.get("short"), undefined, "expired after its TTL")
  t.ok(await ttl.get("running"), "an unfinished task has no TTL")
  t.equal((await ttl.list({})).totalSize, 1)
  t.throws(() => new InMemoryTaskStore({ maxTasks: 0 }), /maxTasks/)
  t.throws(() => new InMemoryTaskStore({ terminalTtlMs: -1 }), /terminalTtlMs/)
})

t.test("the server's own metadata stays in the store and off the wire", async (t) => {
  const { post, store } = await app(t, { auth: { tokens: { [ALICE]: "alice" } } })
  const res = (await post(rpc("SendMessage", { message: userMessage("x"), metadata: { mine: 1 }, configuration: { blocking: true } }), as(ALICE))).json()
  const stored = (await store.get(res.result.id))!
  // Under the key stores already hold: renaming it would orphan what is saved.
  t.match(stored.metadata?.toolnexus, { principal: "alice", runner: { pid: process.pid } })
  const v1 = (await post(rpc("GetTask", { id: res.result.id }), { ...as(ALICE), "a2a-version": "1.0" })).json()
  t.notOk(v1.result.metadata, "1.0 shape has no internals either")
})
