import { EventEmitter } from "node:events"
import type { FastifyInstance } from "fastify"
import t, { type Test } from "tap"
import { createLocalClient, type ModelFunction } from "../../lib/client/client.js"
import { currentRunner, withInternals } from "../../lib/internals.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { TaskConflictError, type LeaseBook, type TaskStore } from "../../lib/stores/task-store.js"
import { TERMINAL_STATES, type A2ATask } from "../../lib/types.js"
import { a2aApp, deferred, injectRpc, readSse, rpc, userMessage, waitFor } from "../fixtures/helpers.js"

/**
 * Several servers on one shared store, in one process: a memory store with
 * the shared-store extras (conflict rule, watch, leases), so the runner,
 * follower and recovery logic is tested fast and without a database. The
 * real backends run the same scenarios in their own tests.
 */
class SharedMemoryStore implements TaskStore {
  private readonly inner = new InMemoryTaskStore()
  private readonly changes = new EventEmitter()
  readonly leaseExpiry = new Map<string, number>()
  /** Every renew, by instance, in order. */
  readonly renewals: string[] = []
  get = (id: string) => this.inner.get(id)
  list = this.inner.list.bind(this.inner)
  async save(task: A2ATask): Promise<void> {
    const stored = await this.inner.get(task.id)
    if (stored && TERMINAL_STATES.has(stored.status.state)) throw new TaskConflictError(task.id, stored)
    await this.inner.save(task)
    setImmediate(() => this.changes.emit("change", task.id))
  }
  async watch(onChange: (id: string) => void) {
    this.changes.on("change", onChange)
    return async () => void this.changes.off("change", onChange)
  }
  leases: LeaseBook = {
    renew: async (instance, ttlMs) => {
      this.renewals.push(instance)
      this.leaseExpiry.set(instance, Date.now() + ttlMs)
    },
    isAlive: async (instance) => (this.leaseExpiry.get(instance) ?? 0) > Date.now(),
    release: async (instance) => void this.leaseExpiry.delete(instance),
  }
}

const server = (t: Test, store: TaskStore, respond: ModelFunction, leaseTtlMs = 15_000) => a2aApp(t, { client: createLocalClient(respond), store, leaseTtlMs })

const call = async (app: FastifyInstance, body: unknown) => (await injectRpc(app, body)).json()

t.test("a cancel sent to server B stops the work running on server A", async (t) => {
  const store = new SharedMemoryStore()
  let seen: AbortSignal | undefined
  const hold = deferred<string>()
  const a = await server(t, store, ({ signal }) => ((seen = signal), hold.promise))
  const b = await server(t, store, () => "b never runs it")
  const sent = await call(a, rpc("SendMessage", { message: userMessage("long job") }))
  const id = sent.result.id
  await waitFor(() => seen !== undefined)
  const canceled = await call(b, rpc("CancelTask", { id }))
  t.equal(canceled.result.status.state, "canceled")
  await waitFor(() => seen!.aborted, 5000, "A's run to see the abort")
  hold.resolve("too late")
  t.equal((await call(a, rpc("GetTask", { id }))).result.status.state, "canceled")
  // Closing A waits for its run to let go of the task: whatever it would still save is saved by then.
  await a.close()
  t.equal((await store.get(id))?.status.state, "canceled", "A's late answer did not overwrite the cancel")
})

t.test("a late save that would replace a final state is refused, even without the notification", async (t) => {
  const store = new SharedMemoryStore()
  const hold = deferred<string>()
  const a = await server(t, store, () => hold.promise)
  const sent = await call(a, rpc("SendMessage", { message: userMessage("x") }))
  await waitFor(async () => (await store.get(sent.result.id))?.status.state === "working")
  // Another server's cancel lands behind A's back (no watch event reaches A).
  const stored = (await store.get(sent.result.id))!
  await InMemoryTaskStore.prototype.save.call((store as unknown as { inner: InMemoryTaskStore }).inner, { ...stored, status: { state: "canceled", timestamp: new Date().toISOString() } })
  hold.resolve("answer")
  await waitFor(async () => (await call(a, rpc("GetTask", { id: sent.result.id }))).result.status.state === "canceled")
  t.equal((await store.get(sent.result.id))?.status.state, "canceled", "the first final word wins")
})

t.test("a stream opened on B sees A's status and artifact updates", async (t) => {
  const store = new SharedMemoryStore()
  const hold = deferred<string>()
  const a = await server(t, store, () => hold.promise)
  const b = await server(t, store, () => "unused")
  const sent = await call(a, rpc("SendMessage", { message: userMessage("x") }))
  await waitFor(async () => (await store.get(sent.result.id))?.status.state === "working")
  const res = await b.inject({
    method: "POST",
    url: "/",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    payload: JSON.stringify(rpc("SubscribeToTask", { id: sent.result.id })),
    payloadAsStream: true,
  })
  const stream = readSse(res.stream())
  await waitFor(() => stream.messages.length === 1, 5000, "B's stream to send the task as it is")
  hold.resolve("from A")
  const events = (await stream.done).map((message) => message.result)
  t.match(events, [
    { task: { status: { state: "TASK_STATE_WORKING" } } },
    { artifactUpdate: { artifact: { parts: [{ text: "from A" }] } } },
    { statusUpdate: { status: { state: "TASK_STATE_COMPLETED" } } },
  ])
})

t.test("a dead server's tasks are recovered by a live one once its lease expires; a live one's never", async (t) => {
  const store = new SharedMemoryStore()
  const now = () => new Date().toISOString()
  const ghost = { ...currentRunner(), host: "another-host", instance: "ghost" }
  const alive = { ...currentRunner(), host: "another-host", instance: "alive" }
  await store.save(withInternals({ id: "ghost-task", contextId: "c", status: { state: "working", timestamp: now() } }, { runner: ghost }))
  await store.save(withInternals({ id: "alive-task", contextId: "c", status: { state: "working", timestamp: now() } }, { runner: alive }))
  await store.leases.renew("ghost", 10_000)
  await store.leases.renew("alive", 10 * 60_000) // renewed as a live server does: it does not run out during the test
  const b = await server(t, store, () => "x", 150)
  t.equal((await store.get("ghost-task"))?.status.state, "working", "a server on another host with a live lease keeps its task")
  store.leaseExpiry.set("ghost", Date.now() - 1) // the ghost stopped renewing
  await waitFor(async () => (await store.get("ghost-task"))?.status.state === "failed", 5000, "the sweep to recover the ghost's task")
  t.match((await store.get("ghost-task"))?.status.message?.parts[0], { text: /Interrupted/ })
  t.equal((await store.get("alive-task"))?.status.state, "working", "the live server's task is untouched")
  const own = () => [...store.leaseExpiry.keys()].filter((instance) => instance !== "ghost" && instance !== "alive")
  t.equal(own().length, 1, "the server holds a lease of its own")
  await waitFor(() => store.renewals.filter((instance) => instance === own()[0]).length >= 2, 5000, "the server to renew its own lease")
  await b.close()
  t.same(own(), [], "and releases it on close")
})
