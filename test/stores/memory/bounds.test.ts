import t from "tap"
import { withInternals } from "../../../lib/internals.js"
import { InMemoryTaskStore } from "../../../lib/stores/memory/store.js"
import { StoreFullError } from "../../../lib/stores/store-full.js"
import type { A2ATask, TaskState } from "../../../lib/types.js"
import { errorWith, sampleTask } from "../../fixtures/helpers.js"

/** A Task of about `chars` characters of text, owned by `owner` (undefined: created without authentication). */
function taskOf(id: string, state: TaskState, chars = 100, owner?: string): A2ATask {
  const task = sampleTask(id, state, { history: [{ kind: "message", messageId: `m-${id}`, role: "user", parts: [{ kind: "text", text: "x".repeat(chars) }] }] })
  return owner === undefined ? task : withInternals(task, { principal: owner })
}

/** What the store counts for a Task: 2 bytes a character of its JSON, and 1 KiB. */
const weight = (task: A2ATask) => 2 * JSON.stringify(task).length + 1024

const ids = async (store: InMemoryTaskStore) => (await store.list({ pageSize: 100 })).tasks.map((task) => task.id).sort()

t.test("a byte budget: finished Tasks go first, oldest first; a new Task that leaves no room is refused; unfinished ones stay", async (t) => {
  const one = weight(taskOf("a", "completed", 10_000))
  // Room for four such Tasks, one owner allowed all of it.
  const store = new InMemoryTaskStore({ maxBytes: 4 * one + 100, maxBytesPerOwner: 4 * one + 100 })
  await store.save(taskOf("done-1", "completed", 10_000))
  await store.save(taskOf("open-1", "working", 10_000))
  await store.save(taskOf("done-2", "failed", 10_000))
  await store.save(taskOf("open-2", "submitted", 10_000))
  t.same(await ids(store), ["done-1", "done-2", "open-1", "open-2"], "four fit")
  t.ok(store.usage.bytes <= store.bounds.maxBytes)

  await store.save(taskOf("open-3", "working", 10_000))
  t.same(await ids(store), ["done-2", "open-1", "open-2", "open-3"], "the oldest finished Task made room")
  await store.save(taskOf("open-4", "working", 10_000))
  t.same(await ids(store), ["open-1", "open-2", "open-3", "open-4"], "then the next")

  const refused = await store.save(taskOf("open-5", "working", 10_000)).then(
    () => undefined,
    (err: unknown) => err,
  )
  t.type(refused, StoreFullError, "only unfinished Tasks are left: the new one is refused")
  t.match(refused, { limit: "maxBytes", value: store.bounds.maxBytes, message: /at capacity.*maxBytes.*raise opts\.maxBytes/ })
  t.same(await ids(store), ["open-1", "open-2", "open-3", "open-4"], "and nothing held was dropped for it")
  t.ok(store.usage.bytes <= store.bounds.maxBytes, "still within the budget")
})

t.test("at the budget, a running Task's next states are still saved, the final one included, and it is not the one dropped", async (t) => {
  const one = weight(taskOf("a", "working", 10_000))
  const store = new InMemoryTaskStore({ maxBytes: 2 * one + 100, maxBytesPerOwner: 2 * one + 100 })
  await store.save(taskOf("run-1", "working", 10_000))
  await store.save(taskOf("run-2", "working", 10_000))
  await t.rejects(store.save(taskOf("new", "submitted", 10_000)), StoreFullError, "full")

  // run-1 finishes with an answer that takes it past the budget: saved all the same.
  await store.save(taskOf("run-1", "completed", 20_000))
  t.equal((await store.get("run-1"))?.status.state, "completed", "the final state is saved, though it passes the budget")
  t.ok(store.usage.bytes > store.bounds.maxBytes, "the store is over its budget for now")
  await store.save(taskOf("run-2", "input-required", 10_000))
  t.equal((await store.get("run-2"))?.status.state, "input-required", "so is another transition")

  // The next save makes room from the finished Task: the store is back under its budget.
  await store.save(taskOf("run-2", "completed", 10_000))
  t.equal(await store.get("run-1"), undefined, "the older finished Task made room")
  t.equal((await store.get("run-2"))?.status.state, "completed", "the one just saved is kept")
  t.ok(store.usage.bytes <= store.bounds.maxBytes)
})

t.test("a follow-up that puts an interrupted Task back in line (submitted) must fit like a new Task; it grows nothing past the budget", async (t) => {
  const one = weight(taskOf("a", "working", 10_000))
  const store = new InMemoryTaskStore({ maxBytes: 3 * one, maxBytesPerOwner: 3 * one })
  await store.save(taskOf("asks", "input-required", 10_000))
  await store.save(taskOf("runs", "working", 10_000))
  // Room for the growth: saved.
  await store.save(taskOf("asks", "submitted", 10_500))
  await store.save(taskOf("asks", "input-required", 10_500))
  // A follow-up twice as large as the room left: refused, and what was held stays.
  await t.rejects(store.save(taskOf("asks", "submitted", 2 * 10_000 + 10_500)), { name: "StoreFullError", limit: "maxBytes" })
  t.equal((await store.get("asks"))?.status.state, "input-required", "the interrupted Task is as it was")
  t.ok(store.usage.bytes <= store.bounds.maxBytes, "still within the budget")
  // A running Task's own growth (working to input-required) is never refused, as before.
  await store.save(taskOf("runs", "input-required", 20_000))
  t.equal((await store.get("runs"))?.status.state, "input-required")
})

t.test("an entry budget works the same way", async (t) => {
  const store = new InMemoryTaskStore({ maxTasks: 3, maxTasksPerOwner: 3 })
  await store.save(taskOf("done-1", "canceled"))
  await store.save(taskOf("open-1", "working"))
  await store.save(taskOf("open-2", "working"))
  await store.save(taskOf("open-3", "working"))
  t.same(await ids(store), ["open-1", "open-2", "open-3"])
  await t.rejects(store.save(taskOf("open-4", "working")), { name: "StoreFullError", limit: "maxTasks", message: /maxTasks \(3 Tasks\)/ })
  await store.save(taskOf("open-1", "completed"))
  t.same(store.usage.tasks, 3, "a transition of a held Task is never refused")
  await store.save(taskOf("open-4", "working"))
  t.same(await ids(store), ["open-2", "open-3", "open-4"], "once one finished, it made room")
})

t.test("one principal filling the store does not push out another's finished Task", async (t) => {
  const store = new InMemoryTaskStore({ maxTasks: 10 })
  t.same([store.bounds.maxTasksPerOwner, store.bounds.maxBytesPerOwner], [5, Math.ceil(store.bounds.maxBytes / 2)], "each owner's share: half")
  await store.save(taskOf("bob-done", "completed", 100, "bob"))
  for (let i = 0; i < 100; i++) await store.save(taskOf(`alice-${i}`, "completed", 100, "alice"))
  t.ok(await store.get("bob-done"), "bob's finished Task is still there")
  t.same(store.usageOf("alice").tasks, 5, "alice's own finished Tasks made room for hers")
  t.ok(await store.get("alice-99"))
  t.equal(await store.get("alice-94"), undefined)

  // alice's share filled with unfinished Tasks: she is refused, bob and the unauthenticated are not.
  for (let i = 0; i < 5; i++) await store.save(taskOf(`alice-open-${i}`, "working", 100, "alice"))
  const refused = await store.save(taskOf("alice-more", "working", 100, "alice")).catch((err: unknown) => err)
  t.match(refused, { name: "StoreFullError", limit: "maxTasksPerOwner", owner: "alice", perOwner: true, message: /principal "alice".*maxTasksPerOwner \(5 Tasks\)/ })
  await store.save(taskOf("bob-open", "working", 100, "bob"))
  await store.save(taskOf("anon-open", "working", 100))
  t.ok(await store.get("bob-done"), "bob's finished Task is still there")
  t.same(store.usageOf(null).tasks, 1, "Tasks created without authentication have a share of their own")
  t.same(store.usage.tasks, 8)
})

t.test("a principal's share in bytes", async (t) => {
  const one = weight(taskOf("a", "completed", 5000, "alice"))
  const store = new InMemoryTaskStore({ maxBytes: 10 * one, maxBytesPerOwner: 3 * one + 1000 })
  await store.save(taskOf("bob-done", "completed", 5000, "bob"))
  for (let i = 0; i < 20; i++) await store.save(taskOf(`alice-${i}`, "completed", 5000, "alice"))
  t.ok(store.usageOf("alice").bytes <= store.bounds.maxBytesPerOwner, "alice stays within her share")
  t.same(store.usageOf("alice").tasks, 3)
  t.ok(await store.get("bob-done"))
  for (let i = 0; i < 3; i++) await store.save(taskOf(`alice-open-${i}`, "working", 5000, "alice"))
  await t.rejects(store.save(taskOf("alice-more", "working", 5000, "alice")), errorWith({ limit: "maxBytesPerOwner", owner: "alice" }))
  await store.save(taskOf("bob-open", "working", 5000, "bob"))
  t.same(store.usageOf("bob").tasks, 2)
})

t.test("past the total, the finished Tasks of the owner holding the most make room, not a light owner's", async (t) => {
  const store = new InMemoryTaskStore({ maxTasks: 5, maxTasksPerOwner: 3 })
  await store.save(taskOf("light-1", "completed", 100, "light")) // the oldest finished Task of all
  await store.save(taskOf("heavy-1", "completed", 100, "heavy"))
  await store.save(taskOf("heavy-2", "completed", 100, "heavy"))
  await store.save(taskOf("heavy-3", "working", 100, "heavy"))
  await store.save(taskOf("c-1", "working", 100, "c"))
  await store.save(taskOf("d-1", "working", 100, "d"))
  t.same(await ids(store), ["c-1", "d-1", "heavy-2", "heavy-3", "light-1"], "the heaviest owner's oldest finished Task went; the light owner's stayed")
  await store.save(taskOf("e-1", "working", 100, "e"))
  t.same(await ids(store), ["c-1", "d-1", "e-1", "heavy-3", "light-1"], "and again, while the heavy owner has finished Tasks")
  await store.save(taskOf("f-1", "working", 100, "f"))
  t.same(await ids(store), ["c-1", "d-1", "e-1", "f-1", "heavy-3"], "then the only owner left with a finished Task gives it up")
})

t.test("the accounting comes back to zero", async (t) => {
  const store = new InMemoryTaskStore({ maxTasks: 50 })
  for (let i = 0; i < 30; i++) await store.save(taskOf(`t-${i}`, i % 3 === 0 ? "working" : "completed", 10 * i, i % 2 ? "alice" : undefined))
  for (let i = 0; i < 30; i++) await store.save(taskOf(`t-${i}`, "failed", 5 * i, i % 2 ? "alice" : undefined))
  for (let i = 0; i < 30; i++) await store.delete(`t-${i}`)
  t.same(store.usage, { tasks: 0, bytes: 0 })
  t.same([store.usageOf("alice"), store.usageOf(null)], [{ tasks: 0, bytes: 0 }, { tasks: 0, bytes: 0 }])
})

t.test("terminalTtlMs drops a finished Task that long after its save, checked as the store is used (retention is the contract's)", async (t) => {
  let now = Date.parse("2026-01-01T00:00:00Z")
  t.capture(Date, "now", () => now)
  const store = new InMemoryTaskStore({ terminalTtlMs: 60_000 })
  await store.save(taskOf("done", "completed"))
  await store.save(taskOf("open", "working"))
  now += 59_999
  t.ok(await store.get("done"), "kept until its TTL is up")
  now += 1
  t.equal(await store.get("done"), undefined, "expired after it")
  t.ok(await store.get("open"), "an unfinished Task has no TTL")
  t.same(store.usage.tasks, 1)
  t.throws(() => new InMemoryTaskStore({ retention: { terminalTtl: "soon" } }), /opts\.retention should be/)
  t.throws(() => new InMemoryTaskStore({ retention: { terminalTtl: 10 }, terminalTtlMs: 10 }), /give one/)
})

t.test("bad bounds are refused by name", async (t) => {
  for (const name of ["maxTasks", "maxBytes", "maxTasksPerOwner", "maxBytesPerOwner"]) {
    t.throws(() => new InMemoryTaskStore({ [name]: 0 }), new RegExp(`opts\\.${name} should be a positive integer`))
    t.throws(() => new InMemoryTaskStore({ [name]: 1.5 }), new RegExp(`opts\\.${name}`))
  }
  const store = new InMemoryTaskStore({ maxTasks: 10, maxTasksPerOwner: 100 })
  t.equal(store.bounds.maxTasksPerOwner, 10, "a share is never more than the total")
  t.ok(new InMemoryTaskStore().bounds.maxBytes > 0, "the default budget comes from the heap limit")
})
