import type { EventLog, LoggedEvent } from "../streams/event-log.js"
import type { TaskStore } from "../stores/task-store.js"
import { equal, ok, openStore, rejects, runChecks, same, sampleTask, waitFor, type Awaitable, type Check, type ContractFailure, type ContractOptions, type StoreWithPeer } from "./checks.js"

/** What the event-log checks ask a store factory for. */
export interface EventLogStoreOptions {
  /** How long the log of an ended Task is kept, in milliseconds; the store must honour it. */
  eventRetentionMs?: number
}

/**
 * Makes a fresh, empty store with `options` for one check. Return
 * `{ store, another }` when a second store can be opened on the same
 * medium: the checks of two instances run only then.
 */
export type MakeEventLogStore = (options?: EventLogStoreOptions) => Awaitable<TaskStore | StoreWithPeer>

type Opened = { store: TaskStore; log: EventLog; another?: () => Promise<TaskStore> }
type LogCheck = Check<MakeEventLogStore>

/** A check that runs `body` when the store has `events` (and, with `shared`, when a second store can be opened). */
const check = (name: string, body: (opened: Opened) => Promise<void>, options: EventLogStoreOptions & { shared?: boolean } = {}): LogCheck => ({
  name,
  run: async (make, context) => {
    const { shared, ...storeOptions } = options
    const { store, another } = await openStore(make, context, Object.keys(storeOptions).length > 0 ? storeOptions : undefined)
    if (store.events === undefined || (shared && another === undefined)) return
    await body({ store, log: store.events, another })
  },
})

/** The event log of `store`, failing the check when it has none. */
function logOf(store: TaskStore): EventLog {
  ok(store.events, "the other store has no event log")
  return store.events!
}

/** `count` artifact chunks from position `from` on. */
function events(from: number, count: number, tag = "a"): LoggedEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    position: from + i,
    event: { kind: "artifact-update", artifact: { artifactId: "answer", parts: [{ kind: "text", text: `${tag}${from + i}` }] }, append: from + i > 1 },
  }))
}

const positions = (logged: LoggedEvent[]) => logged.map((e) => e.position)
const texts = (logged: LoggedEvent[]) => logged.map((e) => (e.event.artifact as { parts: Array<{ text: string }> } | undefined)?.parts[0]?.text)

const LOG_CHECKS: readonly LogCheck[] = [
  check("events are read back after a position, in order, as many as asked", async ({ log }) => {
    same(await log.read("t-1", 0, 100), [], "read of a Task without a log")
    equal(await log.lastPosition("t-1"), 0, "lastPosition of a Task without a log")
    same(await log.append("t-1", events(1, 3)), [], "positions held, appending 1..3 to an empty log")
    same(await log.append("t-1", events(4, 2)), [], "positions held, appending 4..5")
    same(positions(await log.read("t-1", 0, 100)), [1, 2, 3, 4, 5], "read after 0")
    same(texts(await log.read("t-1", 2, 100)), ["a3", "a4", "a5"], "the events read after 2")
    same(positions(await log.read("t-1", 1, 2)), [2, 3], "read after 1, limit 2")
    same(await log.read("t-1", 5, 100), [], "read after the last position")
    equal(await log.lastPosition("t-1"), 5, "lastPosition")
    same(await log.read("t-2", 0, 100), [], "read of another Task's log")
  }),
  check("the first writer of a position wins, and the loser is told which it lost", async ({ log }) => {
    await log.append("t-1", events(1, 2, "first"))
    same(await log.append("t-1", events(2, 2, "second")), [2], "positions held, appending 2..3 over 1..2")
    same(texts(await log.read("t-1", 0, 100)), ["first1", "first2", "second3"], "the log after the overlapping append")
  }),
  check("odd Task ids each get a log of their own", async ({ log }) => {
    const ids = ["a/b", "a_b", "a.b", "a b", "*", ">", "ü-€", "x".repeat(600), ".."]
    for (const [i, id] of ids.entries()) await log.append(id, events(1, 1, `id${i}-`))
    for (const [i, id] of ids.entries()) same(texts(await log.read(id, 0, 10)), [`id${i}-1`], `the log of ${JSON.stringify(id.slice(0, 20))}`)
  }),
  check("a large event and many events round-trip", async ({ log }) => {
    const big = "é".repeat(200_000)
    await log.append("big", [{ position: 1, event: { kind: "artifact-update", text: big } }])
    ok((await log.read("big", 0, 1))[0]?.event.text === big, "a 400 kB event came back changed")
    for (let from = 1; from <= 1000; from += 100) await log.append("many", events(from, 100))
    const read = await log.read("many", 0, 5000)
    equal(read.length, 1000, "events read of 1000 appended")
    ok(read.every((e, i) => e.position === i + 1), "positions 1..1000 did not come back in order")
    same(positions(await log.read("many", 990, 5000)), [991, 992, 993, 994, 995, 996, 997, 998, 999, 1000], "read after 990")
  }),
  check("deleting the Task removes its log", async ({ store, log }) => {
    if (typeof store.delete !== "function") return
    await store.save(sampleTask("gone"))
    await log.append("gone", events(1, 3))
    await store.delete("gone")
    await waitFor(async () => (await log.read("gone", 0, 10)).length === 0, 5000, "the log to go with its Task")
    equal(await log.lastPosition("gone"), 0, "lastPosition of a deleted Task")
  }),
  check(
    "an ended Task's log is kept eventRetentionMs, then removed; a running one's is kept",
    async ({ log }) => {
      await log.append("done", events(1, 2))
      await log.append("running", events(1, 2))
      const endedAt = Date.now()
      await log.ended("done")
      same(positions(await log.read("done", 0, 10)), [1, 2], "the log right after its Task ended")
      await waitFor(async () => (await log.read("done", 0, 10)).length === 0, 15_000, "the ended log to go (eventRetentionMs 100)")
      ok(Date.now() - endedAt >= 100, "the ended log went before eventRetentionMs")
      same(positions(await log.read("running", 0, 10)), [1, 2], "the log of a Task that did not end")
    },
    { eventRetentionMs: 100 },
  ),
  check("appends are checked", async ({ log }) => {
    await rejects(log.append("t-1", [{ position: 0, event: {} }]), TypeError, "an append at position 0")
    await rejects(log.append("t-1", [{ position: 2, event: {} }, { position: 2, event: {} }]), TypeError, "an append of positions not increasing")
    await rejects(log.append("t-1", [{ position: 1.5, event: {} }]), TypeError, "an append at position 1.5")
    await rejects(log.append("", [{ position: 1, event: {} }]), TypeError, "an append without a Task id")
    same(await log.read("t-1", 0, 10), [], "the log after refused appends")
  }),
  check(
    "another store on the same medium reads the log and resumes its positions",
    async ({ log, another }) => {
      await log.append("t-1", events(1, 3))
      const other = logOf(await another!())
      same(positions(await other.read("t-1", 1, 10)), [2, 3], "the other store's read")
      equal(await other.lastPosition("t-1"), 3, "the other store's lastPosition")
      same(await other.append("t-1", events(3, 2, "other")), [3], "positions held, the other store appending 3..4")
      same(texts(await log.read("t-1", 0, 10)), ["a1", "a2", "a3", "other4"], "the first store's read of what the other wrote")
    },
    { shared: true },
  ),
  check(
    "two stores appending the same positions at once: one takes each, the other is told",
    async ({ log: a, another }) => {
      const b = logOf(await another!())
      for (let round = 0; round < 10; round++) {
        const id = `race-${round}`
        const results = await Promise.all([a.append(id, events(1, 3, "a")), b.append(id, events(1, 3, "b"))])
        same(results.map((held) => held.length).sort(), [0, 3], `round ${round}: positions held by each of two appends of 1..3`)
        const winner = results[0].length === 0 ? "a" : "b"
        same(texts(await a.read(id, 0, 10)), [1, 2, 3].map((p) => `${winner}${p}`), `round ${round}: the log after the race`)
        const next = await Promise.all([a.append(id, events(4, 2, "a")), b.append(id, events(4, 2, "b"))])
        same(next.map((held) => held.length).sort(), [0, 2], `round ${round}: positions held by each of two appends of 4..5`)
      }
      const single = await Promise.all([a.append("one", events(1, 1, "a")), b.append("one", events(1, 1, "b"))])
      same(single.flat(), [1], "positions held by each of two appends of position 1")
    },
    { shared: true },
  ),
  check(
    "an ended log is removed by any store on the medium",
    async ({ store, log, another }) => {
      await log.append("t-1", events(1, 2))
      await log.ended("t-1")
      await store.close?.()
      const other = logOf(await another!())
      await waitFor(async () => (await other.read("t-1", 0, 10)).length === 0, 15_000, "the ended log to go after its writer closed")
    },
    { eventRetentionMs: 50, shared: true },
  ),
]

/** The names of the EventLog contract's checks, in the order they run (for ContractOptions.only). */
export const eventLogContractChecks: readonly string[] = LOG_CHECKS.map((each) => each.name)

/**
 * Runs the EventLog contract (`TaskStore.events`: the per-Task log of stream
 * events that resumable streams read) against the store `makeStore` builds.
 * A store without `events` passes every check; the checks of two instances
 * run when `makeStore` returns `{ store, another }`.
 *
 * @param makeStore Builds a fresh, empty store with the options given (and maybe its peer); called once per check.
 * @param options The per-check timeout, and which checks to run.
 * @returns The failures, empty when the store keeps the contract.
 */
export function runEventLogContract(makeStore: MakeEventLogStore, options?: ContractOptions): Promise<ContractFailure[]> {
  return runChecks(LOG_CHECKS, makeStore, options)
}
