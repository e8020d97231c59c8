import { withInternals } from "../internals.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2ATask, TaskState } from "../types.js"
import { equal, has, rejects, same } from "./expect.js"

/**
 * The checks of the TaskStore contract, each against a fresh store: what every store (the four shipped
 * ones and yours) must do for the server to be right on it. A check throws at the first thing the store
 * gets wrong; runStoreContract (index.ts) runs them and collects what they found.
 */

/** One check: its name (what a failure is reported under) and its body. */
export interface StoreCheck {
  name: string
  run(store: TaskStore): Promise<void>
}

/** A fixed status time: two builds of one Task are the same text. */
const AT = "2026-01-01T00:00:00.000Z"

const task = (id: string, state: TaskState = "submitted", extra: Partial<A2ATask> = {}): A2ATask => ({
  id,
  contextId: "ctx-1",
  kind: "task",
  status: { state, timestamp: AT },
  history: [{ kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "hello" }] }],
  ...extra,
})

/** Any rejection: the contract asks that a bad call be refused; the words are the store's (the shipped stores' are checked in their own tests). */
const REFUSED = /[\s\S]*/

const ids = (tasks: readonly A2ATask[]) => tasks.map((each) => each.id)

export const STORE_CHECKS: readonly StoreCheck[] = [
  {
    name: "get and save: a save is read back, a later save replaces it, and neither side's copy is shared",
    async run(store) {
      equal(await store.get("nope"), undefined, "get of a missing id")
      await store.save(task("t-1"))
      has(await store.get("t-1"), { id: "t-1", contextId: "ctx-1", status: { state: "submitted" } }, "get after save")
      await store.save(task("t-1", "completed", { artifacts: [{ parts: [{ kind: "text", text: "done" }] }] }))
      const latest = await store.get("t-1")
      equal(latest?.status.state, "completed", "get after a second save")
      same(latest?.artifacts, [{ parts: [{ kind: "text", text: "done" }] }], "the second save's artifacts")
      const saved = task("t-2")
      await store.save(saved)
      saved.status.state = "failed"
      equal((await store.get("t-2"))?.status.state, "submitted", "a saved Task changed by its caller afterwards")
      const read = await store.get("t-2")
      read!.status.state = "canceled"
      equal((await store.get("t-2"))?.status.state, "submitted", "a read Task changed by its reader")
    },
  },
  {
    name: "ids: ids that differ only in case or punctuation keep Tasks of their own",
    async run(store) {
      const names = ["a/b", "a_b", "a.b", "a b", "Abc", "abc"]
      await Promise.all(names.map((id, i) => store.save(task(id, "working", { metadata: { i } }))))
      for (const [i, id] of names.entries()) same((await store.get(id))?.metadata, { i }, `the Task of id ${JSON.stringify(id)}`)
    },
  },
  {
    name: "getText and delete, where the store has them",
    async run(store) {
      await store.save(task("t-1"))
      if (store.getText) {
        equal(await store.getText("nope"), undefined, "getText of a missing id")
        const text = await store.getText("t-1")
        same(JSON.parse(text ?? "null"), await store.get("t-1"), "getText's JSON against get")
        equal(await store.getText("t-1"), text, "getText of an unchanged Task, twice")
        await store.save(task("t-1", "failed"))
        equal((JSON.parse((await store.getText("t-1")) ?? "{}") as A2ATask).status?.state, "failed", "getText after a save")
      }
      if (store.delete) {
        await store.delete("t-1")
        equal(await store.get("t-1"), undefined, "get after delete")
        if (store.getText) equal(await store.getText("t-1"), undefined, "getText after delete")
      }
    },
  },
  {
    name: "order: saves and deletes of one id take effect in call order",
    async run(store) {
      const states = ["submitted", "working", "input-required", "working", "completed"] as const
      await Promise.all(states.map((state, i) => store.save(task("order", state, { metadata: { i } }))))
      same((await store.get("order"))?.metadata, { i: states.length - 1 }, "the Task after five saves called at once")
      if (!store.delete) return
      await Promise.all([store.save(task("sd")), store.delete("sd")])
      equal(await store.get("sd"), undefined, "a delete called after a save")
      await Promise.all([store.delete("sd"), store.save(task("sd", "working", { metadata: { back: true } }))])
      same((await store.get("sd"))?.metadata, { back: true }, "a save called after a delete")
    },
  },
  {
    name: "refusals: bad calls (a Task without an id or status, an empty id, a bad query) are refused, and nothing refused is kept",
    async run(store) {
      await rejects(() => store.save(null as never), REFUSED, "save(null)")
      await rejects(() => store.save(task("")), REFUSED, 'save of a Task with id ""')
      await rejects(() => store.save({ ...task("x"), id: 5 } as never), REFUSED, "save of a Task with a numeric id")
      await rejects(() => store.save({ id: "no-status" } as never), REFUSED, "save of a Task without a status")
      await rejects(() => store.get(""), REFUSED, 'get("")')
      if (store.getText) await rejects(() => store.getText!(""), REFUSED, 'getText("")')
      if (store.delete) await rejects(() => store.delete!(""), REFUSED, 'delete("")')
      if (store.list) {
        await rejects(() => store.list!({ pageSize: 0 }), REFUSED, "list with pageSize 0")
        await rejects(() => store.list!({ owners: "alice" as never }), REFUSED, "list with owners not a list")
      }
      equal(await store.get("no-status"), undefined, "get of the refused Task")
    },
  },
  {
    name: "list: newest status first, pages, filters, artifacts left out unless asked",
    async run(store) {
      if (!store.list) return
      const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()
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
      const order = ["l-g", "l-f", "l-e", "l-d", "l-c", "l-b", "l-a"]
      const all = await store.list({})
      same(ids(all.tasks), order, "list() (two Tasks share a time: the id breaks the tie)")
      has(all, { totalSize: 7, pageSize: 50, nextPageToken: "" }, "list()'s page")
      const seen: string[] = []
      let pageToken: string | undefined
      do {
        const page = await store.list({ pageSize: 3, pageToken })
        equal(page.totalSize, 7, "totalSize of every page")
        seen.push(...ids(page.tasks))
        pageToken = page.nextPageToken || undefined
      } while (pageToken && seen.length <= order.length)
      same(seen, order, "pages of 3, followed to the end")
      same(ids((await store.list({ contextId: "ctx-1" })).tasks), ["l-f", "l-d", "l-b", "l-a"], "list by contextId")
      const completed = await store.list({ status: "completed", pageSize: 2 })
      same(ids(completed.tasks), ["l-f", "l-e"], "list by status, 2 a page")
      equal(completed.totalSize, 4, "totalSize by status")
      same(ids((await store.list({ statusTimestampAfter: at(5) })).tasks), ["l-g", "l-f"], "list by statusTimestampAfter (at or after)")
      equal("artifacts" in (await store.list({ contextId: "ctx-3" })).tasks[0], false, "artifacts in a list without includeArtifacts")
      same((await store.list({ contextId: "ctx-3", includeArtifacts: true })).tasks[0]?.artifacts, [{ parts: [{ kind: "text", text: "l-g" }] }], "includeArtifacts: true")
      await rejects(() => store.list!({ pageToken: "not-a-token" }), /pageToken/, "a pageToken the store never gave")
    },
  },
  {
    name: "list by owner: a principal's own Tasks, the unowned ones with null",
    async run(store) {
      if (!store.list) return
      const at = (i: number) => new Date(Date.UTC(2026, 1, 1, 0, 0, i)).toISOString()
      const owned = (id: string, i: number, owner?: string) => {
        const plain: A2ATask = { id, contextId: "ctx-o", kind: "task", status: { state: "completed", timestamp: at(i) } }
        return owner === undefined ? plain : withInternals(plain, { principal: owner })
      }
      await store.save(owned("o-alice-1", 1, "alice"))
      await store.save(owned("o-bob", 2, "bob"))
      await store.save(owned("o-none", 3))
      await store.save(owned("o-alice-2", 4, "alice"))
      // An owner that is not a name (the server never writes one): no owner query matches it.
      await store.save(owned("o-odd", 5, 5 as never))
      const listed = async (owners?: Array<string | null>) => {
        const page = await store.list!({ owners })
        return { ids: ids(page.tasks), total: page.totalSize }
      }
      same(await listed(), { ids: ["o-odd", "o-alice-2", "o-none", "o-bob", "o-alice-1"], total: 5 }, "list without owners")
      same(await listed(["alice", "bob"]), { ids: ["o-alice-2", "o-bob", "o-alice-1"], total: 3 }, 'list of owners ["alice", "bob"]')
      same(await listed(["5"]), { ids: [], total: 0 }, 'list of owners ["5"] (an odd owner is not its string form)')
      same(await listed(["alice"]), { ids: ["o-alice-2", "o-alice-1"], total: 2 }, 'list of owners ["alice"]')
      same(await listed(["alice", null]), { ids: ["o-alice-2", "o-none", "o-alice-1"], total: 3 }, 'list of owners ["alice", null]')
      same(await listed([null]), { ids: ["o-none"], total: 1 }, "list of owners [null]")
      same(await listed(["mallory"]), { ids: [], total: 0 }, "list of an owner with no Tasks")
      same(await listed([]), { ids: [], total: 0 }, "list of owners []")
      const paged: string[] = []
      let pageToken: string | undefined
      do {
        const page = await store.list({ owners: ["alice", null], pageSize: 1, pageToken })
        equal(page.totalSize, 3, "totalSize of every page of owners [\"alice\", null]")
        paged.push(...ids(page.tasks))
        pageToken = page.nextPageToken || undefined
      } while (pageToken && paged.length <= 3)
      same(paged, ["o-alice-2", "o-none", "o-alice-1"], "pages of 1 keep the owner filter")
    },
  },
]
