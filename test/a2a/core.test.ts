import t from "tap"
import { A2AError, ErrorCode } from "../../lib/a2a/errors.js"
import { withInternals } from "../../lib/internals.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import type { A2ATask } from "../../lib/types.js"
import { answerOf, deferred, dispatcherFor as setup, FlakyStore, memoryLogger, RecordingStore, rpc, sampleTask, userMessage, waitFor } from "../fixtures/helpers.js"

t.test("SendMessage saves submitted, then working, then completed with the answer", async (t) => {
  const { store, call } = setup(({ messages }) => `answer to ${messages.at(-1)?.content}`)
  const recording = store as RecordingStore
  const res = await call(rpc("SendMessage", { message: userMessage("hi", { messageId: "m-hi" }) }, "req-1"))
  t.equal(res.id, "req-1")
  const task: A2ATask = res.result
  t.equal(task.status.state, "submitted", "0.3 answers at once with the submitted task")
  t.match(task.status.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  t.ok(task.contextId, "a context is assigned")
  t.match(task.history?.[0], { role: "user", taskId: task.id, contextId: task.contextId, parts: [{ kind: "text", text: "hi" }] })
  t.equal(task.history?.[0].messageId, "m-hi", "the sender's messageId is kept")

  await waitFor(() => recording.statesOf(task.id).includes("completed"))
  t.same(recording.statesOf(task.id), ["submitted", "working", "completed"], "exactly one save per transition")
  for (const saved of recording.saves) t.equal(saved.contextId, task.contextId, `contextId kept on the ${saved.status.state} save`)
  const done = (await store.get(task.id))!
  t.equal(done.artifacts?.[0].parts[0].kind === "text" && done.artifacts[0].parts[0].text, "answer to hi")
  t.same(done.history?.map((m) => m.role), ["user", "agent"], "history keeps the question and adds the answer")
})

t.test("message/send with blocking waits for the terminal state", async (t) => {
  const { call } = setup(() => "sync")
  const res = await call(rpc("message/send", { message: userMessage("x"), configuration: { blocking: true } }))
  t.equal(res.result.status.state, "completed")
  t.equal(res.result.artifacts[0].parts[0].text, "sync")
})

t.test("a client's contextId is kept", async (t) => {
  const { call } = setup()
  const res = await call(rpc("SendMessage", { message: userMessage("x", { contextId: "ctx-mine", messageId: "m-1" }), configuration: { blocking: true } }))
  t.equal(res.result.contextId, "ctx-mine")
  t.equal(res.result.history[0].messageId, "m-1")
})

t.test("a model failure ends the task failed with the error as the status message", async (t) => {
  const { store, call, log } = setup(() => {
    throw new Error("model exploded")
  })
  const res = await call(rpc("SendMessage", { message: userMessage("x") }))
  const recording = store as RecordingStore
  await waitFor(() => recording.statesOf(res.result.id).includes("failed"))
  t.same(recording.statesOf(res.result.id), ["submitted", "working", "failed"])
  const failed = (await store.get(res.result.id))!
  t.match(failed.status.message, { role: "agent", parts: [{ kind: "text", text: /model exploded/ }] })
  t.equal(failed.contextId, res.result.contextId)
  t.ok(log.lines.some((l) => l.msg === "task failed" && l.taskId === res.result.id), "the failure is logged with the task id")
})

t.test("GetTask reads the stored task; historyLength trims the history", async (t) => {
  const { call } = setup()
  const sent = await call(rpc("SendMessage", { message: userMessage("x"), configuration: { blocking: true } }))
  const got = await call(rpc("GetTask", { id: sent.result.id }))
  t.equal(got.result.status.state, "completed")
  t.equal(got.result.history.length, 2)
  const trimmed = await call(rpc("tasks/get", { id: sent.result.id, historyLength: 1 }))
  t.same(trimmed.result.history.map((m: { role: string }) => m.role), ["agent"])
  const none = await call(rpc("GetTask", { id: sent.result.id, historyLength: 0 }))
  t.same(none.result.history, [])
})

t.test("GetTask answers every change, version, history length and owner right, from a store with getText or without", async (t) => {
  const withText = new InMemoryTaskStore()
  const objectsOnly: TaskStore = { get: (id) => withText.get(id), save: (task) => withText.save(task) }
  for (const [name, store] of [["with getText", withText], ["without getText", objectsOnly]] as const) {
    const { dispatcher, log } = setup(undefined, store)
    const get = async (params: object, version?: string, principal?: string) =>
      answerOf(await dispatcher.dispatch(rpc("GetTask", params, "g"), { log, version, principal }))
    const history = [1, 2, 3].map((n) => ({ kind: "message" as const, messageId: `m${n}`, role: "user" as const, parts: [{ kind: "text" as const, text: `${n}` }] }))
    await withText.save(sampleTask("r-1", "working", { history }))
    t.equal((await get({ id: "r-1" }, "1.0")).result.status.state, "TASK_STATE_WORKING", `${name}: 1.0`)
    t.equal((await get({ id: "r-1" })).result.status.state, "working", `${name}: 0.3, same task`)
    t.same((await get({ id: "r-1", historyLength: 1 })).result.history.map((m: { messageId: string }) => m.messageId), ["m3"], `${name}: history trimmed`)
    t.equal((await get({ id: "r-1" })).result.history.length, 3, `${name}: and whole again`)
    await withText.save(sampleTask("r-1", "completed", { history }))
    t.equal((await get({ id: "r-1" }, "1.0")).result.status.state, "TASK_STATE_COMPLETED", `${name}: a save is seen at once`)
    await withText.delete("r-1")
    t.equal((await get({ id: "r-1" })).error.code, ErrorCode.TaskNotFound, `${name}: a deleted task is not found`)
    await withText.save(withInternals(sampleTask("r-1", "failed"), { principal: "alice" }))
    const seen = await get({ id: "r-1" }, "1.0", "alice")
    t.match(seen, { jsonrpc: "2.0", id: "g", result: { id: "r-1", status: { state: "TASK_STATE_FAILED" } } }, `${name}: its owner reads it`)
    t.equal(seen.result.metadata, undefined, `${name}: without the server's internals`)
    await withText.save(withInternals(sampleTask("r-1", "failed", { metadata: { mine: 1 } }), { principal: "alice" }))
    for (const version of ["1.0", "0.3"]) {
      t.same((await get({ id: "r-1" }, version, "alice")).result.metadata, { mine: 1 }, `${name} ${version}: other metadata stays, the internals go`)
    }
    t.equal((await get({ id: "r-1" }, "1.0", "bob")).error.code, ErrorCode.TaskNotFound, `${name}: another principal is told not found`)
    await withText.delete("r-1")
  }
})

t.test("GetTask on an unknown id is -32001", async (t) => {
  const { call } = setup()
  const res = await call(rpc("GetTask", { id: "no-such-task" }))
  t.same(res.error, { code: ErrorCode.TaskNotFound, message: "Task not found: no-such-task", data: { taskId: "no-such-task" } })
})

t.test("envelope errors", async (t) => {
  const { call, dispatcher } = setup()
  t.match(await call([rpc("GetTask", { id: "x" })]), { id: null, error: { code: -32600, message: /batches are not supported/ } })
  t.match(await call("hello"), { id: null, error: { code: -32600 } })
  t.match(await call(null), { id: null, error: { code: -32600 } })
  t.match(await call({ jsonrpc: "1.0", id: 7, method: "GetTask" }), { id: 7, error: { code: -32600, message: /"jsonrpc" must be "2.0"/ } })
  t.match(await call({ jsonrpc: "2.0", id: { a: 1 }, method: "GetTask" }), { id: null, error: { code: -32600, message: /"id"/ } })
  t.match(await call({ jsonrpc: "2.0", id: 2, method: 5 }), { id: 2, error: { code: -32600, message: /"method"/ } })
  t.match(await call({ jsonrpc: "2.0", id: 3, method: "GetTask", params: [1] }), { id: 3, error: { code: -32600, message: /"params" must be an object/ } })
  for (const method of ["nope", "constructor", "__proto__", "toString", "hasOwnProperty"]) {
    t.match(await call(rpc(method, {}, 4)), { id: 4, error: { code: -32601, message: /Method not found/ } }, method)
  }
  const notification = await dispatcher.dispatch({ jsonrpc: "2.0", method: "GetTask", params: { id: "x" } }, { log: memoryLogger() })
  t.equal(notification.body, undefined, "a notification gets no answer")
})

t.test("invalid params name the field", async (t) => {
  const { call } = setup()
  const cases: Array<[unknown, RegExp]> = [
    [{}, /params\.message is required/],
    [{ message: "hi" }, /params\.message must be an object/],
    [{ message: { role: "user" } }, /params\.message\.parts is required/],
    [{ message: { role: "boss", parts: [{ kind: "text", text: "x" }] } }, /params\.message\.role must be "user" \(1\.0: "ROLE_USER"\)/],
    [{ message: { role: "agent", parts: [{ kind: "text", text: "x" }] } }, /params\.message\.role must be "user" .*the agent's messages are the server's own/],
    [{ message: { role: "ROLE_AGENT", parts: [{ text: "x" }] } }, /params\.message\.role must be "user" \(1\.0: "ROLE_USER"\)/],
    [{ message: { role: "user", parts: [] } }, /params\.message\.parts must NOT have fewer than 1 items/],
    [{ message: { role: "user", parts: [{ kind: "text", text: 5 }] } }, /params\.message\.parts\[0\]\.text must be a string/],
    [{ message: { role: "user", parts: [{ kind: "text" }] } }, /params\.message\.parts\[0\]\.text is required/],
    [{ message: { role: "user", parts: [{ kind: "video" }] } }, /params\.message\.parts\[0\] has an unknown kind/],
    [{ message: { role: "user", parts: [{ words: "neither kind nor content" }] } }, /params\.message\.parts\[0\] needs one of text, raw, url, data/],
    [{ message: { role: "ROLE_USER", parts: [{ text: 7 }] } }, /params\.message\.parts\[0\]\.text must be a string/],
    [{ message: { role: "user", parts: [{ kind: "file", file: { name: "a" } }] } }, /params\.message\.parts\[0\]\.file needs one of bytes, uri/],
    [{ message: userMessage("x"), configuration: { blocking: "yes" } }, /params\.configuration\.blocking must be a boolean/],
    [{ message: { role: "ROLE_USER", parts: [{ text: "a", url: "https://x.test" }] } }, /params\.message\.parts\[0\] needs exactly one of text, raw, url, data, not several/],
    [{ message: userMessage("x", { metadata: { deep: JSON.parse("[".repeat(100) + "]".repeat(100)) } }) }, /params\.message\.metadata\.deep(\[0\])+ nests deeper than 64 levels/],
    [{ message: userMessage("x"), configuration: { historyLength: -1 } }, /params\.configuration\.historyLength must be >= 0/],
  ]
  for (const [params, message] of cases) {
    const res = await call(rpc("SendMessage", params))
    t.equal(res.error?.code, -32602, JSON.stringify(params))
    t.match(res.error?.message, message)
  }
  t.match((await call(rpc("GetTask", {}))).error, { code: -32602, message: /params\.id is required/, data: { field: "params.id" } })
  t.match((await call(rpc("GetTask", { id: 12 }))).error, { code: -32602, message: /params\.id must be a string/ })
  t.match((await call(rpc("GetTask", { id: "x", historyLength: 1.5 }))).error, { code: -32602, message: /historyLength must be an integer/ })
})

t.test("a message for an existing task: not found, or refused for a finished task", async (t) => {
  const { call } = setup()
  t.match((await call(rpc("SendMessage", { message: userMessage("x", { taskId: "ghost" }) }))).error, { code: -32001 })
  const done = await call(rpc("SendMessage", { message: userMessage("x"), configuration: { blocking: true } }))
  const again = await call(rpc("SendMessage", { message: userMessage("more", { taskId: done.result.id }) }))
  t.match(again.error, { code: ErrorCode.UnsupportedOperation, message: /is completed and takes no further messages/ })
})

t.test("a store that fails on read or save gives -32603 and is logged", async (t) => {
  const broken: TaskStore = {
    get: async () => {
      throw new Error("disk on fire")
    },
    save: () => {
      throw new Error("sync throw")
    },
  }
  const { call, log } = setup(() => "x", broken)
  const got = await call(rpc("GetTask", { id: "t-9" }))
  t.match(got.error, { code: -32603, message: /task t-9/ })
  t.notMatch(got.error.message, /disk on fire/, "internal details stay in the log")
  t.ok(log.lines.some((l) => l.level === "error" && l.taskId === "t-9" && (l.err as Error).message === "disk on fire"))
  const sent = await call(rpc("SendMessage", { message: userMessage("x") }))
  t.match(sent.error, { code: -32603, message: /SendMessage/ })
})

t.test("a store failing mid-task ends the task as far as it can, without an unhandled rejection", async (t) => {
  const store = new FlakyStore()
  const gate = deferred<string>()
  const { call, log, runner } = setup(() => gate.promise, store)
  const res = await call(rpc("SendMessage", { message: userMessage("x") }))
  await waitFor(() => store.statesOf(res.result.id).includes("working"))
  store.failing = true
  gate.resolve("too late")
  await waitFor(() => !runner.isRunning(res.result.id))
  t.same(store.statesOf(res.result.id), ["submitted", "working"])
  t.ok(log.lines.some((l) => /^task store failed to save the final state/.test(String(l.msg)) && l.taskId === res.result.id))
  store.failing = false
  await waitFor(() => store.statesOf(res.result.id).includes("completed"), 10_000, "the retried final save")
  t.same(store.statesOf(res.result.id), ["submitted", "working", "completed"], "once the store is back, the answer lands")
})

t.test("stop() lets running tasks finish within the grace period", async (t) => {
  const gate = deferred<string>()
  const { store, call, runner } = setup(() => gate.promise)
  const res = await call(rpc("SendMessage", { message: userMessage("x") }))
  await waitFor(() => (store as RecordingStore).statesOf(res.result.id).includes("working"))
  const stopping = runner.stop(5000) // from here on it takes no new task and waits for this one
  gate.resolve("finished in time")
  await stopping
  t.equal((await store.get(res.result.id))?.status.state, "completed")
  t.match((await call(rpc("SendMessage", { message: userMessage("late") }))).error, { code: -32603 }, "no new tasks after stop")
})

t.test("stop() aborts tasks still running after the grace period and marks them failed", async (t) => {
  let seenSignal: AbortSignal | undefined
  const { store, call, runner } = setup(({ signal }) => {
    seenSignal = signal
    return new Promise<string>((_resolve, reject) => signal?.addEventListener("abort", () => reject(signal.reason)))
  })
  const res = await call(rpc("SendMessage", { message: userMessage("x") }))
  await waitFor(() => seenSignal !== undefined)
  await runner.stop(10)
  t.equal(seenSignal?.aborted, true, "the model call was aborted")
  const task = (await store.get(res.result.id))!
  t.equal(task.status.state, "failed")
  t.match(task.status.message?.parts[0], { text: /server stopped before the task finished/ })
  t.same((store as RecordingStore).statesOf(res.result.id), ["submitted", "working", "failed"])
})

t.test("stop() marks failed a task whose model ignores the abort, and the late answer is not saved", async (t) => {
  const gate = deferred<string>()
  const answered = deferred()
  const run = async () => {
    const text = await gate.promise
    answered.resolve()
    return { text, messages: [], toolCalls: [], turns: 1, usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, model: "deaf" }
  }
  const { store, call, runner } = setup({ model: "deaf", run })
  const res = await call(rpc("SendMessage", { message: userMessage("x") }))
  await waitFor(() => (store as RecordingStore).statesOf(res.result.id).includes("working"))
  await runner.stop(10)
  t.equal((await store.get(res.result.id))?.status.state, "failed")
  gate.resolve("late answer")
  await answered.promise
  // The runner takes the answer up in promise callbacks only; one macrotask later they have all run.
  await new Promise((resolve) => setImmediate(resolve))
  t.same((store as RecordingStore).statesOf(res.result.id), ["submitted", "working", "failed"], "nothing saved after the terminal state")
})

t.test("A2AError serializes to a JSON-RPC error object", async (t) => {
  t.same(new A2AError(ErrorCode.InvalidRequest, "bad").toJSON(), { code: -32600, message: "bad" })
  t.same(A2AError.invalidParams("params.x", "is required").toJSON(), { code: -32602, message: "Invalid params: params.x is required", data: { field: "params.x" } })
  const long = A2AError.taskNotFound("x".repeat(500)).message
  t.ok(long.length < 160 && long.endsWith("…"), "long ids are truncated in messages")
})
