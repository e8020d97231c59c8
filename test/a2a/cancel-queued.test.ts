import t from "tap"
import { TaskEvents } from "../../lib/streams/events.js"
import { TaskRunner } from "../../lib/a2a/runner.js"
import { createLocalClient } from "../../lib/client/client.js"
import { deferred, holdSavesOf, memoryLogger, RecordingStore, userMessage, waitFor } from "../fixtures/helpers.js"

/** A queued Task canceled while a slot frees: the queue must lose that Task only. */

t.test("canceling a queued Task while the queue moves on leaves the other queued Tasks queued", async (t) => {
  const store = new RecordingStore()
  const cancelSave = holdSavesOf(store, "canceled")
  // Each prompt's answer waits for its own gate, so the test decides when a slot frees.
  const gates = new Map<string, ReturnType<typeof deferred<string>>>()
  const gate = (prompt: string) => {
    if (!gates.has(prompt)) gates.set(prompt, deferred<string>())
    return gates.get(prompt)!
  }
  const client = createLocalClient(({ messages }) => {
    const last = messages.at(-1)
    return gate(typeof last?.content === "string" ? last.content : "").promise
  })
  const runner = new TaskRunner({ store, client, log: memoryLogger(), events: new TaskEvents(), maxRunning: 1 })
  const a = await runner.start(userMessage("a") as never)
  const b = await runner.start(userMessage("b") as never) // queued
  const c = await runner.start(userMessage("c") as never) // queued
  const d = await runner.start(userMessage("d") as never) // queued
  await waitFor(() => store.statesOf(a.task.id).includes("working"), 5000, "a to be working")

  const cancel = runner.cancel(b.task.id)
  await waitFor(cancelSave.started, 5000, "b's cancel save to start")
  // The slot frees while b's cancel is still being saved: the queue moves past b to c.
  gate("a").resolve("done a")
  await a.settled
  await waitFor(() => store.statesOf(c.task.id).includes("working"), 5000, "c to be working")
  cancelSave.release()
  const canceled = await cancel
  t.equal(canceled.status.state, "canceled")
  t.equal((await b.settled).status.state, "canceled", "whoever waits on b learns it was canceled")

  gate("c").resolve("done c")
  await c.settled
  gate("d").resolve("done d")
  const last = await d.settled
  t.equal(last.status.state, "completed", "d, queued behind them, still runs")
  t.same(store.statesOf(d.task.id), ["submitted", "working", "completed"])
  t.same(store.statesOf(b.task.id), ["submitted", "canceled"], "b never ran")
  await runner.stop(1000)
})
