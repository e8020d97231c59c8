import t from "tap"
import { GroupCommit } from "../../lib/stores/group-commit.js"

/** A commit whose batches are recorded and settled by the test. */
function controlled() {
  const batches: Array<{ items: number[]; settle: (answers: Array<string | Error> | Error) => void }> = []
  const commit = (items: number[]) =>
    new Promise<Array<string | Error>>((resolve, reject) => {
      batches.push({ items, settle: (answers) => (answers instanceof Error ? reject(answers) : resolve(answers)) })
    })
  return { batches, commit }
}

t.test("an item alone goes at once; items added during a commit go together in the next one", async (t) => {
  const { batches, commit } = controlled()
  const group = new GroupCommit(commit, { maxBatch: 100, inFlight: 1 })
  const first = group.add(1)
  t.same(batches.map((b) => b.items), [[1]], "the first item is committed at once, alone")
  const rest = [2, 3, 4].map((n) => group.add(n))
  t.equal(batches.length, 1, "nothing more is sent while the commit is under way")
  batches[0].settle(["one"])
  t.equal(await first, "one")
  await new Promise(setImmediate)
  t.same(batches.map((b) => b.items), [[1], [2, 3, 4]], "the items queued meanwhile go in one commit")
  batches[1].settle(["two", new Error("three refused"), "four"])
  t.same(await Promise.allSettled(rest), [
    { status: "fulfilled", value: "two" },
    { status: "rejected", reason: new Error("three refused") },
    { status: "fulfilled", value: "four" },
  ])
})

t.test("a failed commit fails its items alone; batches are at most maxBatch; inFlight commits run at once", async (t) => {
  const { batches, commit } = controlled()
  const group = new GroupCommit(commit, { maxBatch: 2, inFlight: 2 })
  const all = Promise.allSettled([1, 2, 3, 4, 5].map((n) => group.add(n)))
  t.same(batches.map((b) => b.items), [[1], [2]], "two commits in flight, the rest queued")
  batches[0].settle(new Error("the database went away"))
  await new Promise(setImmediate)
  t.same(batches.map((b) => b.items), [[1], [2], [3, 4]], "the next batch takes at most maxBatch")
  batches[1].settle(["b"])
  await new Promise(setImmediate)
  batches[2].settle(["c", "d"])
  await new Promise(setImmediate)
  batches[3].settle(["e"])
  t.same(
    (await all).map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message)),
    ["the database went away", "b", "c", "d", "e"],
  )
})

t.test("a commit that throws at once rejects its items, and the next batch still goes", async (t) => {
  let calls = 0
  const group = new GroupCommit<number, number>(
    (items) => {
      if (calls++ === 0) throw new Error("bad batch")
      return Promise.resolve(items.map((n) => n * 10))
    },
    { maxBatch: 10, inFlight: 1 },
  )
  await t.rejects(group.add(1), { message: "bad batch" })
  t.equal(await group.add(2), 20)
})
