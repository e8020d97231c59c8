import http from "node:http"
import t from "tap"
import { negotiateVersion } from "../../lib/a2a/wire.js"
import { createLocalClient } from "../../lib/client/client.js"
import type { ChatMessage } from "../../lib/models/model.js"
import { serve } from "../../plugins/serve.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { deferred, dispatcherFor as setup, memoryLogger, RecordingStore, rpc, sseEvent, sseMessages, userMessage, waitFor } from "../fixtures/helpers.js"

t.test("negotiateVersion", async (t) => {
  t.equal(negotiateVersion(undefined), "0.3")
  t.equal(negotiateVersion(""), "0.3")
  t.equal(negotiateVersion("0.3.0"), "0.3")
  t.equal(negotiateVersion(" 1.0 "), "1.0")
  t.equal(negotiateVersion(["1.0.1", "0.3"]), "1.0", "the first of repeated headers")
  t.throws(() => negotiateVersion("1.1"), { code: -32009 })
  t.throws(() => negotiateVersion("latest"), { code: -32009, message: /"latest" is not supported/ })
})

t.test("an input-required task continues with the peer's answer, in the same task", async (t) => {
  const seen: ChatMessage[][] = []
  const { call, store } = setup(({ messages }) => {
    seen.push(messages)
    const last = messages.at(-1)?.content
    return last === "book a table" ? { text: "For how many people?", inputRequired: true } : `Booked for ${last}`
  })
  const first = await call(rpc("SendMessage", { message: userMessage("book a table"), configuration: { blocking: true } }))
  t.equal(first.result.status.state, "input-required", "a blocking call returns at an interrupted state")
  t.match(first.result.status.message, { role: "agent", parts: [{ text: "For how many people?" }] })

  const second = await call(rpc("SendMessage", { message: userMessage("4", { taskId: first.result.id, contextId: first.result.contextId }), configuration: { blocking: true } }))
  t.equal(second.result.id, first.result.id, "the same task")
  t.equal(second.result.status.state, "completed")
  t.equal(second.result.artifacts[0].parts[0].text, "Booked for 4")
  t.same(second.result.history.map((m: { role: string }) => m.role), ["user", "agent", "user", "agent"])
  t.same(seen[1].map((m) => [m.role, m.content]), [["user", "book a table"], ["assistant", "For how many people?"], ["user", "4"]], "the model sees the whole exchange")
  // The follow-up is saved (submitted, with its message) before it runs, as a new Task is.
  t.same((store as RecordingStore).statesOf(first.result.id), ["submitted", "working", "input-required", "submitted", "working", "completed"])

  const wrongContext = await call(rpc("SendMessage", { message: userMessage("5", { taskId: first.result.id, contextId: "elsewhere" }) }))
  t.match(wrongContext.error, { code: -32602, message: /contextId does not match/ })
})

t.test("a message to a task still working is refused with a clear error", async (t) => {
  const gate = deferred<string>()
  const { call } = setup(() => gate.promise)
  const sent = await call(rpc("SendMessage", { message: userMessage("slow") }))
  const again = await call(rpc("SendMessage", { message: userMessage("more", { taskId: sent.result.id }) }))
  t.match(again.error, { code: -32004, message: /is (submitted|working) and takes no further messages/ })
  gate.resolve("done")
})

t.test("earlier turns of a context reach the model", async (t) => {
  const seen: ChatMessage[][] = []
  const { call } = setup(({ messages }) => {
    seen.push(messages)
    return `answer ${seen.length}`
  })
  await call(rpc("SendMessage", { message: userMessage("first", { contextId: "ctx-talk" }), configuration: { blocking: true } }))
  await call(rpc("SendMessage", { message: userMessage("second", { contextId: "ctx-talk" }), configuration: { blocking: true } }))
  await call(rpc("SendMessage", { message: userMessage("unrelated"), configuration: { blocking: true } }))
  t.same(seen[1].map((m) => [m.role, m.content]), [["user", "first"], ["assistant", "answer 1"], ["user", "second"]])
  t.same(seen[2].map((m) => m.content), ["unrelated"], "another context starts fresh")
})

t.test("acceptedOutputModes, push notifications and the extended card", async (t) => {
  const { call } = setup(() => "x")
  const images = await call(rpc("SendMessage", { message: userMessage("x"), configuration: { acceptedOutputModes: ["image/png"] } }))
  t.match(images.error, { code: -32005, message: /text\/plain/ })
  const text = await call(rpc("SendMessage", { message: userMessage("x"), configuration: { acceptedOutputModes: ["image/png", "text/markdown"], blocking: true } }))
  t.equal(text.result.status.state, "completed")
  const push = await call(rpc("SendMessage", { message: userMessage("x"), configuration: { pushNotificationConfig: { url: "http://127.0.0.1:1/hook" } } }))
  t.equal(push.error.code, -32003)
  for (const method of ["CreateTaskPushNotificationConfig", "tasks/pushNotificationConfig/get", "ListTaskPushNotificationConfigs"]) {
    t.equal((await call(rpc(method, { taskId: "x" }))).error.code, -32003, method)
  }
  t.equal((await call(rpc("GetExtendedAgentCard", {}))).error.code, -32004)
})

t.test("ListTasks: -32004 without a listing store, -32602 for bad params", async (t) => {
  const plain: TaskStore = { get: async () => undefined, save: async () => {} }
  const { call: noList } = setup(() => "x", plain)
  t.match((await noList(rpc("ListTasks", {}))).error, { code: -32004, message: /cannot list/ })
  const { call } = setup(() => "x")
  t.match((await call(rpc("ListTasks", { pageSize: 0 }))).error, { code: -32602, message: /pageSize must be >= 1/ })
  t.match((await call(rpc("ListTasks", { pageSize: 101 }))).error, { code: -32602, message: /pageSize must be <= 100/ })
  t.match((await call(rpc("ListTasks", { status: "constructor" }))).error, { code: -32602 }, "inherited names are not states")
  t.match((await call(rpc("ListTasks", { status: "done" }))).error, { code: -32602, message: /params\.status is not a task state: use one such as "completed"/ })
  t.match((await call(rpc("ListTasks", { status: "completed" }, 1), "1.0")).error, { code: -32602, message: /TASK_STATE_COMPLETED/ })
  t.match((await call(rpc("ListTasks", { pageToken: "garbage" }))).error, { code: -32602, message: /pageToken/ })
  t.match((await call(rpc("ListTasks", { statusTimestampAfter: "yesterday" }))).error, { code: -32602, message: /RFC 3339/ })
  await call(rpc("SendMessage", { message: userMessage("x"), configuration: { blocking: true } }))
  const listed = await call(rpc("tasks/list", { status: "completed", statusTimestampAfter: "2000-01-01T00:00:00+02:00", historyLength: 1 }))
  t.equal(listed.result.totalSize, 1)
  t.equal(listed.result.tasks[0].kind, "task", "0.3 entries")
  t.equal(listed.result.tasks[0].history.length, 1, "historyLength applies to listed tasks")
})

t.test("CancelTask: an input-required task waiting here is canceled too", async (t) => {
  const { call, runner } = setup(() => ({ text: "which one?", inputRequired: true }))
  const asked = await call(rpc("SendMessage", { message: userMessage("x"), configuration: { blocking: true } }))
  t.notOk(runner.isRunning(asked.result.id))
  const canceled = await call(rpc("tasks/cancel", { id: asked.result.id }))
  t.equal(canceled.result.status.state, "canceled")
  t.match((await call(rpc("CancelTask", { id: asked.result.id }))).error, { code: -32002, message: /already canceled/ })
  t.match((await call(rpc("CancelTask", { id: "ghost" }))).error, { code: -32001 })
})

t.test("SubscribeToTask follows a task running elsewhere by polling a store that keeps no event log", async (t) => {
  const store = new RecordingStore()
  // A host store of get and save only: the follower reads its states.
  const { dispatcher } = setup(() => "x", { get: (id) => store.get(id), save: (task) => store.save(task) })
  const now = () => new Date().toISOString()
  await store.save({ id: "remote", contextId: "c", status: { state: "working", timestamp: now() } })
  const outcome = await dispatcher.dispatch(rpc("SubscribeToTask", { id: "remote" }, 5), { log: memoryLogger(), version: "1.0" })
  const seen: unknown[] = []
  const reading = (async () => {
    for await (const frame of outcome.stream!) seen.push((frame.response as { result: unknown }).result)
  })()
  await waitFor(() => seen.length === 1)
  await store.save({ id: "remote", contextId: "c", status: { state: "completed", timestamp: now() }, artifacts: [{ artifactId: "a", parts: [{ kind: "text", text: "from afar" }] }] })
  await reading
  t.match(seen, [
    { task: { id: "remote", status: { state: "TASK_STATE_WORKING" } } },
    { artifactUpdate: { taskId: "remote", artifact: { artifactId: "a", parts: [{ text: "from afar" }] } } },
    { statusUpdate: { taskId: "remote", status: { state: "TASK_STATE_COMPLETED" } } },
  ])
})

t.test("a stream whose peer goes away does not stop its task", async (t) => {
  const gate = deferred<string>()
  const store = new RecordingStore()
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => gate.promise), a2a: { store }, logger: false })
  t.teardown(() => srv.stop())
  const port = Number(new URL(srv.url).port)
  const body = JSON.stringify(rpc("message/stream", { message: userMessage("x") }))
  const firstEvent = await new Promise<string>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/", headers: { "content-type": "application/json" } }, (res) => {
      // The first event whole (one chunk may hold more than one, or part of one), then the peer goes away mid-stream.
      let received = ""
      res.on("data", (chunk) => {
        received += String(chunk)
        const end = received.indexOf("\n\n")
        if (end === -1) return
        resolve(received.slice(0, end))
        req.destroy()
      })
    })
    req.on("error", () => {})
    req.once("error", reject)
    req.end(body)
  })
  const taskId = sseEvent(firstEvent).data.result.id
  await waitFor(() => store.statesOf(taskId).includes("working"))
  gate.resolve("finished anyway")
  await waitFor(() => store.statesOf(taskId).includes("completed"))
  t.same(store.statesOf(taskId), ["submitted", "working", "completed"])
})

t.test("a slow reader gets every byte of a large stream (backpressure)", async (t) => {
  const big = "x".repeat(4 * 1024 * 1024)
  // A 4 MiB answer is kept twice (history and artifact): past the default maxTaskBytes, so the limit is raised here.
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => big), logger: false, a2a: { maxTaskBytes: 16 * 1024 * 1024 } })
  t.teardown(() => srv.stop())
  const port = Number(new URL(srv.url).port)
  const text = await new Promise<string>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/", headers: { "content-type": "application/json", "a2a-version": "1.0" } }, (res) => {
      const chunks: Buffer[] = []
      res.pause()
      // Read late and in small sips so the server's socket buffer fills up.
      const sip = () => {
        let chunk: Buffer | null
        let taken = 0
        while (taken < 5 && (chunk = res.read(64 * 1024)) !== null) {
          chunks.push(chunk)
          taken++
        }
        if (!res.readableEnded) setTimeout(sip, 5)
      }
      res.on("end", () => resolve(Buffer.concat(chunks).toString()))
      res.on("readable", () => {})
      setTimeout(sip, 50)
    })
    req.once("error", reject)
    req.end(JSON.stringify(rpc("SendStreamingMessage", { message: { messageId: "b", role: "ROLE_USER", parts: [{ text: "big" }] } })))
  })
  const events = sseMessages(text).map((message) => message.result)
  t.same(events.map((e) => Object.keys(e)[0]), ["task", "statusUpdate", "artifactUpdate", "statusUpdate"])
  t.equal(events[2].artifactUpdate.artifact.parts[0].text.length, big.length, "the large artifact arrived whole")
})

t.test("1.0 parts are stored in the 0.3 form and written back in the form asked for", async (t) => {
  const prompts: string[] = []
  const { call, store } = setup(({ messages }) => (prompts.push(String(messages.at(-1)?.content)), "ok"))
  const parts = [
    { text: "hi", metadata: { lang: "en" } },
    { data: { a: 1 } },
    { data: 5 },
    { url: "https://files.test/y.png", mediaType: "image/png", filename: "y.png" },
    { raw: "YWJj", mediaType: "text/plain" },
  ]
  const sent = await call(rpc("SendMessage", { message: { messageId: "p", role: "ROLE_USER", parts } }, 1), "1.0")
  const id = sent.result.task.id
  const stored = (await store.get(id))!.history![0]
  t.same(stored.parts, [
    { kind: "text", text: "hi", metadata: { lang: "en" } },
    { kind: "data", data: { a: 1 } },
    { kind: "data", data: { value: 5 } },
    { kind: "file", file: { name: "y.png", mimeType: "image/png", uri: "https://files.test/y.png" } },
    { kind: "file", file: { mimeType: "text/plain", bytes: "YWJj" } },
  ])
  t.equal(stored.role, "user")
  t.equal(prompts[0], 'hi\n{"a":1}\n{"value":5}\n[file y.png (image/png) at https://files.test/y.png]\n[file  (text/plain), inline]', "every part reaches the model as text")
  const v1 = await call(rpc("GetTask", { id }), "1.0")
  t.same(v1.result.history[0].parts, [parts[0], parts[1], { data: { value: 5 } }, parts[3], parts[4]])
  const v03 = await call(rpc("GetTask", { id }))
  t.same(v03.result.history[0].parts, stored.parts)
  t.equal(v03.result.history[0].role, "user")
})
