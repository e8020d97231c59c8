import t, { type Test } from "tap"
import type { PushClaim, PushConfigRecord, PushEvent, PushStore, TraceContext } from "../lib/stores/push-store.js"
import { TaskConflictError, type TaskStore } from "../lib/stores/task-store.js"
import type { A2ATask, TaskState } from "../lib/types.js"
import { sampleTask, waitFor } from "./helpers.js"

/**
 * The PushStore contract (TaskStore.push), one suite for every store that
 * has it: each store's test file calls pushStoreContract() with a harness.
 */
export interface PushHarness {
  /**
   * A fresh, empty store, and a way to open another store on the same medium
   * (directory, tables, buckets): a second process, or the same one after a
   * restart. Every store made is closed when the test ends.
   */
  make(t: Test): Promise<{ store: TaskStore; another: () => TaskStore }>
  /** True for stores that refuse to replace a terminal Task (TaskConflictError). */
  refusesTerminal?: boolean
  /** False for a store whose claims live in one process only (memory): the cases with two stores are left out. */
  shared?: boolean
  /** True for stores with `push.watchOutbox`. */
  watchesOutbox?: boolean
  /** True for stores with `push.oldestPendingAt` (the metrics' push age gauge). */
  tellsOldestPending?: boolean
}

const config = (taskId: string, id: string, extra: Partial<PushConfigRecord> = {}): PushConfigRecord => ({
  taskId,
  id,
  version: "1.0",
  url: `https://hooks.example.com/${id}`,
  createdAt: "2026-01-01T00:00:00.000Z",
  ...extra,
})

const event = (task: A2ATask): PushEvent => ({ kind: "status", task })

function pushOf(store: TaskStore): PushStore {
  if (store.push === undefined) throw new Error("the store has no push capability")
  return store.push
}

/** Saves the Task in `state` with its status event. */
async function saveState(store: TaskStore, id: string, state: TaskState): Promise<A2ATask> {
  const task = sampleTask(id, state)
  await pushOf(store).saveWithEvent(task, event(task))
  return task
}

/** What a claim gives, as "task/config#state" in seq order. */
const described = (claims: PushClaim[]) =>
  [...claims].sort((a, b) => a.item.seq - b.item.seq).map((c) => `${c.item.taskId}/${c.item.configId}#${c.item.event.task.status.state}`)

const LONG_LEASE = 60_000

/** A save's trace context, as the server's observe layer gives it. */
const TRACED: TraceContext = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "vendor=opaque" }
const OTHER_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

export function pushStoreContract(name: string, harness: PushHarness): void {
  t.test(`${name}: push configs are put, read, listed by id, replaced and deleted`, async (t) => {
    const { store } = await harness.make(t)
    const push = pushOf(store)
    await store.save(sampleTask("t-1"))
    t.equal(await push.getConfig("t-1", "a"), undefined, "no config yet")
    t.same(await push.listConfigs("t-1"), [], "no configs yet")
    await push.putConfig(config("t-1", "b", { token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } }))
    await push.putConfig(config("t-1", "a"))
    await push.putConfig(config("t-1", "a/../x y"))
    t.same(await push.getConfig("t-1", "b"), config("t-1", "b", { token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } }), "reads back what was put")
    t.same((await push.listConfigs("t-1")).map((c) => c.id), ["a", "a/../x y", "b"], "listed in id order")
    await push.putConfig(config("t-1", "a", { url: "https://hooks.example.com/other" }))
    t.equal((await push.getConfig("t-1", "a"))?.url, "https://hooks.example.com/other", "a put with the same id replaces")
    t.equal((await push.listConfigs("t-1")).length, 3)
    await push.deleteConfig("t-1", "a")
    await push.deleteConfig("t-1", "a")
    await push.deleteConfig("t-1", "never")
    t.equal(await push.getConfig("t-1", "a"), undefined, "deleted, and deleting again is no error")
    t.same(await push.listConfigs("t-2"), [], "another Task has none")
  })

  t.test(`${name}: saveWithEvent enqueues one notification per config, and claims give each channel its lowest first`, async (t) => {
    const { store } = await harness.make(t)
    const push = pushOf(store)
    t.equal(await push.saveWithEvent(sampleTask("quiet"), event(sampleTask("quiet"))), 0, "a Task without configs enqueues nothing, and says so")
    t.same(await push.claim("i-1", 10, LONG_LEASE, Date.now()), [], "nothing to claim")
    t.equal((await store.get("quiet"))?.status.state, "submitted", "and is saved")

    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    await push.putConfig(config("t-1", "b"))
    await saveState(store, "t-1", "working")
    await saveState(store, "t-1", "completed")
    t.equal((await store.get("t-1"))?.status.state, "completed", "the Task is saved")

    const first = await push.claim("i-1", 10, LONG_LEASE, Date.now())
    t.same(described(first), ["t-1/a#working", "t-1/b#working"], "only the lowest of each channel")
    t.ok(first[0].item.key !== first[1].item.key, "each notification has its own key")
    t.match(first[0], { config: { taskId: "t-1", url: /hooks\.example\.com/ }, item: { attempts: 0, taskId: "t-1" } })
    t.same(await push.claim("i-1", 10, LONG_LEASE, Date.now()), [], "nothing else while the heads are held")

    const a = first.find((c) => c.item.configId === "a")!
    const b = first.find((c) => c.item.configId === "b")!
    await push.ack(a)
    t.same(described(await push.claim("i-1", 10, LONG_LEASE, Date.now())), ["t-1/a#completed"], "acked: the next of that channel, b still held")
    await push.ack(b)
    const rest = await push.claim("i-1", 10, LONG_LEASE, Date.now())
    t.same(described(rest), ["t-1/b#completed"])
    t.ok(rest[0].item.seq > b.item.seq, "later events have higher seq")
    await push.ack(rest[0])
    t.same(await push.claim("i-1", 10, LONG_LEASE, Date.now()), [], "the outbox is empty")
  })

  t.test(`${name}: a config put before its Task's first save (an inline config) gets that save's notification`, async (t) => {
    const { store } = await harness.make(t)
    const push = pushOf(store)
    await push.putConfig(config("fresh", "a"))
    t.same((await push.listConfigs("fresh")).map((c) => c.id), ["a"], "kept, though no Task has the id yet")
    await saveState(store, "fresh", "submitted")
    const claims = await push.claim("i-1", 10, LONG_LEASE, Date.now())
    t.same(described(claims), ["fresh/a#submitted"], "the first save's notification is enqueued")
    await push.deleteConfig("fresh", "a")
    t.same(await push.listConfigs("fresh"), [], "and it can be taken away again")
  })

  t.test(`${name}: one save with several events enqueues each, in the order given, for every config`, async (t) => {
    const { store } = await harness.make(t)
    const push = pushOf(store)
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    await push.putConfig(config("t-1", "b"))
    const done = sampleTask("t-1", "completed")
    t.equal(await push.saveWithEvent(sampleTask("t-1", "working")), 0, "no event: a plain save, nothing enqueued")
    // A completion: its artifact, then its status, in one save.
    t.equal(await push.saveWithEvent(done, { kind: "artifact", task: done, artifactIndex: 0 }, event(done)), 4, "two events for two configs: four notifications")
    const kinds = async () => {
      const claims = await push.claim("i-1", 10, LONG_LEASE, Date.now())
      for (const claim of claims) await push.ack(claim)
      return claims.map((c) => `${c.item.configId}:${c.item.event.kind}`).sort()
    }
    t.same(await kinds(), ["a:artifact", "b:artifact"], "each channel's artifact first")
    t.same(await kinds(), ["a:status", "b:status"], "then its status")
    t.same(await kinds(), [], "and nothing more")
  })

  t.test(`${name}: claim respects its limit, and a save without an event keeps what is pending deliverable`, async (t) => {
    const { store } = await harness.make(t)
    const push = pushOf(store)
    for (const id of ["t-1", "t-2", "t-3"]) {
      await store.save(sampleTask(id))
      await push.putConfig(config(id, "a"))
      await saveState(store, id, "working")
    }
    // A save that reports nothing (and a Task that carries none of the store's bookkeeping) must not lose what is queued.
    await store.save(sampleTask("t-1", "working", { metadata: { note: 1 } }))
    await push.saveWithEvent(sampleTask("t-2", "working", { metadata: { note: 2 } }))
    const two = await push.claim("i-1", 2, LONG_LEASE, Date.now())
    t.equal(two.length, 2, "at most the limit")
    const last = await push.claim("i-1", 2, LONG_LEASE, Date.now())
    t.equal(last.length, 1, "the rest")
    t.same([...two, ...last].map((c) => c.item.taskId).sort(), ["t-1", "t-2", "t-3"], "every Task's notification, saves without events in between")
  })

  t.test(`${name}: retryLater, deadLetter and listDeadLetters`, async (t) => {
    const { store } = await harness.make(t)
    const push = pushOf(store)
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    await saveState(store, "t-1", "working")
    await saveState(store, "t-1", "completed")
    const now = Date.now()
    const [first] = await push.claim("i-1", 10, LONG_LEASE, now)
    await push.retryLater(first, now + 60_000, "HTTP 503")
    t.same(await push.claim("i-1", 10, LONG_LEASE, now), [], "not due before notBefore, and the next waits behind it")
    const [again] = await push.claim("i-2", 10, LONG_LEASE, now + 60_001)
    t.match(again.item, { key: first.item.key, seq: first.item.seq, attempts: 1, lastError: "HTTP 503" }, "the same notification, one attempt more, any instance")

    t.same(await push.listDeadLetters(10), [], "no dead letters yet")
    // Its second attempt, the one answered 404, ended it: two in all.
    await push.deadLetter(again, "HTTP 404 is final", 2)
    const dead = await push.listDeadLetters(10)
    t.match(dead, [{ key: first.item.key, taskId: "t-1", configId: "a", reason: "HTTP 404 is final", attempts: 2 }], "kept for an operator, its last attempt counted")
    t.type(dead[0].deadAt, "number")
    const [next] = await push.claim("i-1", 10, LONG_LEASE, now + 60_001)
    t.equal(next.item.event.task.status.state, "completed", "the next notification of the channel comes up")
    await push.deadLetter(next, "too old")
    t.same((await push.listDeadLetters(10)).map((d) => d.reason), ["too old", "HTTP 404 is final"], "newest first")
    t.equal((await push.listDeadLetters(1))[0].attempts, 0, "given up before any attempt: none counted")
    t.equal((await push.listDeadLetters(1)).length, 1, "at most the limit")
  })

  t.test(`${name}: a notification keeps its save's trace context beside its event, through claims and retries, into its dead letter; one given none has none`, async (t) => {
    const { store } = await harness.make(t)
    const push = pushOf(store)
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    const working = sampleTask("t-1", "working")
    await push.saveWithEvent(working, { ...event(working), traceContext: TRACED })
    // The event of a copy of the Task saved (stores may keep such an event apart from the Task's own text).
    const input = sampleTask("t-1", "input-required")
    await push.saveWithEvent(input, { ...event(structuredClone(input)), traceContext: { traceparent: OTHER_TRACEPARENT } })
    const again = sampleTask("t-1", "working")
    await push.saveWithEvent(again, { ...event(again), traceContext: { traceparent: 42 } as unknown as TraceContext })
    const done = sampleTask("t-1", "completed")
    await push.saveWithEvent(done, event(done))

    const now = Date.now()
    const [first] = await push.claim("i-1", 10, LONG_LEASE, now)
    t.same(first.item.traceContext, TRACED, "claimed with the trace context its save gave")
    t.notOk("traceContext" in first.item.event, "kept beside the event, not in it")
    await push.retryLater(first, now + 1, "HTTP 503")
    const [retried] = await push.claim("i-2", 10, LONG_LEASE, now + 2)
    t.same(retried.item, { ...first.item, attempts: 1, notBefore: now + 1, lastError: "HTTP 503" }, "a retry keeps it")
    await push.deadLetter(retried, "HTTP 404 is final", 2)
    t.same((await push.listDeadLetters(1))[0].traceContext, TRACED, "and so does the dead letter")

    const [second] = await push.claim("i-1", 10, LONG_LEASE, now + 2)
    t.equal(second.item.event.task.status.state, "input-required")
    t.same(second.item.traceContext, { traceparent: OTHER_TRACEPARENT }, "each save's own, without a tracestate when it had none")
    t.notOk("traceContext" in second.item.event)
    await push.ack(second)

    const [malformed] = await push.claim("i-1", 10, LONG_LEASE, now + 2)
    t.equal(malformed.item.event.task.status.state, "working")
    t.notOk("traceContext" in malformed.item || "traceContext" in malformed.item.event, "one that is not a trace context is not kept")
    await push.ack(malformed)

    const [untraced] = await push.claim("i-1", 10, LONG_LEASE, now + 2)
    t.equal(untraced.item.event.task.status.state, "completed")
    t.notOk("traceContext" in untraced.item, "an event given none: a notification without one")
    await push.deadLetter(untraced, "gone")
    t.notOk("traceContext" in (await push.listDeadLetters(1))[0], "and a dead letter without one")
  })

  t.test(`${name}: deleting a config or the Task removes its configs and notifications`, async (t) => {
    const { store } = await harness.make(t)
    const push = pushOf(store)
    for (const id of ["t-1", "t-2"]) {
      await store.save(sampleTask(id))
      await push.putConfig(config(id, "a"))
      await push.putConfig(config(id, "b"))
      await saveState(store, id, "working")
    }
    await push.deleteConfig("t-1", "b")
    await store.delete!("t-2")
    t.same(await push.listConfigs("t-2"), [], "the deleted Task's configs are gone")
    t.same(described(await push.claim("i-1", 10, LONG_LEASE, Date.now())), ["t-1/a#working"], "only the notifications of what is left")
  })

  if (harness.refusesTerminal) {
    t.test(`${name}: a refused save enqueues nothing`, async (t) => {
      const { store } = await harness.make(t)
      const push = pushOf(store)
      await store.save(sampleTask("t-1"))
      await push.putConfig(config("t-1", "a"))
      await saveState(store, "t-1", "canceled")
      await t.rejects(saveState(store, "t-1", "completed"), TaskConflictError, "the terminal Task is not replaced")
      const claims = await push.claim("i-1", 10, LONG_LEASE, Date.now())
      t.same(described(claims), ["t-1/a#canceled"])
      await push.ack(claims[0])
      t.same(await push.claim("i-1", 10, LONG_LEASE, Date.now()), [], "no notification of the refused save")
    })
  }

  if (harness.tellsOldestPending) {
    t.test(`${name}: oldestPendingAt is when the first notification still in the outbox was enqueued`, async (t) => {
      const { store } = await harness.make(t)
      const push = pushOf(store)
      t.equal(await push.oldestPendingAt!(), undefined, "none pending")
      await store.save(sampleTask("t-1"))
      await push.putConfig(config("t-1", "a"))
      const before = Date.now()
      await saveState(store, "t-1", "working")
      await saveState(store, "t-1", "completed")
      const [first] = await push.claim("i-1", 10, LONG_LEASE, Date.now())
      const oldest = await push.oldestPendingAt!()
      t.equal(oldest, first.item.enqueuedAt, "the first enqueued, claimed or not")
      t.ok(oldest! >= before && oldest! <= Date.now(), "a time of this run")
      await push.retryLater(first, Date.now(), "HTTP 503")
      t.equal(await push.oldestPendingAt!(), first.item.enqueuedAt, "a retry keeps its place")
      const [again] = await push.claim("i-1", 10, LONG_LEASE, Date.now())
      await push.ack(again)
      const [next] = await push.claim("i-1", 10, LONG_LEASE, Date.now())
      t.equal(await push.oldestPendingAt!(), next.item.enqueuedAt, "once delivered, the next one's")
      await push.deadLetter(next, "gone")
      t.equal(await push.oldestPendingAt!(), undefined, "a dead letter is not pending")
    })
  }

  if (harness.shared === false) return

  if (harness.watchesOutbox) {
    t.test(`${name}: watchOutbox tells another store that a save enqueued notifications`, async (t) => {
      const { store, another } = await harness.make(t)
      const push = pushOf(store)
      const other = pushOf(another())
      let woken = 0
      const stop = await other.watchOutbox!(() => void woken++)
      t.teardown(stop)
      await store.save(sampleTask("quiet"))
      await store.save(sampleTask("t-1"))
      await push.putConfig(config("t-1", "a"))
      await saveState(store, "t-1", "working")
      await waitFor(() => woken > 0, 15_000, "the outbox watch to fire")
      t.same(described(await other.claim("i-2", 10, LONG_LEASE, Date.now())), ["t-1/a#working"], "and the woken store claims it")
      await stop()
    })
  }

  t.test(`${name}: a restarted store still has the configs and the pending notifications`, async (t) => {
    const { store, another } = await harness.make(t)
    const push = pushOf(store)
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    const working = sampleTask("t-1", "working")
    await push.saveWithEvent(working, { ...event(working), traceContext: TRACED })
    await store.close?.()
    const restarted = pushOf(another())
    t.same((await restarted.listConfigs("t-1")).map((c) => c.id), ["a"])
    const claims = await restarted.claim("i-2", 10, LONG_LEASE, Date.now())
    t.same(described(claims), ["t-1/a#working"], "pending notifications survive")
    t.same(claims[0].item.traceContext, TRACED, "with their trace context")
  })

  t.test(`${name}: two stores on one medium never hold one notification at once; an expired lease is taken over`, async (t) => {
    const { store, another } = await harness.make(t)
    const push = pushOf(store)
    const other = pushOf(another())
    for (let i = 0; i < 6; i++) {
      const id = `t-${i}`
      await store.save(sampleTask(id))
      await push.putConfig(config(id, "a"))
      await saveState(store, id, "working")
    }
    const [mine, theirs] = await Promise.all([push.claim("i-1", 10, LONG_LEASE, Date.now()), other.claim("i-2", 10, LONG_LEASE, Date.now())])
    t.equal(mine.length + theirs.length, 6, "every notification claimed once")
    const keys = new Set([...mine, ...theirs].map((c) => c.item.key))
    t.equal(keys.size, 6, "no notification held by both")

    await store.save(sampleTask("late"))
    await push.putConfig(config("late", "a"))
    await saveState(store, "late", "working")
    const short = await push.claim("dying", 10, 300, Date.now())
    t.same(described(short), ["late/a#working"])
    t.same(await other.claim("i-2", 10, LONG_LEASE, Date.now()), [], "held under an unexpired lease")
    let taken: PushClaim[] = []
    // On the file store the notification is in its writer's journal: the writer's settle (every 5 s) writes it out
    // once the lease ran out, and the other store's full scan (every 5 s) finds it.
    await waitFor(async () => (taken = await other.claim("i-2", 10, LONG_LEASE, Date.now())).length > 0, 30_000, "the expired lease to be taken over")
    t.equal(taken[0].item.key, short[0].item.key, "the same notification, by another instance")
    // The dead instance's late retry must not release the new holder's claim.
    await push.retryLater(short[0], Date.now(), "late")
    t.same(await push.claim("i-3", 10, LONG_LEASE, Date.now()), [], "still held by the instance that took it over")
    await other.ack(taken[0])
  })
}
