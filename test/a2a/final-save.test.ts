import t from "tap"
import { TaskEvents } from "../../lib/streams/events.js"
import { TaskRunner } from "../../lib/a2a/runner.js"
import { createLocalClient } from "../../lib/client/client.js"
import type { A2AMessage, A2ATask } from "../../lib/types.js"
import { deferred, FlakyStore, memoryLogger, userMessage, waitFor } from "../fixtures/helpers.js"

/** The last state of a run that the store refused: retried in the background, and settled by stop(). */

/** A FlakyStore that counts the saves it refused. */
class CountingFlakyStore extends FlakyStore {
  refused = 0
  override async save(task: A2ATask): Promise<void> {
    if (this.failing) this.refused++
    await super.save(task)
  }
}

async function taskWhoseFinalSaveFailed() {
  const store = new CountingFlakyStore()
  const log = memoryLogger()
  const answer = deferred<string>()
  const runner = new TaskRunner({ store, client: createLocalClient(() => answer.promise), log, events: new TaskEvents() })
  const started = await runner.start(userMessage("x") as A2AMessage)
  await waitFor(() => store.statesOf(started.task.id).includes("working"), 5000, "the task to be working")
  store.failing = true
  answer.resolve("the answer")
  await waitFor(() => log.lines.some((line) => line.msg === "task store failed to save the final state; retrying"), 5000, "the final save to fail")
  return { store, log, runner, id: started.task.id }
}

t.test("stop() lands a final save that waits for its retry, once the store is back", async (t) => {
  const { store, runner, id } = await taskWhoseFinalSaveFailed()
  store.failing = false
  await runner.stop(0)
  t.same(store.statesOf(id), ["submitted", "working", "completed"], "saved by the time stop() resolved")
})

t.test("stop() gives a final save the store still refuses one last try, then gives it up for restart recovery", async (t) => {
  const { store, log, runner, id } = await taskWhoseFinalSaveFailed()
  const before = store.refused
  await runner.stop(0)
  t.ok(store.refused > before, "one more try at stop")
  t.match(log.lines.at(-1), { level: "error", taskId: id, state: "completed", msg: "gave up saving the final state at shutdown; restart recovery will fail the task" })
  t.equal((await store.get(id))?.status.state, "working", "the store keeps the last state it took; recovery fails it later")
})
