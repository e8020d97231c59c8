import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import Fastify from "fastify"
import t, { type Test } from "tap"
import { TaskEvents } from "../lib/a2a/events.js"
import { TaskRunner } from "../lib/a2a/runner.js"
import { createLocalClient, type ChatMessage } from "../lib/client/client.js"
import { currentRunner, withInternals } from "../lib/internals.js"
import { serve } from "../plugins/serve.js"
import { FileTaskStore } from "../lib/stores/file.js"
import type { A2ATask } from "../lib/types.js"
import { toolnexusA2A } from "../plugins/a2a.js"
import { deferred, FlakyStore, memoryLogger, RecordingStore, rpc, userMessage, waitFor } from "./helpers.js"

/** Each test here is a bug a review found, written as the test that would have caught it. */

const tmpDir = (t: Test) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-review-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

t.test("a shared contextId does not carry one principal's conversation to another", async (t) => {
  const seen: ChatMessage[][] = []
  const app = Fastify()
  await app.register(toolnexusA2A, {
    client: createLocalClient(({ messages }) => (seen.push(messages), "ok")),
    auth: { tokens: { "alice-secret-0123456789": "alice", "mallory-secret-012345678": "mallory" } },
  })
  t.teardown(() => app.close())
  const send = (secret: string, text: string) =>
    app.inject({
      method: "POST",
      url: "/",
      headers: { "content-type": "application/json", authorization: `Bearer ${secret}` },
      payload: JSON.stringify(rpc("SendMessage", { message: userMessage(text, { contextId: "support-chat" }), configuration: { blocking: true } })),
    })
  await send("alice-secret-0123456789", "my card PIN is 4321")
  await send("mallory-secret-012345678", "hi")
  await send("alice-secret-0123456789", "and my address?")
  t.same(seen[1].map((m) => m.content), ["hi"], "Mallory's model sees none of Alice's turns")
  t.same(seen[2].map((m) => m.content), ["my card PIN is 4321", "ok", "and my address?"], "Alice's sees only hers")
})

t.test("a cancel arriving while the final save is in flight does not save a second final state", async (t) => {
  const slowCompleted = new RecordingStore()
  const original = slowCompleted.save.bind(slowCompleted)
  const release = deferred()
  let completing = false
  slowCompleted.save = async (task: A2ATask) => {
    if (task.status.state === "completed") {
      completing = true
      await release.promise
    }
    await original(task)
  }
  const runner = new TaskRunner({ store: slowCompleted, client: createLocalClient(() => "answer"), log: memoryLogger(), events: new TaskEvents() })
  const started = await runner.start(userMessage("x") as never)
  await waitFor(() => completing, 5000, "the completed save to start")
  const cancel = runner.cancel(started.task.id) // while the completed save is in flight
  release.resolve()
  await t.rejects(cancel, { code: -32002 })
  await started.settled
  t.same(slowCompleted.statesOf(started.task.id), ["submitted", "working", "completed"])
})

t.test("a cancel whose save fails is an error to the peer, and the final save is retried until it lands", async (t) => {
  const store = new FlakyStore()
  const hold = deferred<string>()
  const runner = new TaskRunner({ store, client: createLocalClient(() => hold.promise), log: memoryLogger(), events: new TaskEvents() })
  const started = await runner.start(userMessage("x") as never)
  await waitFor(() => store.statesOf(started.task.id).includes("working"))
  store.failing = true
  await t.rejects(runner.cancel(started.task.id), { code: -32603, message: /could not record the cancel yet; the server keeps retrying/ })
  store.failing = false
  await waitFor(() => store.statesOf(started.task.id).includes("canceled"), 10_000, "the retried save")
  t.same(store.statesOf(started.task.id), ["submitted", "working", "canceled"])
})

t.test("one unreadable file does not stop listing or restart recovery", async (t) => {
  const dir = tmpDir(t)
  const files = new FileTaskStore(dir)
  const dead = { ...currentRunner(), pid: 2 ** 22 + 17, instance: "dead" }
  await files.save(withInternals({ id: "orphan", contextId: "c", status: { state: "working", timestamp: new Date().toISOString() } }, { runner: dead }))
  fs.writeFileSync(path.join(dir, "junk.json"), "{ torn")
  const warnings: string[] = []
  const onWarning = (warning: Error) => void warnings.push(warning.message)
  process.on("warning", onWarning)
  t.teardown(() => process.off("warning", onWarning))
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), a2a: { store: `file:${dir}` }, logger: false })
  t.teardown(() => srv.stop())
  t.equal((await files.get("orphan"))?.status.state, "failed", "the orphan was recovered")
  const listed = await (await fetch(srv.url + "/", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(rpc("ListTasks", {})) })).json()
  t.equal((listed as { result: { totalSize: number } }).result.totalSize, 1, "ListTasks answers, without the unreadable file")
  await waitFor(() => warnings.some((w) => /junk\.json/.test(w)), 5000, "the warning")
  await t.rejects(files.get("junk"), /corrupt task file/, "get still reports it")
})

t.test("stop() does not wait on a stream following a task of another server", async (t) => {
  const dir = tmpDir(t)
  const hold = deferred<string>()
  const a = await serve("127.0.0.1:0", { client: createLocalClient(() => hold.promise), a2a: { store: `file:${dir}` }, logger: false })
  t.teardown(async () => {
    hold.resolve("done")
    await a.stop()
  })
  const b = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), a2a: { store: `file:${dir}`, shutdownGraceMs: 50 }, logger: false })
  const post = (url: string, body: unknown) => fetch(url + "/", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  const sent = (await (await post(a.url, rpc("SendMessage", { message: userMessage("x") }))).json()) as { result: A2ATask }
  const files = new FileTaskStore(dir)
  await waitFor(async () => (await files.get(sent.result.id))?.status.state === "working")
  const following = await post(b.url, rpc("SubscribeToTask", { id: sent.result.id }))
  const reading = following.text()
  const started = Date.now()
  await b.stop()
  t.ok(Date.now() - started < 5000, "stop() returned without waiting for A's task")
  t.match(await reading, /"state":"working"/, "the stream had sent the task, then ended")
})

t.test("two servers in one process on one directory do not recover each other's live tasks", async (t) => {
  const dir = tmpDir(t)
  const hold = deferred<string>()
  const a = await serve("127.0.0.1:0", { client: createLocalClient(() => hold.promise), a2a: { store: `file:${dir}` }, logger: false })
  const sent = (await (
    await fetch(a.url + "/", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(rpc("SendMessage", { message: userMessage("x") })) })
  ).json()) as { result: A2ATask }
  const files = new FileTaskStore(dir)
  await waitFor(async () => (await files.get(sent.result.id))?.status.state === "working")
  const b = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), a2a: { store: `file:${dir}` }, logger: false })
  t.equal((await files.get(sent.result.id))?.status.state, "working", "B left A's live task alone")
  hold.resolve("done")
  await waitFor(async () => (await files.get(sent.result.id))?.status.state === "completed")
  await b.stop()
  await a.stop()
})

t.test("HTTP-level refusals answer in the version asked for", async (t) => {
  const app = Fastify()
  await app.register(toolnexusA2A, { client: createLocalClient(() => "x") })
  t.teardown(() => app.close())
  const res = await app.inject({ method: "POST", url: "/", headers: { "content-type": "application/json", "a2a-version": "1.0" }, payload: "{bad" })
  t.match(res.json().error, { code: -32700, data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "PARSE_ERROR" }] })
  const old = await app.inject({ method: "POST", url: "/", headers: { "content-type": "application/json" }, payload: "{bad" })
  t.notOk(old.json().error.data, "0.3 keeps the plain form")
})

t.test("a verify-only auth does not advertise token schemes it does not take", async (t) => {
  const app = Fastify()
  await app.register(toolnexusA2A, { client: createLocalClient(() => "x"), auth: { verify: () => "someone" } })
  t.teardown(() => app.close())
  const card = (await app.inject({ url: "/.well-known/agent-card.json", headers: { "a2a-version": "1.0" } })).json()
  t.notOk(card.securitySchemes)
})
