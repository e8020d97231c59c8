import { withInternals } from "../internals.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2ATask } from "../types.js"
import { equal, matches, ok, rejects, runChecks, same, sampleTask as task, type Awaitable, type Check, type ContractFailure, type ContractOptions } from "./checks.js"

/** Makes a fresh, empty TaskStore for one check; the check closes it (when it has `close`) as it ends. */
export type MakeTaskStore = () => Awaitable<TaskStore>

type StoreCheck = Check<MakeTaskStore>

/** A check that opens one store and runs `body` on it. */
const check = (name: string, body: (store: TaskStore) => Promise<void>): StoreCheck => ({
  name,
  run: async (make, context) => body(context.track(await make())),
})

/** Odd ids that a careless store would map to one key. */
const ODD_IDS = ["a/b", "a_b", "a.b", "a b", "Abc", "abc"]

const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()

/** Seven Tasks for the list() checks; two share a time so the id breaks the tie. */
async function saveListed(store: TaskStore): Promise<void> {
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
}
const NEWEST_FIRST = ["l-g", "l-f", "l-e", "l-d", "l-c", "l-b", "l-a"]

/** The same check for a store without `list`: nothing to check. */
const listCheck = (name: string, body: (store: TaskStore & Required<Pick<TaskStore, "list">>) => Promise<void>): StoreCheck =>
  check(name, async (store) => {
    if (typeof store.list !== "function") return
    await body(store as TaskStore & Required<Pick<TaskStore, "list">>)
  })

const STORE_CHECKS: readonly StoreCheck[] = [
  check("get of a missing id resolves to undefined", async (store) => {
    equal(await store.get("nope"), undefined, "get(\"nope\") on an empty store")
  }),
  check("a saved Task is read back", async (store) => {
    await store.save(task("t-1"))
    matches(await store.get("t-1"), { id: "t-1", contextId: "ctx-1", status: { state: "submitted" } }, "get after save")
  }),
  check("a later save replaces the earlier one", async (store) => {
    await store.save(task("t-1"))
    await store.save(task("t-1", "completed", { artifacts: [{ parts: [{ kind: "text", text: "done" }] }] }))
    const latest = await store.get("t-1")
    equal(latest?.status.state, "completed", "the state after the second save")
    same(latest?.artifacts, [{ parts: [{ kind: "text", text: "done" }] }], "the artifacts after the second save")
  }),
  check("saved and read Tasks are copies", async (store) => {
    const saved = task("t-2")
    await store.save(saved)
    saved.status.state = "failed"
    equal((await store.get("t-2"))?.status.state, "submitted", "after mutating the object given to save")
    const got = await store.get("t-2")
    if (got) got.status.state = "canceled"
    equal((await store.get("t-2"))?.status.state, "submitted", "after mutating an object get gave")
  }),
  check("each id keeps its own Task", async (store) => {
    await Promise.all(ODD_IDS.map((id, i) => store.save(task(id, "working", { metadata: { i } }))))
    for (const [i, id] of ODD_IDS.entries()) same((await store.get(id))?.metadata, { i }, `the Task of id ${JSON.stringify(id)}`)
  }),
  check("getText holds the JSON of what get gives", async (store) => {
    if (typeof store.getText !== "function") return
    equal(await store.getText("nope"), undefined, "getText of a missing id")
    await store.save(task("t-1"))
    const text = await store.getText("t-1")
    ok(typeof text === "string", "getText of a saved Task gave no text")
    same(JSON.parse(text!), await store.get("t-1"), "the text, parsed, against get")
    equal(await store.getText("t-1"), text, "getText of an unchanged Task, twice")
    await store.save(task("t-1", "failed"))
    equal((JSON.parse((await store.getText("t-1")) ?? "null") as A2ATask | null)?.status.state, "failed", "getText after another save")
  }),
  check("delete removes the Task", async (store) => {
    if (typeof store.delete !== "function") return
    await store.save(task("t-2"))
    await store.delete("t-2")
    equal(await store.get("t-2"), undefined, "get after delete")
    if (typeof store.getText === "function") equal(await store.getText("t-2"), undefined, "getText after delete")
    await store.delete("t-2")
    await store.delete("never-saved")
  }),
  check("saves of one id take effect in call order", async (store) => {
    const states = ["submitted", "working", "input-required", "working", "completed"] as const
    await Promise.all(states.map((state, i) => store.save(task("order", state, { metadata: { i } }))))
    same((await store.get("order"))?.metadata, { i: states.length - 1 }, "the Task after five saves called at once")
  }),
  check("a save and a delete of one id take effect in call order", async (store) => {
    if (typeof store.delete !== "function") return
    await Promise.all([store.save(task("sd")), store.delete("sd")])
    equal(await store.get("sd"), undefined, "a delete called after a save")
    await Promise.all([store.delete("sd"), store.save(task("sd", "working", { metadata: { back: true } }))])
    same((await store.get("sd"))?.metadata, { back: true }, "a save called after a delete")
  }),
  listCheck("list: newest status first, id breaks ties, one page of 50 by default", async (store) => {
    await saveListed(store)
    const all = await store.list({})
    same(all.tasks.map((each) => each.id), NEWEST_FIRST, "the ids listed")
    equal(all.totalSize, 7, "totalSize")
    equal(all.pageSize, 50, "the default pageSize")
    equal(all.nextPageToken, "", "nextPageToken of the only page")
  }),
  listCheck("list: pages cover every Task once, in order", async (store) => {
    await saveListed(store)
    const seen: string[] = []
    let token: string | undefined
    for (let pages = 0; pages < 10; pages++) {
      const page = await store.list({ pageSize: 3, pageToken: token })
      equal(page.totalSize, 7, "totalSize of every page")
      ok(page.tasks.length <= 3, `a page of pageSize 3 held ${page.tasks.length} Tasks`)
      seen.push(...page.tasks.map((each) => each.id))
      token = page.nextPageToken || undefined
      if (token === undefined) break
    }
    same(seen, NEWEST_FIRST, "the ids of every page in turn")
  }),
  listCheck("list: filters by contextId, status and statusTimestampAfter", async (store) => {
    await saveListed(store)
    same((await store.list({ contextId: "ctx-1" })).tasks.map((each) => each.id), ["l-f", "l-d", "l-b", "l-a"], "contextId ctx-1")
    const completed = await store.list({ status: "completed", pageSize: 2 })
    same(completed.tasks.map((each) => each.id), ["l-f", "l-e"], "status completed, pageSize 2")
    equal(completed.totalSize, 4, "totalSize of status completed")
    ok(completed.nextPageToken !== "", "a filtered listing with more pages gave no nextPageToken")
    same((await store.list({ statusTimestampAfter: at(5) })).tasks.map((each) => each.id), ["l-g", "l-f"], "statusTimestampAfter, inclusive")
  }),
  listCheck("list: artifacts are left out unless includeArtifacts", async (store) => {
    await saveListed(store)
    const bare = await store.list({ contextId: "ctx-3" })
    ok(bare.tasks.length === 1 && !("artifacts" in bare.tasks[0]), "list without includeArtifacts gave artifacts (or not the one Task of ctx-3)")
    ok((await store.get("l-g"))?.artifacts, "get lost the artifacts that list left out")
    const full = await store.list({ contextId: "ctx-3", includeArtifacts: true })
    same(full.tasks[0]?.artifacts, [{ parts: [{ kind: "text", text: "l-g" }] }], "artifacts with includeArtifacts: true")
  }),
  listCheck("list: a bad pageToken is refused", async (store) => {
    await rejects(store.list({ pageToken: "not-a-token" }), { name: "InvalidPageTokenError", message: /pageToken/ }, "list({ pageToken: \"not-a-token\" })")
  }),
  listCheck("list: owners selects Tasks by the principal that created them", async (store) => {
    const owned = (id: string, i: number, owner?: unknown): A2ATask => {
      const plain: A2ATask = { id, contextId: "ctx-o", kind: "task", status: { state: "completed", timestamp: new Date(Date.UTC(2026, 1, 1, 0, 0, i)).toISOString() } }
      return owner === undefined ? plain : withInternals(plain, { principal: owner as string })
    }
    await store.save(owned("o-alice-1", 1, "alice"))
    await store.save(owned("o-bob", 2, "bob"))
    await store.save(owned("o-none", 3))
    await store.save(owned("o-alice-2", 4, "alice"))
    // An owner that is not a name (never written by the server): no owner query matches it.
    await store.save(owned("o-odd", 5, 5))
    const listed = async (owners?: Array<string | null>) => {
      const page = await store.list({ owners })
      return { ids: page.tasks.map((each) => each.id), total: page.totalSize }
    }
    same(await listed(), { ids: ["o-odd", "o-alice-2", "o-none", "o-bob", "o-alice-1"], total: 5 }, "no owners")
    same(await listed(["alice"]), { ids: ["o-alice-2", "o-alice-1"], total: 2 }, "owners [\"alice\"]")
    same(await listed(["alice", null]), { ids: ["o-alice-2", "o-none", "o-alice-1"], total: 3 }, "owners [\"alice\", null]")
    same(await listed([null]), { ids: ["o-none"], total: 1 }, "owners [null]")
    same(await listed(["alice", "bob"]), { ids: ["o-alice-2", "o-bob", "o-alice-1"], total: 3 }, "owners [\"alice\", \"bob\"]")
    same(await listed(["mallory"]), { ids: [], total: 0 }, "owners [\"mallory\"]")
    same(await listed([]), { ids: [], total: 0 }, "owners []")
    same(await listed(["5"]), { ids: [], total: 0 }, "owners [\"5\"] (an owner that is not a name is not its string form)")
    const paged: string[] = []
    let pageToken: string | undefined
    for (let pages = 0; pages < 10; pages++) {
      const page = await store.list({ owners: ["alice", null], pageSize: 1, pageToken })
      equal(page.totalSize, 3, "totalSize of every page of owners [\"alice\", null]")
      paged.push(...page.tasks.map((each) => each.id))
      pageToken = page.nextPageToken || undefined
      if (pageToken === undefined) break
    }
    same(paged, ["o-alice-2", "o-none", "o-alice-1"], "the pages of owners [\"alice\", null], pageSize 1")
  }),
]

/** The names of the TaskStore contract's checks, in the order they run (for ContractOptions.only). */
export const storeContractChecks: readonly string[] = STORE_CHECKS.map((each) => each.name)

/**
 * Runs the TaskStore contract against the store `makeStore` builds: get and
 * save, copies, distinct ids, per-id call order, and the optional
 * capabilities the store has (`getText`, `delete`, `list` with paging,
 * filters and owners). A check of a capability the store lacks passes
 * without running. Each check makes its own store and closes it.
 *
 * @param makeStore Builds a fresh, empty store; called once per check.
 * @param options The per-check timeout, and which checks to run.
 * @returns The failures, empty when the store keeps the contract.
 *
 * @example
 * ```ts
 * const failures = await runStoreContract(() => new MyStore())
 * assert.deepEqual(failures, [])
 * ```
 */
export function runStoreContract(makeStore: MakeTaskStore, options?: ContractOptions): Promise<ContractFailure[]> {
  return runChecks(STORE_CHECKS, makeStore, options)
}
