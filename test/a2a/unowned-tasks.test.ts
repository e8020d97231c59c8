import t, { type Test } from "tap"
import { currentRunner, ownerOf, withInternals } from "../../lib/internals.js"
import { createLocalClient } from "../../lib/client/client.js"
import type { ChatMessage } from "../../lib/models/model.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import type { A2ATask } from "../../lib/types.js"
import { serve } from "../../plugins/serve.js"
import { a2aApp, deadPid, injectRpc, postRpc, rpc, sampleTask, SAMPLE_TIME, sseMessages, userMessage, waitFor } from "../fixtures/helpers.js"

/**
 * Tasks saved before authentication was turned on carry no owner. Once auth is on they belong to
 * nobody (every principal gets "task not found", ListTasks leaves them out, no model sees their
 * turns), unless auth.unownedTasksBelongTo names the one principal that owns them. Never shared.
 */

const ALICE = "alice-secret-0123456789"
const BOB = "bob-secret-0123456789ab"
const as = (secret: string) => ({ authorization: `Bearer ${secret}` })

/** An input-required Task saved by a server without authentication: no owner in its metadata. */
const beforeAuth = (): A2ATask =>
  sampleTask("old-1", "input-required", {
    contextId: "old-ctx",
    history: [{ kind: "message", messageId: "m-old", role: "user", parts: [{ kind: "text", text: "before auth: my PIN is 4321" }] }],
  })

/** A server with tokens for alice and bob over a store holding the unowned Task; the model records the history it is given. */
async function server(t: Test, opts: { unownedTasksBelongTo?: string; store?: TaskStore } = {}) {
  const store = opts.store ?? new InMemoryTaskStore()
  await store.save(beforeAuth())
  const seen: ChatMessage[][] = []
  const app = await a2aApp(t, {
    client: createLocalClient(({ messages }) => (seen.push(messages), "ok")),
    store,
    auth: { tokens: { [ALICE]: "alice", [BOB]: "bob" }, unownedTasksBelongTo: opts.unownedTasksBelongTo },
  })
  const post = async (body: unknown, secret: string) => {
    const res = await injectRpc(app, body, as(secret))
    if (!/event-stream/.test(String(res.headers["content-type"]))) return res.json()
    const events = sseMessages(res.body)
    // 0.3 answers a streaming call refused before it began as a stream of that one error.
    return events.length === 1 && events[0].error !== undefined ? events[0] : { stream: events }
  }
  /** The texts the model saw for a new message in the unowned Task's context. */
  const historyOfNewTurn = async (secret: string) => {
    await post(rpc("SendMessage", { message: userMessage("what did I say?", { contextId: "old-ctx" }), configuration: { blocking: true } }), secret)
    return seen.at(-1)!.map((m) => String(m.content))
  }
  return { store, post, historyOfNewTurn }
}

/** Every path a principal reaches a Task by, each answered "not found" for the unowned Task. */
async function refusedEverywhere(t: Test, post: (body: unknown, secret: string) => Promise<any>, secret: string, who: string) {
  t.equal((await post(rpc("GetTask", { id: "old-1" }), secret)).error?.code, -32001, `${who}: get`)
  t.equal((await post(rpc("GetTask", { id: "old-1", historyLength: 1 }, 2), secret)).error?.code, -32001, `${who}: get, another rendering`)
  const list = (await post(rpc("ListTasks", {}), secret)).result
  t.notOk(list.tasks.some((task: A2ATask) => task.id === "old-1"), `${who}: left out of list`)
  t.equal((await post(rpc("ListTasks", { contextId: "old-ctx" }), secret)).result.tasks.length, 0, `${who}: not in its context's list`)
  t.equal((await post(rpc("CancelTask", { id: "old-1" }), secret)).error?.code, -32001, `${who}: cancel`)
  t.equal((await post(rpc("SubscribeToTask", { id: "old-1" }), secret)).error?.code, -32001, `${who}: subscribe`)
  const followUp = rpc("SendMessage", { message: userMessage(`${who} adds a secret`, { taskId: "old-1", contextId: "old-ctx" }), configuration: { blocking: true } })
  t.equal((await post(followUp, secret)).error?.code, -32001, `${who}: follow-up message`)
}

t.test("with auth on, a Task saved before it belongs to nobody: not found on every path, and out of every model's history", async (t) => {
  for (const [name, makeStore] of [
    ["a store with getText", () => new InMemoryTaskStore()],
    ["a store with only get/save/list", () => {
      const inner = new InMemoryTaskStore()
      return { get: (id: string) => inner.get(id), save: (task: A2ATask) => inner.save(task), list: inner.list.bind(inner) } as TaskStore
    }],
  ] as const) {
    const { store, post, historyOfNewTurn } = await server(t, { store: makeStore() })
    await refusedEverywhere(t, post, ALICE, `${name}, alice`)
    await refusedEverywhere(t, post, BOB, `${name}, bob`)
    t.same(await store.get("old-1"), beforeAuth(), `${name}: the Task is untouched: not canceled, nothing added`)
    t.same(await historyOfNewTurn(ALICE), ["what did I say?"], `${name}: a new turn in its context does not see its history`)
  }
})

t.test("auth.unownedTasksBelongTo: that principal alone owns them, on every path", async (t) => {
  const { store, post, historyOfNewTurn } = await server(t, { unownedTasksBelongTo: "alice" })
  await refusedEverywhere(t, post, BOB, "bob")
  t.same(await historyOfNewTurn(BOB), ["what did I say?"], "bob's model never sees alice's unowned turns")

  t.equal((await post(rpc("GetTask", { id: "old-1" }), ALICE)).result.id, "old-1", "alice reads it")
  t.same((await post(rpc("ListTasks", { contextId: "old-ctx" }), ALICE)).result.tasks.map((task: A2ATask) => task.id).filter((id: string) => id === "old-1"), ["old-1"], "alice lists it")
  const subscribed = await post(rpc("SubscribeToTask", { id: "old-1" }), ALICE)
  t.match(subscribed.stream?.[0], { result: { id: "old-1", status: { state: "input-required" } } }, "alice subscribes to it")
  t.same(await historyOfNewTurn(ALICE), ["before auth: my PIN is 4321", "what did I say?"], "alice's new turn in its context sees its history")
  const followUp = await post(rpc("SendMessage", { message: userMessage("alice answers", { taskId: "old-1" }), configuration: { blocking: true } }), ALICE)
  t.equal(followUp.result.status.state, "completed", "alice continues it")
  t.match((await store.get("old-1"))?.history?.map((m) => m.parts[0]), [{ text: "before auth: my PIN is 4321" }, { text: "alice answers" }, { text: "ok" }])
  t.equal((await post(rpc("CancelTask", { id: "old-1" }), ALICE)).error?.code, -32002, "alice's cancel reaches it (already completed)")
  t.equal(ownerOf((await store.get("old-1"))!), "alice", "continued by alice, it is alice's now: naming another owner later shares nothing of it")
})

t.test("auth.unownedTasksBelongTo must be a principal name", async (t) => {
  await t.rejects(
    a2aApp(t, { client: createLocalClient(() => "x"), auth: { tokens: { [ALICE]: "alice" }, unownedTasksBelongTo: "" } }),
    /opts\.auth\.unownedTasksBelongTo should be the principal name/,
  )
})

t.test("recovery still fails an unowned Task a dead server left working, with auth on", async (t) => {
  const store = new InMemoryTaskStore()
  const dead = { ...currentRunner(), pid: await deadPid(), instance: "dead-before-auth" }
  await store.save(withInternals(sampleTask("old-working", "working"), { runner: dead }))
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false, a2a: { store, auth: { tokens: { [ALICE]: "alice" } } } })
  t.teardown(() => srv.stop())
  await waitFor(async () => (await store.get("old-working"))?.status.state === "failed", 10_000, "the interrupted unowned Task to be failed")
  t.match((await store.get("old-working"))?.status.message?.parts[0], { text: /Interrupted/ })
  t.notSame((await store.get("old-working"))?.status.timestamp, SAMPLE_TIME)
  t.equal((await (await postRpc(srv.url, rpc("GetTask", { id: "old-working" }), as(ALICE))).json()).error.code, -32001, "and it still belongs to nobody")
})
