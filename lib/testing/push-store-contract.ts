import type { PushClaim, PushConfigRecord, PushEvent, PushStore, TraceContext } from "../stores/push-store.js"
import { TaskConflictError, type TaskStore } from "../stores/task-store.js"
import type { A2ATask, TaskState } from "../types.js"
import {
  equal,
  matches,
  ok,
  openStore,
  rejects,
  runChecks,
  same,
  sampleTask,
  waitFor,
  type Awaitable,
  type Check,
  type CheckContext,
  type ContractFailure,
  type ContractOptions,
  type StoreWithPeer,
} from "./checks.js"

/**
 * Makes a fresh, empty store for one check. Return `{ store, another }` when
 * a second store can be opened on the same medium: the checks of two
 * instances and of a restart run only then.
 */
export type MakePushStore = () => Awaitable<TaskStore | StoreWithPeer>

/** Options of runPushStoreContract. */
export interface PushStoreContractOptions extends ContractOptions {
  /** True when the store refuses to replace a terminal Task (TaskConflictError): the check that a refused save enqueues nothing runs. */
  refusesTerminal?: boolean
}

type Opened = { store: TaskStore; push: PushStore; another?: () => Promise<TaskStore> }
type PushCheck = Check<MakePushStore>

/** A check that runs `body` when the store has `push` (and, with `needs`, what else it names). */
const check = (name: string, body: (opened: Opened) => Promise<void>, needs: (opened: Opened) => boolean = () => true): PushCheck => ({
  name,
  run: async (make: MakePushStore, context: CheckContext) => {
    const { store, another } = await openStore(make, context)
    if (store.push === undefined) return
    const opened = { store, push: store.push, another }
    if (needs(opened)) await body(opened)
  },
})

const config = (taskId: string, id: string, extra: Partial<PushConfigRecord> = {}): PushConfigRecord => ({
  taskId,
  id,
  version: "1.0",
  url: `https://hooks.example.com/${id}`,
  createdAt: "2026-01-01T00:00:00.000Z",
  ...extra,
})

const event = (task: A2ATask): PushEvent => ({ kind: "status", task })

/** Saves the Task in `state` with its status event. */
async function saveState(push: PushStore, id: string, state: TaskState): Promise<A2ATask> {
  const task = sampleTask(id, state)
  await push.saveWithEvent(task, event(task))
  return task
}

/** What claims give, as "task/config#state" in seq order. */
const described = (claims: PushClaim[]) =>
  [...claims].sort((a, b) => a.item.seq - b.item.seq).map((c) => `${c.item.taskId}/${c.item.configId}#${c.item.event.task.status.state}`)

const LONG_LEASE = 60_000
const TRACED: TraceContext = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "vendor=opaque" }
const OTHER_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

/** Claims whatever is due for instance i-1, acking each, and describes it. */
async function drained(push: PushStore): Promise<string[]> {
  const claims = await push.claim("i-1", 10, LONG_LEASE, Date.now())
  for (const claim of claims) await push.ack(claim)
  return claims.map((c) => `${c.item.configId}:${c.item.event.kind}`).sort()
}

const PUSH_CHECKS: readonly PushCheck[] = [
  check("push configs are put, read, listed by id, replaced and deleted", async ({ store, push }) => {
    await store.save(sampleTask("t-1"))
    equal(await push.getConfig("t-1", "a"), undefined, "getConfig before any put")
    same(await push.listConfigs("t-1"), [], "listConfigs before any put")
    const withAuth = config("t-1", "b", { token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } })
    await push.putConfig(withAuth)
    await push.putConfig(config("t-1", "a"))
    await push.putConfig(config("t-1", "a/../x y"))
    same(await push.getConfig("t-1", "b"), withAuth, "getConfig of what was put")
    same((await push.listConfigs("t-1")).map((c) => c.id), ["a", "a/../x y", "b"], "listConfigs, in id order")
    await push.putConfig(config("t-1", "a", { url: "https://hooks.example.com/other" }))
    equal((await push.getConfig("t-1", "a"))?.url, "https://hooks.example.com/other", "the url after a put with the same id")
    equal((await push.listConfigs("t-1")).length, 3, "the number of configs after a replacing put")
    await push.deleteConfig("t-1", "a")
    await push.deleteConfig("t-1", "a")
    await push.deleteConfig("t-1", "never")
    equal(await push.getConfig("t-1", "a"), undefined, "getConfig after deleteConfig")
    same(await push.listConfigs("t-2"), [], "listConfigs of another Task")
  }),
  check("saveWithEvent enqueues one notification per config; claims give each channel its lowest first", async ({ store, push }) => {
    equal(await push.saveWithEvent(sampleTask("quiet"), event(sampleTask("quiet"))), 0, "saveWithEvent of a Task without configs")
    same(await push.claim("i-1", 10, LONG_LEASE, Date.now()), [], "a claim with nothing enqueued")
    equal((await store.get("quiet"))?.status.state, "submitted", "the Task saved by saveWithEvent")
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    await push.putConfig(config("t-1", "b"))
    await saveState(push, "t-1", "working")
    await saveState(push, "t-1", "completed")
    equal((await store.get("t-1"))?.status.state, "completed", "the Task after two saveWithEvent")
    const first = await push.claim("i-1", 10, LONG_LEASE, Date.now())
    same(described(first), ["t-1/a#working", "t-1/b#working"], "the first claim: the lowest of each channel")
    ok(first[0].item.key !== first[1].item.key, "two notifications share a key")
    matches(first[0], { config: { taskId: "t-1", url: /hooks\.example\.com/ }, item: { attempts: 0, taskId: "t-1" } }, "a claim")
    same(await push.claim("i-1", 10, LONG_LEASE, Date.now()), [], "a claim while each channel's head is held")
    const a = first.find((c) => c.item.configId === "a")!
    const b = first.find((c) => c.item.configId === "b")!
    await push.ack(a)
    same(described(await push.claim("i-1", 10, LONG_LEASE, Date.now())), ["t-1/a#completed"], "a claim after acking channel a's head")
    await push.ack(b)
    const rest = await push.claim("i-1", 10, LONG_LEASE, Date.now())
    same(described(rest), ["t-1/b#completed"], "a claim after acking channel b's head")
    ok(rest[0].item.seq > b.item.seq, "a later event has a seq no higher than an earlier one")
    await push.ack(rest[0])
    same(await push.claim("i-1", 10, LONG_LEASE, Date.now()), [], "a claim once every notification was acked")
  }),
  check("a config put before its Task's first save gets that save's notification", async ({ push }) => {
    await push.putConfig(config("fresh", "a"))
    same((await push.listConfigs("fresh")).map((c) => c.id), ["a"], "a config of a Task not saved yet")
    await saveState(push, "fresh", "submitted")
    same(described(await push.claim("i-1", 10, LONG_LEASE, Date.now())), ["fresh/a#submitted"], "the first save's notification")
    await push.deleteConfig("fresh", "a")
    same(await push.listConfigs("fresh"), [], "listConfigs after deleteConfig")
  }),
  check("one save with several events enqueues each, in order, for every config", async ({ store, push }) => {
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    await push.putConfig(config("t-1", "b"))
    const done = sampleTask("t-1", "completed")
    equal(await push.saveWithEvent(sampleTask("t-1", "working")), 0, "saveWithEvent without an event")
    equal(await push.saveWithEvent(done, { kind: "artifact", task: done, artifactIndex: 0 }, event(done)), 4, "two events for two configs")
    same(await drained(push), ["a:artifact", "b:artifact"], "the first claim: each channel's artifact")
    same(await drained(push), ["a:status", "b:status"], "the second claim: each channel's status")
    same(await drained(push), [], "the third claim")
  }),
  check("claim respects its limit; a save without an event keeps what is pending", async ({ store, push }) => {
    for (const id of ["t-1", "t-2", "t-3"]) {
      await store.save(sampleTask(id))
      await push.putConfig(config(id, "a"))
      await saveState(push, id, "working")
    }
    await store.save(sampleTask("t-1", "working", { metadata: { note: 1 } }))
    await push.saveWithEvent(sampleTask("t-2", "working", { metadata: { note: 2 } }))
    const two = await push.claim("i-1", 2, LONG_LEASE, Date.now())
    equal(two.length, 2, "the size of a claim of limit 2 with three due")
    const last = await push.claim("i-1", 2, LONG_LEASE, Date.now())
    equal(last.length, 1, "the size of the next claim")
    same([...two, ...last].map((c) => c.item.taskId).sort(), ["t-1", "t-2", "t-3"], "the Tasks claimed, saves without events in between")
  }),
  check("retryLater, deadLetter and listDeadLetters", async ({ store, push }) => {
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    await saveState(push, "t-1", "working")
    await saveState(push, "t-1", "completed")
    const now = Date.now()
    const [first] = await push.claim("i-1", 10, LONG_LEASE, now)
    await push.retryLater(first, now + 60_000, "HTTP 503")
    same(await push.claim("i-1", 10, LONG_LEASE, now), [], "a claim before notBefore")
    const [again] = await push.claim("i-2", 10, LONG_LEASE, now + 60_001)
    matches(again?.item, { key: first.item.key, seq: first.item.seq, attempts: 1, lastError: "HTTP 503" }, "the notification claimed after notBefore")
    same(await push.listDeadLetters(10), [], "listDeadLetters before any")
    await push.deadLetter(again, "HTTP 404 is final", 2)
    const dead = await push.listDeadLetters(10)
    matches(dead, [{ key: first.item.key, taskId: "t-1", configId: "a", reason: "HTTP 404 is final", attempts: 2 }], "the dead letters")
    equal(typeof dead[0].deadAt, "number", "the type of deadAt")
    const [next] = await push.claim("i-1", 10, LONG_LEASE, now + 60_001)
    equal(next?.item.event.task.status.state, "completed", "the channel's next notification after a dead letter")
    await push.deadLetter(next, "too old")
    same((await push.listDeadLetters(10)).map((d) => d.reason), ["too old", "HTTP 404 is final"], "dead letters, newest first")
    equal((await push.listDeadLetters(1))[0]?.attempts, 0, "attempts of one given up before any attempt")
    equal((await push.listDeadLetters(1)).length, 1, "listDeadLetters(1)")
  }),
  check("a notification keeps its save's trace context through claims, retries and its dead letter", async ({ store, push }) => {
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    const working = sampleTask("t-1", "working")
    await push.saveWithEvent(working, { ...event(working), traceContext: TRACED })
    const input = sampleTask("t-1", "input-required")
    await push.saveWithEvent(input, { ...event(structuredClone(input)), traceContext: { traceparent: OTHER_TRACEPARENT } })
    const again = sampleTask("t-1", "working")
    await push.saveWithEvent(again, { ...event(again), traceContext: { traceparent: 42 } as unknown as TraceContext })
    const done = sampleTask("t-1", "completed")
    await push.saveWithEvent(done, event(done))
    const now = Date.now()
    const [first] = await push.claim("i-1", 10, LONG_LEASE, now)
    same(first?.item.traceContext, TRACED, "the trace context of the first notification")
    ok(!("traceContext" in first.item.event), "the trace context is inside the event, not beside it")
    await push.retryLater(first, now + 1, "HTTP 503")
    const [retried] = await push.claim("i-2", 10, LONG_LEASE, now + 2)
    same(retried?.item, { ...first.item, attempts: 1, notBefore: now + 1, lastError: "HTTP 503" }, "the notification after a retry")
    await push.deadLetter(retried, "HTTP 404 is final", 2)
    same((await push.listDeadLetters(1))[0]?.traceContext, TRACED, "the dead letter's trace context")
    const [second] = await push.claim("i-1", 10, LONG_LEASE, now + 2)
    equal(second?.item.event.task.status.state, "input-required", "the second notification's state")
    same(second.item.traceContext, { traceparent: OTHER_TRACEPARENT }, "the second notification's trace context")
    await push.ack(second)
    const [malformed] = await push.claim("i-1", 10, LONG_LEASE, now + 2)
    equal(malformed?.item.event.task.status.state, "working", "the third notification's state")
    ok(!("traceContext" in malformed.item || "traceContext" in malformed.item.event), "a trace context that is not one was kept")
    await push.ack(malformed)
    const [untraced] = await push.claim("i-1", 10, LONG_LEASE, now + 2)
    equal(untraced?.item.event.task.status.state, "completed", "the fourth notification's state")
    ok(!("traceContext" in untraced.item), "a notification saved without a trace context has one")
    await push.deadLetter(untraced, "gone")
    ok(!("traceContext" in ((await push.listDeadLetters(1))[0] ?? {})), "a dead letter saved without a trace context has one")
  }),
  check("deleting a config or the Task removes its configs and notifications", async ({ store, push }) => {
    if (typeof store.delete !== "function") return
    for (const id of ["t-1", "t-2"]) {
      await store.save(sampleTask(id))
      await push.putConfig(config(id, "a"))
      await push.putConfig(config(id, "b"))
      await saveState(push, id, "working")
    }
    await push.deleteConfig("t-1", "b")
    await store.delete("t-2")
    same(await push.listConfigs("t-2"), [], "the configs of a deleted Task")
    same(described(await push.claim("i-1", 10, LONG_LEASE, Date.now())), ["t-1/a#working"], "the notifications left")
  }),
  check("a refused save enqueues nothing", async ({ store, push }) => {
    await store.save(sampleTask("t-1"))
    await push.putConfig(config("t-1", "a"))
    await saveState(push, "t-1", "canceled")
    await rejects(saveState(push, "t-1", "completed"), TaskConflictError, "saving over a canceled Task")
    const claims = await push.claim("i-1", 10, LONG_LEASE, Date.now())
    same(described(claims), ["t-1/a#canceled"], "the notifications before the refused save")
    await push.ack(claims[0])
    same(await push.claim("i-1", 10, LONG_LEASE, Date.now()), [], "the notifications of the refused save")
  }),
  check(
    "oldestPendingAt is when the first notification still in the outbox was enqueued",
    async ({ store, push }) => {
      const oldestPendingAt = push.oldestPendingAt!.bind(push)
      equal(await oldestPendingAt(), undefined, "oldestPendingAt with nothing pending")
      await store.save(sampleTask("t-1"))
      await push.putConfig(config("t-1", "a"))
      const before = Date.now()
      await saveState(push, "t-1", "working")
      await saveState(push, "t-1", "completed")
      const [first] = await push.claim("i-1", 10, LONG_LEASE, Date.now())
      const oldest = await oldestPendingAt()
      equal(oldest, first?.item.enqueuedAt, "oldestPendingAt with the first claimed")
      ok(oldest !== undefined && oldest >= before && oldest <= Date.now(), `oldestPendingAt ${oldest} is not a time of this run`)
      await push.retryLater(first, Date.now(), "HTTP 503")
      equal(await oldestPendingAt(), first.item.enqueuedAt, "oldestPendingAt after a retry")
      const [again] = await push.claim("i-1", 10, LONG_LEASE, Date.now())
      await push.ack(again)
      const [next] = await push.claim("i-1", 10, LONG_LEASE, Date.now())
      equal(await oldestPendingAt(), next?.item.enqueuedAt, "oldestPendingAt once the first was delivered")
      await push.deadLetter(next, "gone")
      equal(await oldestPendingAt(), undefined, "oldestPendingAt with only a dead letter")
    },
    ({ push }) => typeof push.oldestPendingAt === "function",
  ),
  check(
    "watchOutbox tells another store that a save enqueued notifications",
    async ({ store, push, another }) => {
      const otherStore = await another!()
      const other = otherStore.push
      ok(typeof other?.watchOutbox === "function", "the other store has no push.watchOutbox")
      let woken = 0
      const stop = await other!.watchOutbox!(() => void woken++)
      try {
        await store.save(sampleTask("quiet"))
        await store.save(sampleTask("t-1"))
        await push.putConfig(config("t-1", "a"))
        await saveState(push, "t-1", "working")
        await waitFor(() => woken > 0, 15_000, "the other store's outbox watch to fire")
        same(described(await other!.claim("i-2", 10, LONG_LEASE, Date.now())), ["t-1/a#working"], "what the woken store claims")
      } finally {
        await stop()
      }
    },
    ({ push, another }) => another !== undefined && typeof push.watchOutbox === "function",
  ),
  check(
    "a restarted store still has the configs and the pending notifications",
    async ({ store, push, another }) => {
      await store.save(sampleTask("t-1"))
      await push.putConfig(config("t-1", "a"))
      const working = sampleTask("t-1", "working")
      await push.saveWithEvent(working, { ...event(working), traceContext: TRACED })
      await store.close?.()
      const restarted = (await another!()).push
      ok(restarted, "the restarted store has no push")
      same((await restarted!.listConfigs("t-1")).map((c) => c.id), ["a"], "the configs after a restart")
      const claims = await restarted!.claim("i-2", 10, LONG_LEASE, Date.now())
      same(described(claims), ["t-1/a#working"], "the pending notifications after a restart")
      same(claims[0].item.traceContext, TRACED, "a pending notification's trace context after a restart")
    },
    ({ another }) => another !== undefined,
  ),
  check(
    "two stores on one medium never hold one notification at once; an expired lease is taken over",
    async ({ store, push, another }) => {
      const other = (await another!()).push!
      for (let i = 0; i < 6; i++) {
        const id = `t-${i}`
        await store.save(sampleTask(id))
        await push.putConfig(config(id, "a"))
        await saveState(push, id, "working")
      }
      const [mine, theirs] = await Promise.all([push.claim("i-1", 10, LONG_LEASE, Date.now()), other.claim("i-2", 10, LONG_LEASE, Date.now())])
      equal(mine.length + theirs.length, 6, "notifications claimed by the two stores at once")
      equal(new Set([...mine, ...theirs].map((c) => c.item.key)).size, 6, "distinct notifications claimed by the two stores")
      await store.save(sampleTask("late"))
      await push.putConfig(config("late", "a"))
      await saveState(push, "late", "working")
      const short = await push.claim("dying", 10, 300, Date.now())
      same(described(short), ["late/a#working"], "a claim with a 300 ms lease")
      same(await other.claim("i-2", 10, LONG_LEASE, Date.now()), [], "the other store's claim while the lease runs")
      let taken: PushClaim[] = []
      // The file store writes a journal out every 5 s and rescans every 5 s: a takeover can take that long.
      await waitFor(async () => (taken = await other.claim("i-2", 10, LONG_LEASE, Date.now())).length > 0, 30_000, "the expired lease to be taken over")
      equal(taken[0].item.key, short[0].item.key, "the notification taken over")
      await push.retryLater(short[0], Date.now(), "late")
      same(await push.claim("i-3", 10, LONG_LEASE, Date.now()), [], "a claim after the expired holder's late retry")
      await other.ack(taken[0])
    },
    ({ another }) => another !== undefined,
  ),
]

/** The names of the PushStore contract's checks, in the order they run (for ContractOptions.only). */
export const pushStoreContractChecks: readonly string[] = PUSH_CHECKS.map((each) => each.name)

/**
 * Runs the PushStore contract (`TaskStore.push`: push configs and the
 * notification outbox) against the store `makeStore` builds. A store
 * without `push` passes every check; the checks of `oldestPendingAt` and
 * `watchOutbox` run when the store has them, those of two instances and of
 * a restart when `makeStore` returns `{ store, another }`.
 *
 * @param makeStore Builds a fresh, empty store (and maybe its peer); called once per check.
 * @param options The per-check timeout, which checks to run, and whether the store refuses to replace a terminal Task.
 * @returns The failures, empty when the store keeps the contract.
 */
export function runPushStoreContract(makeStore: MakePushStore, options: PushStoreContractOptions = {}): Promise<ContractFailure[]> {
  const checks = options.refusesTerminal ? PUSH_CHECKS : PUSH_CHECKS.filter((each) => each.name !== "a refused save enqueues nothing")
  const only = options.only?.filter((name) => options.refusesTerminal || name !== "a refused save enqueues nothing")
  return runChecks(checks, makeStore, { ...options, only })
}
