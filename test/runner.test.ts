import t from "tap"
import { TaskEvents } from "../lib/a2a/events.js"
import { TaskRunner } from "../lib/a2a/runner.js"
import { createLocalClient } from "../lib/client/client.js"
import { deferred, FlakyStore, holdSavesOf, memoryLogger, RecordingStore, userMessage, waitFor } from "./helpers.js"

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
  const stopped = runner.stop(3e9) // ~35 days: setTimeout would clamp it to 1 ms
  // A timer due later than 1 ms: the clamped one, had it been set, fires first.
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(aborted, false, "the run was not aborted")
  hold.resolve("done")
  await stopped
  t.same(store.statesOf(started.task.id), ["submitted", "working", "completed"])
})
