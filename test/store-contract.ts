import { createHook } from "node:async_hooks"
import t, { type Test } from "tap"
import { withInternals } from "../lib/internals.js"
import type { StoreErrorContext, TaskStoreOptions } from "../lib/stores/background-errors.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import type { A2ATask, TaskState } from "../lib/types.js"
import { sampleTask, waitFor } from "./helpers.js"

/**
 * The TaskStore contract, one suite for every store: each backend's test
 * file calls storeContract() with a harness for its store.
 */
export interface StoreHarness {
  /** A fresh, empty store built with `options`; registers its own teardown on `t`. */
  make(t: Test, options?: TaskStoreOptions): Promise<TaskStore>
  /**
   * For stores whose medium can hold what is not a Task (a file, a KV entry,
   * a row): replaces what is stored for Task `id` with text that is not JSON.
   */
  corrupt?: (t: Test, store: TaskStore, id: string) => Promise<void>
  /** True for stores with `watch`: it runs in the background, so its failures go to onError. */
  watches?: boolean
  /** True for stores that take `opts.retention` (every store, once each has it): the retention cases run. */
  retention?: boolean
  /**
   * Makes the store's retention sweeps fail while its gets and saves still
   * work (a refused delete, say); resolves with the function that undoes it.
   */
  failSweeps?: (t: Test, store: TaskStore) => Promise<() => Promise<void>>
}

/** A store's factory, for the parts of the contract that need no options. */
export type StoreFactory = (t: Test) => Promise<TaskStore>

const task = sampleTask

/** What a store told its onError, in order. */
function errorLog() {
  const seen: Array<{ err: Error; context: StoreErrorContext }> = []
  return { seen, onError: (err: Error, context: StoreErrorContext) => void seen.push({ err, context }) }
}

/** The process warnings emitted while the test runs. */
function warningsDuring(t: Test): Array<Error & { code?: string }> {
  const warnings: Array<Error & { code?: string }> = []
  const listener = (warning: Error) => warnings.push(warning)
  process.on("warning", listener)
  t.teardown(() => void process.off("warning", listener))
  return warnings
}

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
    t.equal(typeof store.list, "function", "the store lists")
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
    await t.rejects(store.list!({ pageToken: "not-a-token" }), { name: "InvalidPageTokenError", message: /pageToken/ })
  })




/** What is checked, and how it is refused, the same in every store. */
const checksContract = (name: string, harness: StoreHarness) =>
  t.test(`${name}: bad calls are refused alike, naming what was wanted`, async (t) => {
    await t.rejects(Promise.resolve().then(() => harness.make(t, { onError: "log" as never })), /opts\.onError should be a function/, "a bad onError, at construction")
    const store = await harness.make(t)
    await t.rejects(store.save(null as never), { name: "TypeError", message: /save needs a Task object, got null/ })
    await t.rejects(store.save(task("")), { name: "TypeError", message: /A Task id must be a non-empty string, got ""/ })
    await t.rejects(store.save({ ...task("x"), id: 5 } as never), /A Task id must be a non-empty string, got number/)
    await t.rejects(store.save({ id: "no-status" } as never), /save needs a Task with a status\.state string/)
    await t.rejects(store.get(""), /A Task id must be a non-empty string/)
    await t.rejects(store.get(undefined as never), /A Task id must be a non-empty string, got undefined/)
    if (store.getText) await t.rejects(store.getText(""), /A Task id must be a non-empty string/)
    if (store.delete) await t.rejects(store.delete(""), /A Task id must be a non-empty string/)
    if (store.list) {
      await t.rejects(store.list({ pageSize: 0 }), /query\.pageSize should be a positive integer, got 0/)
      await t.rejects(store.list({ pageSize: 2.5 }), /query\.pageSize should be a positive integer/)
      await t.rejects(store.list({ owners: "alice" as never }), /query\.owners should be an array of principal names/)
      await t.rejects(store.list({ owners: [7] as never }), /query\.owners should be an array/)
    }
    t.equal(await store.get("no-status"), undefined, "nothing refused was stored")
  })

/** Per-id ordering: what the runner relies on when it saves a Task's states back to back. */
const orderContract = (name: string, make: StoreFactory) =>
  t.test(`${name}: saves and deletes of one id take effect in call order`, async (t) => {
    const store = await make(t)
    const states = ["submitted", "working", "input-required", "working", "completed"] as const
    await Promise.all(states.map((state, i) => store.save(task("order", state, { metadata: { i } }))))
    t.same((await store.get("order"))?.metadata, { i: states.length - 1 }, "the last save called wins")
    if (!store.delete) return
    await Promise.all([store.save(task("sd")), store.delete("sd")])
    t.equal(await store.get("sd"), undefined, "a delete called after a save removes what it saved")
    await Promise.all([store.delete("sd"), store.save(task("sd", "working", { metadata: { back: true } }))])
    t.same((await store.get("sd"))?.metadata, { back: true }, "a save called after a delete stays")
  })

/** TaskQuery.owners: the server asks for a principal's Tasks by name, and for the unowned ones with null. */
const ownerContract = (name: string, make: StoreFactory) =>
  t.test(`${name}: list() by owner`, async (t) => {
    const store = await make(t)
    const at = (i: number) => new Date(Date.UTC(2026, 1, 1, 0, 0, i)).toISOString()
    const owned = (id: string, i: number, owner?: unknown) => {
      const plain: A2ATask = { id, contextId: "ctx-o", kind: "task", status: { state: "completed", timestamp: at(i) } }
      return owner === undefined ? plain : withInternals(plain, { principal: owner as string })
    }
    await store.save(owned("o-alice-1", 1, "alice"))
    await store.save(owned("o-bob", 2, "bob"))
    await store.save(owned("o-none", 3))
    await store.save(owned("o-alice-2", 4, "alice"))
    // An owner field that is not a name (not written by the server): no owner query matches it.
    await store.save(owned("o-odd", 5, 5))
    const ids = async (owners?: Array<string | null>, pageSize?: number) => {
      const page = await store.list!({ owners, pageSize })
      return { ids: page.tasks.map((each) => each.id), total: page.totalSize }
    }
    t.same(await ids(), { ids: ["o-odd", "o-alice-2", "o-none", "o-bob", "o-alice-1"], total: 5 }, "no owners: every Task")
    t.same(await ids(["alice"]), { ids: ["o-alice-2", "o-alice-1"], total: 2 }, "one principal's own")
    t.same(await ids(["alice", null]), { ids: ["o-alice-2", "o-none", "o-alice-1"], total: 3 }, "its own and the unowned: what ListTasks asks for")
    t.same(await ids([null]), { ids: ["o-none"], total: 1 }, "null: only Tasks without an owner")
    t.same(await ids(["alice", "bob"]), { ids: ["o-alice-2", "o-bob", "o-alice-1"], total: 3 }, "several principals")
    t.same(await ids(["mallory"]), { ids: [], total: 0 }, "a principal with no Tasks sees none, nor counts any")
    t.same(await ids([]), { ids: [], total: 0 }, "an empty list matches nothing")
    t.same(await ids(["5"]), { ids: [], total: 0 }, "an owner that is not a name is not its string form")

    const paged: string[] = []
    let pageToken: string | undefined
    do {
      const page = await store.list!({ owners: ["alice", null], pageSize: 1, pageToken })
      t.equal(page.totalSize, 3, "every page counts the same Tasks")
      paged.push(...page.tasks.map((each) => each.id))
      pageToken = page.nextPageToken || undefined
    } while (pageToken)
    t.same(paged, ["o-alice-2", "o-none", "o-alice-1"], "paging keeps the owner filter")
  })

/** Background failures go to onError, the same way in every store that has them. */
const onErrorContract = (name: string, harness: StoreHarness) => {
  const { corrupt } = harness
  if (corrupt) {
    t.test(`${name}: an unreadable stored Task is left out of list() and reported to onError`, async (t) => {
      const { seen, onError } = errorLog()
      const store = await harness.make(t, { onError })
      await store.save(task("fine", "working"))
      await store.save(task("broken", "working"))
      await corrupt(t, store, "broken")
      await t.rejects(store.get("broken"), /found a corrupt/, "get still says what is wrong")
      const page = await store.list!({})
      t.same(page.tasks.map((each) => each.id), ["fine"], "the listing goes on without it")
      t.equal(seen.length, 1, "reported once")
      t.match(seen[0]?.context, { store: name, operation: "list", taskId: "broken" })
      t.match(seen[0]?.err.message, /corrupt/)
    })

    t.test(`${name}: without onError, or when onError throws, a background failure is a process warning`, async (t) => {
      const warnings = warningsDuring(t)
      const quiet = await harness.make(t)
      await quiet.save(task("broken-1", "working"))
      await corrupt(t, quiet, "broken-1")
      t.same((await quiet.list!({})).tasks, [], "the default does not fail the call either")
      const throwing = await harness.make(t, {
        onError: () => {
          throw new Error("onError itself fails")
        },
      })
      await throwing.save(task("broken-2", "working"))
      await corrupt(t, throwing, "broken-2")
      t.same((await throwing.list!({})).tasks, [], "a throwing onError does not fail the call")
      await waitFor(() => warnings.filter((w) => w.code === "TOOLNEXUS_STORE_ERROR").length >= 2, 5000, "two warnings")
      const ours = warnings.filter((w) => w.code === "TOOLNEXUS_STORE_ERROR").map((w) => w.message)
      t.match(ours, [new RegExp(`^${name} list \\(task "broken-1"\\): .*corrupt`), new RegExp(`^${name} list \\(task "broken-2"\\): .*corrupt`)])
    })
  }
  if (!harness.watches) return
  t.test(`${name}: a watcher that throws is reported to onError and watching goes on`, async (t) => {
    const { seen, onError } = errorLog()
    const store = await harness.make(t, { onError })
    const heard: string[] = []
    const unwatch = await store.watch!((id) => {
      heard.push(id)
      if (id === "w-bad") throw new Error("a watcher bug")
    })
    t.teardown(unwatch)
    await store.save(task("w-bad"))
    await store.save(task("w-after"))
    await waitFor(() => heard.includes("w-after"), 20_000, "the change after the throw")
    await waitFor(() => seen.length > 0, 5000, "the report")
    t.match(seen, [{ err: { message: "a watcher bug" }, context: { store: name, operation: "watch", taskId: "w-bad" } }])
  })
}

const DAY_MS = 86_400_000
const ago = (ms: number) => new Date(Date.now() - ms).toISOString()
/** A Task in `state` whose status changed `ms` ago (a status without a time when `ms` is undefined). */
const aged = (id: string, state: TaskState, ms: number | undefined, extra: Partial<A2ATask> = {}): A2ATask =>
  task(id, state, { status: ms === undefined ? { state } : { state, timestamp: ago(ms) }, ...extra })
/**
 * Retention as the cases set it: a short TTL, so a Task saved in the test is also past it by the time of
 * its save (NATS counts from the later of the two), and a sweep every 10 ms so no case waits long.
 */
const RETENTION: TaskStoreOptions = { retention: { terminalTtl: "1s", sweepInterval: 10 } }

/** Timers set by lib/stores/retention.ts from now on: how many, and how many are pending (fired or cleared ones are not). */
function sweeperTimers(t: Test): { created: () => number; pending: () => number } {
  const pending = new Set<number>()
  let created = 0
  const hook = createHook({
    init(asyncId, type) {
      if (type !== "Timeout") return
      const limit = Error.stackTraceLimit
      Error.stackTraceLimit = 40
      const stack = new Error().stack ?? ""
      Error.stackTraceLimit = limit
      if (/stores[\\/]retention\.[jt]s/.test(stack)) {
        pending.add(asyncId)
        created++
      }
    },
    destroy(asyncId) {
      pending.delete(asyncId)
    },
  }).enable()
  t.teardown(() => void hook.disable())
  return { created: () => created, pending: () => pending.size }
}

/** Resolves once every id reads as missing: the sweep has been. */
const untilGone = (store: TaskStore, ids: string[], what: string) =>
  waitFor(async () => (await Promise.all(ids.map((id) => store.get(id)))).every((found) => found === undefined), 20_000, what)

/** `opts.retention`: the same cases for every store that takes it. */
const retentionContract = (name: string, harness: StoreHarness) => {
  if (!harness.retention) return
  t.test(`${name}: retention deletes finished Tasks past the TTL, and only those`, async (t) => {
    const store = await harness.make(t, RETENTION)
    const heard = new Set<string>()
    if (store.watch) t.teardown(await store.watch((id) => heard.add(id)))
    const expired = [
      aged("x-completed", "completed", 2 * DAY_MS),
      aged("x-failed", "failed", 2 * DAY_MS),
      aged("x-canceled", "canceled", 30 * DAY_MS),
      aged("x-rejected", "rejected", 400 * DAY_MS),
      aged("x/an id that is not a plain key", "completed", 2 * DAY_MS),
    ]
    const kept = [
      ...(["submitted", "working", "input-required", "auth-required"] as const).map((state) => aged(`k-old-${state}`, state, 400 * DAY_MS)),
      // Newer than any cutoff of the test, however slow the machine: the status time decides, not the save's.
      aged("k-status-after-cutoff", "completed", -60 * 60_000),
      aged("k-no-timestamp", "completed", undefined),
      task("k-not-iso", "completed", { status: { state: "completed", timestamp: "yesterday" } }),
    ]
    for (const each of [...expired, ...kept]) await store.save(each)
    await untilGone(store, expired.map((each) => each.id), "the expired Tasks to be swept")
    for (const each of kept) t.same(await store.get(each.id), each, `${each.id} stays`)
    if (store.list) {
      const listed = (await store.list({ pageSize: 100 })).tasks.map((each) => each.id).sort()
      t.same(listed, kept.map((each) => each.id).sort(), "list() shows what is kept, nothing swept")
    }
    if (store.watch) {
      // Hashed NATS keys aside (not used here), every sweep's delete reaches other servers' watchers.
      await waitFor(() => expired.every((each) => heard.has(each.id)), 20_000, "a watch notification for every swept Task")
      t.pass("watch told of every swept Task")
    }
  })

  t.test(`${name}: a save racing the sweep of its Task is never acknowledged and then lost`, async (t) => {
    const store = await harness.make(t, RETENTION)
    await store.save(aged("again", "completed", 2 * DAY_MS))
    await untilGone(store, ["again"], "the sweep")
    await store.save(aged("again", "working", 0))
    t.equal((await store.get("again"))?.status.state, "working", "after its sweep, the id is free: a save stores the Task anew")

    const ids = Array.from({ length: 30 }, (_, i) => `race-${i}`)
    await Promise.all(ids.map((id) => store.save(aged(id, "completed", 2 * DAY_MS))))
    const outcomes = await Promise.allSettled(ids.map((id) => store.save(aged(id, "working", 0, { metadata: { again: true } }))))
    // A sentinel swept after the race: a whole sweep has run since every save settled.
    await store.save(aged("sentinel", "failed", 2 * DAY_MS))
    await untilGone(store, ["sentinel"], "a sweep after the race")
    for (const [i, outcome] of outcomes.entries()) {
      const stored = await store.get(ids[i])
      if (outcome.status === "fulfilled") {
        t.same(stored?.metadata, { again: true }, `${ids[i]}: the save came after the sweep, and what it saved is kept`)
      } else {
        t.match(outcome.reason, { name: "TaskConflictError", stored: { status: { state: "completed" } } }, `${ids[i]}: the save came first and was refused`)
        t.equal(stored, undefined, `${ids[i]}: then the sweep deleted the finished Task`)
      }
    }
  })

  t.test(`${name}: a failed sweep is reported to onError (operation "retention"), the store keeps serving, the next sweep tries again`, async (t) => {
    if (!harness.failSweeps) {
      t.fail(`${name}'s harness has no failSweeps: it should say how a sweep of this store can fail`)
      return
    }
    const { seen, onError } = errorLog()
    const store = await harness.make(t, { ...RETENTION, onError })
    await store.open?.()
    const repair = await harness.failSweeps(t, store)
    await store.save(aged("f-expired", "completed", 2 * DAY_MS))
    await waitFor(() => seen.length >= 2, 20_000, "two failed sweeps reported")
    t.match(seen[0], { context: { store: name, operation: "retention" } })
    t.type(seen[0].err, Error)
    t.notOk(seen.some((each) => each.context.operation !== "retention"), "nothing else failed")
    t.equal((await store.get("f-expired"))?.status.state, "completed", "nothing was deleted")
    await store.save(task("f-working", "working"))
    t.equal((await store.get("f-working"))?.status.state, "working", "saves and reads go on")
    await repair()
    await untilGone(store, ["f-expired"], "a sweep after the repair")
    t.pass("the next sweep deleted the expired Task")
  })

  t.test(`${name}: close() stops sweeping, and no timer of the sweeper is left`, async (t) => {
    const timers = sweeperTimers(t)
    const store = await harness.make(t, RETENTION)
    await store.open?.()
    await store.save(aged("c-expired", "completed", 2 * DAY_MS))
    await untilGone(store, ["c-expired"], "a sweep")
    await waitFor(() => timers.created() >= 2, 20_000, "the sweeper's timers")
    await store.close!()
    await waitFor(() => timers.pending() === 0, 5000, "no sweeper timer pending after close()")
    const created = timers.created()
    // A sweep under way when close() was called ended inside it; none is scheduled after.
    await new Promise((resolve) => setImmediate(resolve))
    t.equal(timers.created(), created, "no sweep is scheduled after close()")
  })

  t.test(`${name}: without opts.retention, finished Tasks are kept, however old`, async (t) => {
    const store = await harness.make(t)
    await store.save(aged("ancient", "completed", 4000 * DAY_MS))
    t.ok(await store.get("ancient"), "kept")
  })

  t.test(`${name}: a bad opts.retention is refused at construction, naming the option`, async (t) => {
    for (const retention of [null, {}, { terminalTtl: "soon" }, { terminalTtl: -1 }, { terminalTtl: "30d", sweepInterval: 0 }, { terminalTtl: "30d", sweepInterval: "often" }]) {
      await t.rejects(
        Promise.resolve().then(() => harness.make(t, { retention } as never)),
        { name: "TypeError", message: new RegExp(`^${name}: opts\\.retention`) },
        JSON.stringify(retention),
      )
    }
  })
}

/** Runs the whole contract against one store. */
export function storeContract(name: string, harness: StoreHarness): void {
  const make: StoreFactory = (t) => harness.make(t)
  contract(name, make)
  listContract(name, make)
  checksContract(name, harness)
  orderContract(name, make)
  ownerContract(name, make)
  onErrorContract(name, harness)
  retentionContract(name, harness)
}
