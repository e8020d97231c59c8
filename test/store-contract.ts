import t, { type Test } from "tap"
import { InvalidPageTokenError } from "../lib/stores/list.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import type { A2ATask } from "../lib/types.js"
import { sampleTask } from "./helpers.js"

/**
 * The TaskStore contract, one suite for every store: each backend's test
 * file calls storeContract() with a factory that gives a fresh, empty store
 * (and registers its own teardown on `t`).
 */
export type StoreFactory = (t: Test) => Promise<TaskStore>

const task = sampleTask

/** The behaviour every store shares, run against each. */
const contract = (name: string, make: StoreFactory) =>
  t.test(`${name}: the TaskStore contract`, async (t) => {
    const store = await make(t)
    t.equal(await store.get("nope"), undefined, "a missing id is undefined")

    await store.save(task("t-1"))
    t.match(await store.get("t-1"), { id: "t-1", contextId: "ctx-1", status: { state: "submitted" } }, "reads back what was saved")

    await store.save(task("t-1", "completed", { artifacts: [{ parts: [{ kind: "text", text: "done" }] }] }))
    const latest = await store.get("t-1")
    t.equal(latest?.status.state, "completed", "a later save replaces the earlier one")
    t.equal(latest?.artifacts?.[0].parts[0].kind === "text" && latest.artifacts[0].parts[0].text, "done")

    const saved = task("t-2")
    await store.save(saved)
    saved.status.state = "failed"
    t.equal((await store.get("t-2"))?.status.state, "submitted", "mutating a saved task does not change the store")
    const got = await store.get("t-2")
    got!.status.state = "canceled"
    t.equal((await store.get("t-2"))?.status.state, "submitted", "mutating a task that was read does not change the store")

    await Promise.all(["a/b", "a_b", "a.b", "a b", "Abc", "abc"].map((id, i) => store.save(task(id, "working", { metadata: { i } }))))
    for (const [i, id] of ["a/b", "a_b", "a.b", "a b", "Abc", "abc"].entries()) {
      t.same((await store.get(id))?.metadata, { i }, `id ${JSON.stringify(id)} keeps its own task`)
    }

    if (store.getText) {
      t.equal(await store.getText("nope"), undefined, "getText: a missing id is undefined")
      const text = await store.getText("t-1")
      t.same(JSON.parse(text!), await store.get("t-1"), "getText holds the JSON of what get gives")
      t.equal(await store.getText("t-1"), text, "an unchanged task gives the same text")
      await store.save(task("t-1", "failed"))
      t.equal(JSON.parse((await store.getText("t-1"))!).status.state, "failed", "a save changes the text")
    }

    await store.delete?.("t-2")
    t.equal(await store.get("t-2"), undefined, "delete removes the task")
    if (store.delete && store.getText) t.equal(await store.getText("t-2"), undefined, "getText: a deleted task is undefined")
  })

/** ListTasks semantics every store with list() shares. */
const listContract = (name: string, make: StoreFactory) =>
  t.test(`${name}: list()`, async (t) => {
    const store = await make(t)
    t.ok(store.list, "the store lists")
    const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()
    // 7 tasks; two share a timestamp so the id breaks the tie.
    const specs = [
      ["l-a", "ctx-1", "completed", at(1)],
      ["l-b", "ctx-1", "working", at(2)],
      ["l-c", "ctx-2", "completed", at(3)],
      ["l-d", "ctx-1", "failed", at(4)],
      ["l-e", "ctx-2", "completed", at(4)],
      ["l-f", "ctx-1", "completed", at(5)],
      ["l-g", "ctx-3", "submitted", at(6)],
    ] as const
    for (const [id, contextId, state, timestamp] of specs) {
      await store.save({ id, contextId, kind: "task", status: { state, timestamp }, artifacts: [{ parts: [{ kind: "text", text: id }] }] })
    }
    const all = await store.list!({})
    t.same(all.tasks.map((task) => task.id), ["l-g", "l-f", "l-e", "l-d", "l-c", "l-b", "l-a"], "newest status first, id breaks ties")
    t.equal(all.totalSize, 7)
    t.equal(all.pageSize, 50, "the default page size")
    t.equal(all.nextPageToken, "", "one page: no next token")

    const seen: string[] = []
    let token: string | undefined
    do {
      const page = await store.list!({ pageSize: 3, pageToken: token })
      t.equal(page.totalSize, 7)
      t.ok(page.tasks.length <= 3)
      seen.push(...page.tasks.map((task) => task.id))
      token = page.nextPageToken || undefined
    } while (token)
    t.same(seen, ["l-g", "l-f", "l-e", "l-d", "l-c", "l-b", "l-a"], "pages cover every task once, in order")

    const ctx1 = await store.list!({ contextId: "ctx-1" })
    t.same(ctx1.tasks.map((task) => task.id), ["l-f", "l-d", "l-b", "l-a"])
    const completed = await store.list!({ status: "completed", pageSize: 2 })
    t.same(completed.tasks.map((task) => task.id), ["l-f", "l-e"])
    t.equal(completed.totalSize, 4)
    t.not(completed.nextPageToken, "")
    const recent = await store.list!({ statusTimestampAfter: at(5) })
    t.same(recent.tasks.map((task) => task.id), ["l-g", "l-f"], "at or after the timestamp")
    const bare = await store.list!({ contextId: "ctx-3" })
    t.notOk("artifacts" in bare.tasks[0], "artifacts are left out by default")
    t.ok((await store.get("l-g"))?.artifacts, "but not from the store")
    const full = await store.list!({ contextId: "ctx-3", includeArtifacts: true })
    t.same(full.tasks[0].artifacts, [{ parts: [{ kind: "text", text: "l-g" }] }], "includeArtifacts: true keeps them")
    await t.rejects(store.list!({ pageToken: "not-a-token" }), InvalidPageTokenError)
  })




/** Runs the whole contract against one store. */
export function storeContract(name: string, make: StoreFactory): void {
  contract(name, make)
  listContract(name, make)
}
