import t from "tap"
import { TaskEvents } from "../../lib/streams/events.js"
import { TaskRunner } from "../../lib/a2a/runner.js"
import { MAX_TIMER_MS } from "../../lib/duration.js"
import { createLocalClient } from "../../lib/client/client.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { deferred, FlakyStore, holdSavesOf, memoryLogger, RecordingStore, userMessage, waitFor } from "../fixtures/helpers.js"

/** TaskRunner on its own, without a dispatcher: a cancel meeting the run's final save. */

t.test("a cancel arriving while the final save is in flight does not save a second final state", async (t) => {
  const slowCompleted = new RecordingStore()
  const completedSave = holdSavesOf(slowCompleted, "completed")
  const runner = new TaskRunner({ store: slowCompleted, client: createLocalClient(() => "answer"), log: memoryLogger(), events: new TaskEvents() })
  const started = await runner.start(userMessage("x") as never)
  await waitFor(completedSave.started, 5000, "the completed save to start")
  const cancel = runner.cancel(started.task.id) // while the completed save is in flight
  completedSave.release()
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

t.test("a grace past Node's longest timer waits for the work instead of aborting it at once", async (t) => {
  const store = new RecordingStore()
  const hold = deferred<string>()
  let aborted = false
  const runner = new TaskRunner({
    store,
    client: createLocalClient(({ signal }) => {
      signal?.addEventListener("abort", () => (aborted = true))
      return hold.promise
    }),
    log: memoryLogger(),
    events: new TaskEvents(),
  })
  const started = await runner.start(userMessage("x") as never)
  await waitFor(() => store.statesOf(started.task.id).includes("working"))
  // Every timer the stop sets, by delay: one past Node's longest fires after 1 ms instead.
  const delays: number[] = []
  const realSetTimeout = globalThis.setTimeout
  globalThis.setTimeout = ((fn: () => void, ms?: number, ...args: unknown[]) => {
    delays.push(ms ?? 0)
    return realSetTimeout(fn, ms, ...args)
  }) as typeof setTimeout
  t.teardown(() => void (globalThis.setTimeout = realSetTimeout))
  const stopped = runner.stop(3e9) // ~35 days
  await new Promise((resolve) => setImmediate(resolve)) // the stop's synchronous start, where the grace timer would be set
  globalThis.setTimeout = realSetTimeout
  t.notOk(delays.some((ms) => ms > MAX_TIMER_MS), `no timer past Node's longest (set: ${delays.join(", ") || "none"})`)
  t.equal(aborted, false, "the run was not aborted")
  hold.resolve("done")
  await stopped
  t.same(store.statesOf(started.task.id), ["submitted", "working", "completed"])
})

/** A runner whose model asks once ("how many?") and then answers; the Task it started, now input-required. */
async function askingRunner(store: TaskStore) {
  const runner = new TaskRunner({
    store,
    client: createLocalClient(({ messages }) => (messages.length === 1 ? { text: "how many?", inputRequired: true } : `booked for ${messages.at(-1)?.content}`)),
    log: memoryLogger(),
    events: new TaskEvents(),
  })
  const started = await runner.start(userMessage("book") as never)
  const asked = await started.settled
  return { runner, asked }
}

t.test("a follow-up is saved submitted before it runs; a store full for it refuses it as at capacity, and the Task stays as it was", async (t) => {
  const store = new InMemoryTaskStore({ maxBytes: 40_000, maxBytesPerOwner: 40_000 })
  const { runner, asked } = await askingRunner(store)
  t.equal(asked.status.state, "input-required")
  await t.rejects(runner.resume(asked, userMessage("x".repeat(30_000), { taskId: asked.id }) as never), { code: -32603, message: /at capacity/ })
  t.equal((await store.get(asked.id))?.status.state, "input-required", "the Task still waits for its answer")
  const resumed = await runner.resume(asked, userMessage("4", { taskId: asked.id }) as never)
  t.equal(resumed.task.status.state, "submitted", "the follow-up answers at once with the Task saved submitted")
  t.equal((await resumed.settled).status.state, "completed")
})

t.test("a cancel while a follow-up's first save is awaited ends the Task canceled, and nothing runs after", async (t) => {
  const store = new RecordingStore()
  const { runner, asked } = await askingRunner(store)
  // The follow-up's save lands (stores keep call order) and is acknowledged only when the test says.
  const saveOf = store.save.bind(store)
  const gate = deferred()
  let held = false
  store.save = async (task) => {
    await saveOf(task)
    if (task.status.state === "submitted") {
      held = true
      await gate.promise
    }
  }
  const submitted = { started: () => held, release: () => gate.resolve() }
  const resuming = runner.resume(asked, userMessage("4", { taskId: asked.id }) as never)
  await waitFor(submitted.started, 5000, "the follow-up's save to start")
  await t.rejects(runner.resume(asked, userMessage("5", { taskId: asked.id }) as never), { code: -32004, message: /already running/ }, "a second follow-up meanwhile")
  const canceled = runner.cancel(asked.id)
  submitted.release()
  t.equal((await canceled).status.state, "canceled")
  const started = await resuming
  t.equal((await started.settled).status.state, "canceled")
  t.same(store.statesOf(asked.id), ["submitted", "working", "input-required", "submitted", "canceled"], "no working after the cancel")
})
