import t, { type Test } from "tap"
import { createLocalClient, type ModelFunction } from "../../lib/client/client.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { a2aApp, deferred, injectRpc, rpc, userMessage, waitFor } from "../fixtures/helpers.js"

const ALICE = "alice-secret-0123456789"
const BOB = "bob-secret-0123456789ab"
const as = (secret: string) => ({ authorization: `Bearer ${secret}` })

async function app(t: Test, respond: ModelFunction, opts: Partial<ToolnexusA2AOptions> = {}) {
  const store = (opts.store as InMemoryTaskStore | undefined) ?? new InMemoryTaskStore()
  const instance = await a2aApp(t, { client: createLocalClient(respond), ...opts, store })
  const post = async (body: unknown, headers: Record<string, string> = {}) => (await injectRpc(instance, body, headers)).json()
  return { store, post }
}

const send = (text: string, extra: Record<string, unknown> = {}) => rpc("SendMessage", { message: userMessage(text, extra), configuration: { blocking: true } })

t.test("a full store answers -32603 at capacity through JSON-RPC, per principal, and the Tasks under way still finish", async (t) => {
  const gate = deferred()
  t.teardown(() => gate.resolve())
  const store = new InMemoryTaskStore({ maxTasks: 4 }) // each principal's share: 2
  const { post } = await app(t, () => gate.promise.then(() => "done"), { store, auth: { tokens: { [ALICE]: "alice", [BOB]: "bob" } } })
  const start = (secret: string) => post(rpc("SendMessage", { message: userMessage("work") }), as(secret))

  const first = await start(ALICE)
  const second = await start(ALICE)
  t.equal(first.result.status.state, "submitted")
  const refused = await start(ALICE)
  t.match(refused.error, { code: -32603, message: /at capacity.*your share.*retry once some of them finish/, data: { retryable: true } })
  t.notOk(refused.error.message.includes("maxTasksPerOwner"), "the operator's option names stay in the log")

  const bobs = await start(BOB)
  t.equal(bobs.result.status.state, "submitted", "another principal can still create Tasks")
  await start(BOB)
  t.match((await start(BOB)).error, { code: -32603, message: /at capacity/ })

  gate.resolve()
  for (const [id, secret] of [
    [first.result.id, ALICE],
    [second.result.id, ALICE],
    [bobs.result.id, BOB],
  ]) {
    await waitFor(async () => (await post(rpc("GetTask", { id }), as(secret))).result?.status.state === "completed", 5000, `task ${id} completed`)
  }
  t.equal((await start(ALICE)).result.status.state, "submitted", "once hers finished, they make room")
})

t.test("maxTaskBytes: a message that would make a Task larger is refused with -32602 naming the limit", async (t) => {
  const { post, store } = await app(t, () => "ok", { maxTaskBytes: 4000 })
  const refused = await post(send("x".repeat(5000)))
  t.match(refused.error, { code: -32602, message: /params\.message makes a Task of \d+ bytes, over this agent's limit of 4000 bytes per Task \(maxTaskBytes\)/, data: { field: "params.message", maxTaskBytes: 4000 } })
  t.same(store.usage.tasks, 0, "nothing was saved")
  // Characters count as the UTF-8 bytes they take: 1400 euro signs are 4200 bytes.
  t.match((await post(send("€".repeat(1400)))).error, { code: -32602 })
  t.equal((await post(send("y".repeat(3000)))).result.status.state, "completed", "a message within the limit is served")
})

t.test("maxTaskBytes: a follow-up that would grow a Task past it is refused, and the Task is left as it was", async (t) => {
  const { post, store } = await app(t, () => ({ text: "Which one?", inputRequired: true }), { maxTaskBytes: 6000 })
  const asked = (await post(send("a".repeat(2000)))).result
  t.equal(asked.status.state, "input-required")
  const before = await store.get(asked.id)
  const refused = await post(send("b".repeat(4000), { taskId: asked.id, contextId: asked.contextId }))
  t.match(refused.error, {
    code: -32602,
    message: new RegExp(`would grow task ${asked.id} to \\d+ bytes, over this agent's limit of 6000 bytes per Task \\(maxTaskBytes\\); start a new task instead \\(no taskId, contextId ${asked.contextId}`),
  })
  t.same(await store.get(asked.id), before, "the Task is unchanged")
  const answered = (await post(send("b".repeat(1000), { taskId: asked.id }))).result
  t.equal(answered.status.state, "input-required", "a follow-up within the limit is taken")
  t.equal(answered.history.length, 4)
})

t.test("maxTaskBytes: an answer that would pass it ends the Task failed, saying why, and nothing is lost", async (t) => {
  for (const inputRequired of [false, true]) {
    const { post, store } = await app(t, () => ({ text: "z".repeat(5000), inputRequired }), { maxTaskBytes: 8000 })
    const task = (await post(send("hello"))).result
    t.equal(task.status.state, "failed", inputRequired ? "a question too" : "an answer")
    t.match(task.status.message.parts[0].text, /The agent's answer \(5000 characters\) would make this Task \d+ bytes, over this agent's limit of 8000 bytes per Task \(maxTaskBytes\); the answer was not kept/)
    const stored = await store.get(task.id)
    t.equal(stored?.status.state, "failed", "the failed state is saved")
    t.equal(stored?.artifacts, undefined, "without the answer")
    t.equal(stored?.history?.[0].parts[0].kind === "text" && stored.history[0].parts[0].text, "hello", "the peer's message is kept")
  }
  // Just under the limit, the answer is kept (the exact size is measured when the cheap bound says it might not fit).
  const { post } = await app(t, () => "z".repeat(3000), { maxTaskBytes: 8000 })
  t.equal((await post(send("hello"))).result.status.state, "completed")
})

t.test("maxTaskBytes is checked at registration", async (t) => {
  for (const bad of [0, -1, 1.5, "4MB"]) {
    await t.rejects(app(t, () => "ok", { maxTaskBytes: bad as number }), /opts\.maxTaskBytes should be a positive integer/)
  }
})
