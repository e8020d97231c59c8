import t, { type Test } from "tap"
import type { EventLog, LoggedEvent } from "../lib/stores/event-log.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import { sampleTask, waitFor } from "./helpers.js"

/**
 * The EventLog contract (TaskStore.events), one suite for every store that
 * has it: each store's test file calls eventLogContract() with a harness.
 */
export interface EventLogHarness {
  /**
   * A fresh, empty store made with `options` (eventRetentionMs), and a way
   * to open another store on the same medium (directory, tables, buckets):
   * another process, or the same one after a restart. Every store made is
   * closed when the test ends.
   */
  make(t: Test, options?: { eventRetentionMs?: number }): Promise<{ store: TaskStore; another: () => TaskStore }>
  /** False for a store whose log lives in one process only (memory): the cases with two stores are left out. */
  shared?: boolean
}

function logOf(store: TaskStore): EventLog {
  if (store.events === undefined) throw new Error("the store has no event-log capability")
  return store.events
}

/** `count` events from position `from` on: a status, then artifact chunks. */
function events(from: number, count: number, tag = "a"): LoggedEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    position: from + i,
    event: { kind: "artifact-update", artifact: { artifactId: "answer", parts: [{ kind: "text", text: `${tag}${from + i}` }] }, append: from + i > 1 },
  }))
}

const positions = (logged: LoggedEvent[]) => logged.map((e) => e.position)
const texts = (logged: LoggedEvent[]) => logged.map((e) => ((e.event.artifact as { parts: Array<{ text: string }> }).parts[0].text))

export function eventLogContract(name: string, harness: EventLogHarness): void {
  t.test(`${name}: events are read back after a position, in order, as many as asked`, async (t) => {
    const { store } = await harness.make(t)
    const log = logOf(store)
    t.same(await log.read("t-1", 0, 100), [], "no log yet: nothing")
    t.equal(await log.lastPosition("t-1"), 0, "no log yet: position 0")
    t.same(await log.append("t-1", events(1, 3)), [], "every position taken")
    t.same(await log.append("t-1", events(4, 2)), [])
    t.same(positions(await log.read("t-1", 0, 100)), [1, 2, 3, 4, 5], "all of them")
    t.same(texts(await log.read("t-1", 2, 100)), ["a3", "a4", "a5"], "those after 2, the events as given")
    t.same(positions(await log.read("t-1", 1, 2)), [2, 3], "at most the limit")
    t.same(await log.read("t-1", 5, 100), [], "nothing after the last")
    t.equal(await log.lastPosition("t-1"), 5)
    t.same(await log.read("t-2", 0, 100), [], "another Task's log is its own")
  })

  t.test(`${name}: the first writer of a position wins, and the loser is told which it lost`, async (t) => {
    const { store } = await harness.make(t)
    const log = logOf(store)
    await log.append("t-1", events(1, 2, "first"))
    t.same(await log.append("t-1", events(2, 2, "second")), [2], "position 2 was held")
    t.same(texts(await log.read("t-1", 0, 100)), ["first1", "first2", "second3"], "position 2 keeps the first writer's event")
  })

  t.test(`${name}: odd Task ids each get a log of their own`, async (t) => {
    const { store } = await harness.make(t)
    const log = logOf(store)
    const ids = ["a/b", "a_b", "a.b", "a b", "*", ">", "ü-€", "x".repeat(600), ".."]
    for (const [i, id] of ids.entries()) await log.append(id, events(1, 1, `id${i}-`))
    for (const [i, id] of ids.entries()) t.same(texts(await log.read(id, 0, 10)), [`id${i}-1`], `the log of ${JSON.stringify(id.slice(0, 20))}`)
  })

  t.test(`${name}: a large event and many events round-trip`, async (t) => {
    const { store } = await harness.make(t)
    const log = logOf(store)
    const big = "é".repeat(200_000)
    await log.append("big", [{ position: 1, event: { kind: "artifact-update", text: big } }])
    t.equal((await log.read("big", 0, 1))[0]?.event.text, big)
    for (let from = 1; from <= 1000; from += 100) await log.append("many", events(from, 100))
    const read = await log.read("many", 0, 5000)
    t.equal(read.length, 1000)
    t.ok(read.every((e, i) => e.position === i + 1), "positions 1..1000 in order")
    t.same(positions(await log.read("many", 990, 5000)), [991, 992, 993, 994, 995, 996, 997, 998, 999, 1000])
  })

  t.test(`${name}: deleting the Task removes its log`, async (t) => {
    const { store } = await harness.make(t)
    if (store.delete === undefined) throw new Error("the store cannot delete")
    await store.save(sampleTask("gone"))
    await logOf(store).append("gone", events(1, 3))
    await store.delete("gone")
    await waitFor(async () => (await logOf(store).read("gone", 0, 10)).length === 0, 5000, "the log to go with its Task")
    t.equal(await logOf(store).lastPosition("gone"), 0)
  })

  t.test(`${name}: an ended Task's log is kept eventRetentionMs, then removed; a running one's is kept`, async (t) => {
    const { store } = await harness.make(t, { eventRetentionMs: 100 })
    const log = logOf(store)
    await log.append("done", events(1, 2))
    await log.append("running", events(1, 2))
    const endedAt = Date.now()
    await log.ended("done")
    t.same(positions(await log.read("done", 0, 10)), [1, 2], "kept right after the end")
    await waitFor(async () => (await log.read("done", 0, 10)).length === 0, 15_000, "the ended log to go")
    t.ok(Date.now() - endedAt >= 100, "not before eventRetentionMs")
    t.same(positions(await log.read("running", 0, 10)), [1, 2], "the log of a Task that did not end stays")
  })

  t.test(`${name}: appends are checked`, async (t) => {
    const { store } = await harness.make(t)
    const log = logOf(store)
    await t.rejects(log.append("t-1", [{ position: 0, event: {} }]), TypeError, "position 0")
    await t.rejects(log.append("t-1", [{ position: 2, event: {} }, { position: 2, event: {} }]), TypeError, "not increasing")
    await t.rejects(log.append("t-1", [{ position: 1.5, event: {} }]), TypeError, "not whole")
    await t.rejects(log.append("", [{ position: 1, event: {} }]), TypeError, "no task id")
    t.same(await log.read("t-1", 0, 10), [], "nothing of a refused append was kept")
  })

  if (harness.shared === false) return

  t.test(`${name}: another store on the same medium reads the log and resumes its positions`, async (t) => {
    const { store, another } = await harness.make(t)
    await logOf(store).append("t-1", events(1, 3))
    const other = another()
    t.same(positions(await logOf(other).read("t-1", 1, 10)), [2, 3], "the other store reads what the first wrote")
    t.equal(await logOf(other).lastPosition("t-1"), 3)
    t.same(await logOf(other).append("t-1", events(3, 2, "other")), [3], "the other store is told position 3 was taken")
    t.same(texts(await logOf(store).read("t-1", 0, 10)), ["a1", "a2", "a3", "other4"], "and the first reads what the other wrote")
  })

  t.test(`${name}: two stores appending the same positions at once: one takes each, the other is told`, async (t) => {
    const { store, another } = await harness.make(t)
    const [a, b] = [logOf(store), logOf(another())]
    for (let round = 0; round < 10; round++) {
      const id = `race-${round}`
      // Both append to an empty log: one lands, the other is told all its positions were held.
      const results = await Promise.all([a.append(id, events(1, 3, "a")), b.append(id, events(1, 3, "b"))])
      t.same(results.map((held) => held.length).sort(), [0, 3], `round ${round}: one took all three, the other was told all three were held`)
      const winner = results[0].length === 0 ? "a" : "b"
      t.same(texts(await a.read(id, 0, 10)), [1, 2, 3].map((p) => `${winner}${p}`), `round ${round}: the log holds the winner's events`)
      // Now both know the log: the next positions race too.
      const next = await Promise.all([a.append(id, events(4, 2, "a")), b.append(id, events(4, 2, "b"))])
      t.same(next.map((held) => held.length).sort(), [0, 2], `round ${round}: positions 4 and 5 too`)
    }
    const single = await Promise.all([a.append("one", events(1, 1, "a")), b.append("one", events(1, 1, "b"))])
    t.same(single.flat(), [1], "a single position: exactly one store is told it was held")
  })

  t.test(`${name}: an ended log is removed by any store on the medium`, async (t) => {
    const { store, another } = await harness.make(t, { eventRetentionMs: 50 })
    await logOf(store).append("t-1", events(1, 2))
    await logOf(store).ended("t-1")
    await store.close?.()
    const other = another()
    await waitFor(async () => (await logOf(other).read("t-1", 0, 10)).length === 0, 15_000, "the ended log to go")
    t.pass("removed after its writer closed")
  })
}
