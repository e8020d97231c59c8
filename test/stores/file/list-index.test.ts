import { spawn } from "node:child_process"
import { once } from "node:events"
import fs from "node:fs"
import fsp from "node:fs/promises"
import path from "node:path"
import t, { type Test } from "tap"
import { withInternals } from "../../../lib/internals.js"
import type { StoreErrorContext } from "../../../lib/stores/background-errors.js"
import { FileTaskStore, type FileSystem } from "../../../lib/stores/file/store.js"
import { pageOfTasks, type TaskPage, type TaskQuery } from "../../../lib/stores/list.js"
import type { A2ATask, TaskState } from "../../../lib/types.js"
import { ROOT, recordingFs, sampleTask, simulated, tmpDir, waitFor } from "../../fixtures/helpers.js"

/**
 * FileTaskStore.list pages from an index of the Task files' ListKeys. These
 * tests hold it to the answer of reading every file, whoever wrote them.
 */

/** node:fs/promises with fs.watch as the watcher: what the store uses by default, to record or break. */
const watchingFs = (base: FileSystem = fsp): FileSystem => ({
  ...base,
  watchDirectory: (dir, onChange, onError) => {
    const watcher = fs.watch(dir, { persistent: false }, (_event, name) => onChange(name ?? undefined))
    watcher.on("error", onError)
    return watcher
  },
})

/** A file system layer whose stat says nothing but the modification time: the store cannot tell files apart, and reads. */
const bareFs: FileSystem = { ...fsp, stat: async (file) => ({ mtimeMs: (await fsp.stat(file)).mtimeMs }) }

/** The answer of reading every Task file in `dir`: what list() gave before it had an index. */
async function listByReadingEverything(dir: string, query: TaskQuery): Promise<TaskPage> {
  const tasks: A2ATask[] = []
  for (const name of await fsp.readdir(dir)) {
    if (name.endsWith(".json")) tasks.push(JSON.parse(await fsp.readFile(path.join(dir, name), "utf8")) as A2ATask)
  }
  return pageOfTasks(tasks, query)
}

/** Every page of `query`, followed by its tokens. */
async function allPages(list: (query: TaskQuery) => Promise<TaskPage>, query: TaskQuery): Promise<Array<Omit<TaskPage, "tasks"> & { ids: string[] }>> {
  const pages = []
  let pageToken: string | undefined
  do {
    const { tasks, ...page } = await list({ ...query, pageToken })
    pages.push({ ...page, ids: tasks.map((task) => `${task.id} ${task.status.state}`) })
    pageToken = page.nextPageToken || undefined
  } while (pageToken)
  return pages
}

/** A seeded generator, so a failing sequence can be run again. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

const STATES: TaskState[] = ["submitted", "working", "completed", "failed", "canceled", "input-required"]
const at = (second: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString()

t.test("list() answers as reading every file would, over random saves and deletes by two stores on one directory", async (t) => {
  const dir = tmpDir(t)
  const seed = Date.now() % 100_000
  t.comment(`seed ${seed}`)
  const next = random(seed)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]
  const writers = [new FileTaskStore(dir), new FileTaskStore(dir, { fs: fsp })]
  const readers = {
    "a writer, watching": writers[0],
    "a writer, without a watcher": writers[1],
    "a reader, watching": new FileTaskStore(dir),
    "a reader whose stat gives no inode": new FileTaskStore(dir, { fs: bareFs }),
  }
  // Ids plain, encoded and hashed (too long for a name): the index keeps file names, the id comes from inside.
  const ids = [...Array.from({ length: 12 }, (_, i) => `r-${i}`), "Upper/Case", "x".repeat(300)]
  const queries: TaskQuery[] = [
    {},
    { pageSize: 3 },
    { contextId: "ctx-a" },
    { contextId: "ctx-b", pageSize: 2 },
    { status: "completed" },
    { owners: ["alice", null], pageSize: 4 },
    { owners: ["bob"] },
    { statusTimestampAfter: at(3), pageSize: 5 },
  ]
  for (let step = 1; step <= 150; step++) {
    const writer = pick(writers)
    const id = pick(ids)
    // Several writes at once, by both stores: some land in the same tick of the file system's clock.
    const writes = Array.from({ length: 1 + Math.floor(next() * 3) }, () => {
      if (next() < 0.2) return writer.delete(id)
      const task: A2ATask = { ...sampleTask(id, pick(STATES)), contextId: pick(["ctx-a", "ctx-b", "ctx-c"]), status: { state: pick(STATES), timestamp: at(Math.floor(next() * 6)) } }
      const owner = pick(["alice", "bob", undefined])
      return pick(writers).save(owner === undefined ? task : withInternals(task, { principal: owner }))
    })
    await Promise.all(writes)
    if (step % 5 !== 0) continue
    const query = pick(queries)
    const truth = await allPages((q) => listByReadingEverything(dir, q), query)
    for (const [name, store] of Object.entries(readers)) {
      t.same(await allPages((q) => store.list(q), query), truth, `step ${step}, ${name}: ${JSON.stringify(query)}`)
    }
  }
  for (const store of Object.values(readers)) await store.close()
})

t.test("a save and a delete by another process are seen by the next list()", async (t) => {
  const dir = tmpDir(t)
  const watching = new FileTaskStore(dir)
  const sweeping = new FileTaskStore(dir, { fs: fsp })
  await watching.save(sampleTask("victim", "completed"))
  for (const store of [watching, sweeping]) t.same((await store.list({})).tasks.map((task) => task.id), ["victim"], "indexed")
  const script = `
    import { FileTaskStore } from ${JSON.stringify(path.join(ROOT, "dist", "lib", "stores", "file", "store.js"))}
    const store = new FileTaskStore(process.argv[1])
    await store.save({ id: "from-child", contextId: "ctx-1", kind: "task", status: { state: "working", timestamp: "2026-02-01T00:00:00.000Z" } })
    await store.delete("victim")
  `
  const child = spawn(process.execPath, ["--input-type=module", "-e", script, dir], { stdio: ["ignore", "ignore", "inherit"] })
  const [code] = await once(child, "exit")
  t.equal(code, 0, "the child saved and deleted")
  for (const [name, store] of [["watching", watching], ["without a watcher", sweeping]] as const) {
    const page = await store.list({ contextId: "ctx-1" })
    t.same(page.tasks.map((task) => task.id), ["from-child"], `${name}: the child's save is listed, its delete is not`)
    t.equal(page.totalSize, 1)
  }
  await Promise.all([watching.close(), sweeping.close()])
})

/** `count` Tasks written straight into `dir`, four to a context, as the store names them. */
async function fill(dir: string, count: number): Promise<void> {
  const namer = new FileTaskStore(dir)
  await fsp.mkdir(dir, { recursive: true })
  for (let i = 0; i < count; i++) {
    const task = { ...sampleTask(`f-${i}`, "completed"), contextId: `ctx-${Math.floor(i / 4)}`, status: { state: "completed" as const, timestamp: at(i % 60) } }
    await fsp.writeFile(namer.fileFor(task.id), JSON.stringify(task))
  }
}

t.test("a listing reads only its page's files, and the files other processes changed", async (t) => {
  const dir = tmpDir(t)
  await fill(dir, 1500)
  const peer = new FileTaskStore(dir)
  const count = (calls: string[], op: string) => calls.filter((call) => call.startsWith(op + " ")).length
  for (const [name, layer] of [
    ["watching", (calls: string[]) => watchingFs(recordingFs(dir, calls))],
    ["without a watcher", (calls: string[]) => recordingFs(dir, calls)],
  ] as const) {
    const calls: string[] = []
    const store = new FileTaskStore(dir, { fs: layer(calls) })
    const files = fs.readdirSync(dir).length
    await store.list({})
    t.equal(count(calls, "readFile"), files + 50, `${name}: the first listing reads every file once, then its page`)
    // Without a watcher, a directory whose times are under 2 s old is looked at whole again (a stat of each file, no
    // reads): a change within the same tick of its clock would not move them. Made older here, as it is a while later.
    const settle = async () => {
      if (name === "watching") return
      const past = new Date(Date.now() - 60_000)
      fs.utimesSync(dir, past, past)
      await store.list({ pageSize: 1 })
    }

    await settle()
    calls.length = 0
    const conversation = await store.list({ contextId: "ctx-7", pageSize: 100, owners: [null] })
    t.equal(conversation.tasks.length, 4)
    t.equal(count(calls, "readFile"), 4, `${name}: a context lookup reads the context's files`)
    t.ok(count(calls, "stat") <= 5, `${name}: and stats them (and the directory), nothing more`)

    calls.length = 0
    await Promise.all([1, 2, 3].map((i) => peer.save({ ...sampleTask(`peer-${name}-${i}`, "working"), contextId: "ctx-peer" })))
    const page = await store.list({ pageSize: 20 })
    t.equal(page.tasks.length, 20)
    t.equal(page.totalSize, files + 3)
    t.ok(count(calls, "readFile") <= 20 + 3, `${name}: after a peer's saves, the page and the saved files are read (${count(calls, "readFile")} reads)`)
    if (name === "watching") t.ok(count(calls, "stat") <= 30, `watching: the watcher names the changed files, nothing else is stat'ed (${count(calls, "stat")})`)
    else t.ok(count(calls, "readdir") === 1, "without a watcher: the changed directory is read once")

    await settle()
    calls.length = 0
    await store.list({ pageSize: 20 })
    t.ok(count(calls, "readFile") <= 20, `${name}: an unchanged directory costs the page`)
    t.ok(count(calls, "stat") <= 21, `${name}: its stats`)
    t.equal(count(calls, "readdir"), 0, `${name}: and no readdir`)
    await store.close()
  }
})

t.test("retention: deleteFinishedBefore removes finished Tasks older than the cutoff, and nothing else", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  const old = at(1)
  const recent = at(50)
  const saved: Array<[string, TaskState, string]> = [
    ["old-completed", "completed", old],
    ["old-failed", "failed", old],
    ["old-canceled", "canceled", old],
    ["old-rejected", "rejected", old],
    ["old-working", "working", old],
    ["old-input", "input-required", old],
    ["recent-completed", "completed", recent],
  ]
  for (const [id, state, timestamp] of saved) await store.save({ ...sampleTask(id, state), status: { state, timestamp } })
  t.equal(await store.deleteFinishedBefore(at(10)), 4, "the four finished ones before the cutoff")
  t.same((await store.list({})).tasks.map((task) => task.id).sort(), ["old-input", "old-working", "recent-completed"])
  t.same(fs.readdirSync(dir).sort(), ["old-input.json", "old-working.json", "recent-completed.json"], "their files are gone, nothing left aside")
  t.equal(await store.get("old-completed"), undefined)
  t.equal(await store.deleteFinishedBefore(at(10)), 0, "a second sweep finds nothing")
  await t.rejects(store.deleteFinishedBefore(5 as never), /deleteFinishedBefore needs an ISO-8601 time/)
})

t.test("retention: a save of an expiring Task made during the sweep is kept, by this store or by another process", async (t) => {
  const dir = tmpDir(t)
  const finishedLongAgo = { ...sampleTask("follow-up", "completed"), status: { state: "completed" as const, timestamp: at(1) } }
  const peer = new FileTaskStore(dir)
  let during: (() => Promise<void>) | undefined
  let putBack: (() => Promise<void>) | undefined
  // Runs `during` at the moment the sweep moves the file aside (after it checked the file, before it removes it),
  // and `putBack` at the moment it puts a file back from aside (by link, or by a rename from the aside name).
  const store = new FileTaskStore(dir, {
    fs: recordingFs(dir, [], async (op, file) => {
      if (op === "rename" && path.basename(file) === "follow-up.json" && during) {
        const run = during
        during = undefined
        await run()
      }
      if ((op === "link" || (op === "rename" && path.basename(file) !== "follow-up.json")) && putBack) {
        const run = putBack
        putBack = undefined
        await run()
      }
    }),
  })
  const working = (by: string) => withInternals({ ...sampleTask("follow-up", "working"), status: { state: "working", timestamp: new Date().toISOString() } }, { principal: by })

  await store.save(finishedLongAgo)
  let ownSave: Promise<void> | undefined
  during = async () => {
    ownSave = store.save(working("own"))
  }
  t.equal(await store.deleteFinishedBefore(at(10)), 1, "the finished Task was removed")
  await ownSave
  t.match(await store.get("follow-up"), { status: { state: "working" }, metadata: { toolnexus: { principal: "own" } } }, "this store's save, queued behind the removal, landed after it")
  t.same((await store.list({})).tasks.map((task) => task.id), ["follow-up"])

  await store.save(finishedLongAgo)
  during = () => peer.save(working("peer"))
  t.equal(await store.deleteFinishedBefore(at(10)), 0, "what was moved aside was the peer's save: put back, not removed")
  t.match(await store.get("follow-up"), { status: { state: "working" }, metadata: { toolnexus: { principal: "peer" } } }, "the other process's save is kept")
  t.same(fs.readdirSync(dir), ["follow-up.json"], "nothing left aside")
  t.same((await store.list({ status: "working" })).tasks.map((task) => task.id), ["follow-up"], "and listed as it is")

  // The peer saves while the file is aside, and again while the sweep puts that back: the newest save stays.
  await store.save(finishedLongAgo)
  during = async () => {
    await peer.save(working("peer"))
    putBack = () => peer.save(working("peer-newest"))
  }
  t.equal(await store.deleteFinishedBefore(at(10)), 0, "put back, not removed")
  t.match(await peer.get("follow-up"), { metadata: { toolnexus: { principal: "peer-newest" } } }, "the save made while the sweep put the file back is the one kept")
  t.same(fs.readdirSync(dir), ["follow-up.json"], "nothing left aside")

  // Saved again between the listing and the check: read anew, and no longer expired.
  await store.save(finishedLongAgo)
  await store.list({})
  await peer.save(working("peer-again"))
  t.equal(await store.deleteFinishedBefore(at(10)), 0, "the file changed since it was indexed: read again, and kept")
  t.equal((await store.get("follow-up"))?.status.state, "working")
})

/** A FileTaskStore that counts its retention sweeps. */
class SweepCounting extends FileTaskStore {
  sweeps = 0
  override deleteFinishedBefore(cutoff: string): Promise<number> {
    this.sweeps++
    return super.deleteFinishedBefore(cutoff)
  }
}

t.test("retention: opts.retention sweeps in the background from open until close", async (t) => {
  const dir = tmpDir(t)
  await t.rejects(
    Promise.resolve().then(() => new FileTaskStore(dir, { retention: { terminalTtl: "soon" } })),
    /^FileTaskStore: opts\.retention should be \{ terminalTtl/,
    "a bad TTL is refused at construction, naming the option",
  )
  const seen: StoreErrorContext[] = []
  const store = new SweepCounting(dir, { retention: { terminalTtl: 40 }, onError: (_err, context) => void seen.push(context) })
  await store.save({ ...sampleTask("done", "completed"), status: { state: "completed", timestamp: new Date().toISOString() } })
  await store.save({ ...sampleTask("busy", "working"), status: { state: "working", timestamp: at(1) } })
  await waitFor(async () => (await store.get("done")) === undefined, 10_000, "the finished Task to expire")
  t.equal((await store.get("busy"))?.status.state, "working", "an unfinished one stays, however old")
  await store.close()
  const sweepsAtClose = store.sweeps
  await store.save({ ...sampleTask("after-close", "completed"), status: { state: "completed", timestamp: at(1) } })
  // A store with the same TTL sweeps three times: the closed one, were it still sweeping, would have swept too.
  const witness = new SweepCounting(tmpDir(t), { retention: { terminalTtl: 40 } })
  await witness.open()
  await waitFor(() => witness.sweeps >= 3, 10_000, "three sweeps of the witness")
  await witness.close()
  t.equal(store.sweeps, sweepsAtClose, "no sweep after close()")
  t.ok(await store.get("after-close"), "and nothing removed")
  t.same(seen, [], "nothing went wrong")
})

t.test("retention: a Task that cannot be removed is reported (operation retention) and the sweep goes on", async (t) => {
  const dir = tmpDir(t)
  const seen: Array<{ message: string; context: StoreErrorContext }> = []
  const store = new FileTaskStore(dir, {
    fs: recordingFs(dir, [], (op, file) => {
      if (op === "rename" && path.basename(file) === "stuck.json") throw simulated("EACCES")
    }),
    onError: (err, context) => void seen.push({ message: err.message, context }),
  })
  for (const id of ["stuck", "gone"]) await store.save({ ...sampleTask(id, "completed"), status: { state: "completed", timestamp: at(1) } })
  t.equal(await store.deleteFinishedBefore(at(10)), 1)
  t.same(fs.readdirSync(dir), ["stuck.json"])
  t.match(seen, [{ message: /EACCES/, context: { store: "FileTaskStore", operation: "retention", taskId: "stuck" } }])
})

t.test("an unreadable file is reported by every listing and left out, with or without the index's help", async (t) => {
  for (const [name, options] of [
    ["watching", {}],
    ["without a watcher", { fs: fsp }],
    ["a stat without inodes", { fs: bareFs }],
  ] as const) {
    const dir = tmpDir(t)
    const seen: StoreErrorContext[] = []
    const store = new FileTaskStore(dir, { ...options, onError: (_err, context) => void seen.push(context) })
    await store.save(sampleTask("fine", "working"))
    await store.save(sampleTask("broken", "working"))
    t.equal((await store.list({})).totalSize, 2, `${name}: indexed`)
    // Broken in place: the directory's times do not move.
    fs.writeFileSync(store.fileFor("broken"), '{"id":"broken","status":')
    const page = await store.list({})
    t.same(page.tasks.map((task) => task.id), ["fine"], `${name}: left out`)
    t.equal(page.totalSize, 1, `${name}: and not counted`)
    t.same(seen, [{ store: "FileTaskStore", operation: "list", taskId: "broken" }], `${name}: reported once`)
    await store.list({ contextId: "elsewhere" })
    t.equal(seen.length, 2, `${name}: and by the next listing`)
    fs.writeFileSync(store.fileFor("broken"), JSON.stringify(sampleTask("broken", "completed")))
    t.same((await store.list({ status: "completed" })).tasks.map((task) => task.id), ["broken"], `${name}: mended, it is listed again`)
    t.equal(seen.length, 2, `${name}: and no longer reported`)
    fs.rmSync(store.fileFor("broken"))
    t.same((await store.list({})).tasks.map((task) => task.id), ["fine"], `${name}: removed behind the store's back, it is gone`)
    await store.close()
  }
})

/** A watcher that reports what the test hands to `control.change`, and nothing else. */
function reportsWhatTheTestSays(_dir: string, control: { change?: (name: string | undefined) => void }): FileSystem {
  return {
    ...fsp,
    watchDirectory: (_d, onChange) => {
      control.change = onChange
      return { close: () => {} }
    },
  }
}

t.test("a watcher that fails, cannot start, or cannot say what changed leaves listings right", async (t) => {
  const cases: Array<[string, (dir: string, control: { error?: (err: Error) => void; change?: (name: string | undefined) => void }) => FileSystem]> = [
    [
      "cannot start",
      () => ({
        ...fsp,
        watchDirectory: () => {
          throw simulated("ENOSPC")
        },
      }),
    ],
    [
      "fails later",
      (_dir, control) => ({
        ...fsp,
        watchDirectory: (_d, _onChange, onError) => {
          control.error = onError
          return {
            close: () => {
              throw new Error("already closed")
            },
          }
        },
      }),
    ],
    ["reports no names", reportsWhatTheTestSays],
    ["reports too many names", reportsWhatTheTestSays],
    [
      "never reports",
      () => ({ ...fsp, watchDirectory: () => ({ close: () => {} }) }),
    ],
  ]
  for (const [name, layer] of cases) {
    const dir = tmpDir(t)
    const control: { error?: (err: Error) => void; change?: (name: string | undefined) => void } = {}
    const seen: Array<{ message: string; context: StoreErrorContext }> = []
    const store = new FileTaskStore(dir, { fs: layer(dir, control), onError: (err, context) => void seen.push({ message: err.message, context }) })
    const peer = new FileTaskStore(dir)
    await peer.save(sampleTask("first"))
    t.same((await store.list({})).tasks.map((task) => task.id), ["first"], `${name}: indexed`)
    control.error?.(simulated("EIO"))
    await peer.save(sampleTask("second"))
    if (name === "reports no names") control.change!(undefined)
    if (name === "reports too many names") for (let i = 0; i <= 10_000; i++) control.change!(`n-${i}.json`)
    t.same((await store.list({})).tasks.map((task) => task.id).sort(), ["first", "second"], `${name}: the peer's save is listed`)
    await peer.delete("first")
    t.same((await store.list({})).tasks.map((task) => task.id), ["second"], `${name}: and its delete`)
    if (name === "cannot start" || name === "fails later") {
      t.match(seen, [{ message: /FileTaskStore cannot watch .*stat of every file.*(ENOSPC|EIO)/, context: { store: "FileTaskStore", operation: "watch" } }], `${name}: reported once`)
    } else t.same(seen, [], `${name}: nothing to report`)
    await store.close()
  }
  t.throws(() => new FileTaskStore(tmpDir(t), { fs: { ...fsp, watchDirectory: "yes" } as never }), /options\.fs\.watchDirectory, when given, should be a function/)
})

t.test("a listing after the directory was replaced, and after close(), still sees other processes' changes", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  const peer = new FileTaskStore(dir)
  await peer.save(sampleTask("before"))
  t.same((await store.list({})).tasks.map((task) => task.id), ["before"])
  fs.rmSync(dir, { recursive: true })
  fs.mkdirSync(dir)
  await peer.save(sampleTask("in-the-new-one"))
  t.same((await store.list({})).tasks.map((task) => task.id), ["in-the-new-one"], "the new directory is swept")
  await peer.save(sampleTask("later"))
  t.same((await store.list({})).tasks.map((task) => task.id).sort(), ["in-the-new-one", "later"], "and its later changes seen")
  await store.close()
  await peer.save(sampleTask("after-close"))
  t.same((await store.list({})).tasks.map((task) => task.id).sort(), ["after-close", "in-the-new-one", "later"], "a closed store lists by the directory's times")
})

t.test("a refresh that fails is tried again by the next listing", async (t: Test) => {
  const dir = tmpDir(t)
  let failReaddir = false
  const store = new FileTaskStore(dir, {
    fs: recordingFs(dir, [], (op) => {
      if (op === "readdir" && failReaddir) throw simulated("EMFILE")
    }),
  })
  await store.save(sampleTask("a"))
  await store.open()
  failReaddir = true
  await t.rejects(store.list({}), /EMFILE/, "the listing says why")
  failReaddir = false
  t.same((await store.list({})).tasks.map((task) => task.id), ["a"], "the next one builds the index")
  // Concurrent listings share refreshes and agree.
  const pages = await Promise.all(Array.from({ length: 5 }, () => store.list({})))
  t.ok(pages.every((page) => page.totalSize === 1))
})

/**
 * A store without a watcher on `dir` whose file operations run `hook` first,
 * and `settle()`, which ages the directory's times and lets the store see
 * that: its next listing then looks at no file but its page's.
 */
function hooked(t: Test, hook: (op: string, name: string) => void | Promise<void>, onError?: (err: Error, context: StoreErrorContext) => void) {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir, { fs: recordingFs(dir, [], (op, file) => hook(op, path.basename(file))), onError })
  const settle = async () => {
    const past = new Date(Date.now() - 60_000)
    fs.utimesSync(dir, past, past)
    await store.list({ pageSize: 1 })
  }
  return { dir, store, settle }
}

t.test("files that change or go between the index's look and the page's read", async (t) => {
  let armed: { op: string; name: string; run: () => void | Promise<void> } | undefined
  const seen: Array<{ message: string; context: StoreErrorContext }> = []
  const { dir, store, settle } = hooked(
    t,
    async (op, name) => {
      if (armed && armed.op === op && armed.name === name) {
        const { run } = armed
        armed = undefined
        await run()
      }
    },
    (err, context) => void seen.push({ message: err.message, context }),
  )
  const file = (id: string) => path.join(dir, `${id}.json`)
  for (const id of ["p-1", "p-2", "p-3", "p-4"]) await store.save({ ...sampleTask(id, "working"), status: { state: "working", timestamp: at(Number(id.slice(2))) } })
  await settle()

  armed = { op: "stat", name: "p-4.json", run: () => fs.rmSync(file("p-4")) }
  t.same((await store.list({})).tasks.map((task) => task.id), ["p-3", "p-2", "p-1"], "gone before its stat: left out, and the page made again")
  await settle()
  armed = { op: "readFile", name: "p-3.json", run: () => fs.rmSync(file("p-3")) }
  fs.writeFileSync(file("p-3"), JSON.stringify({ ...sampleTask("p-3", "completed"), status: { state: "completed", timestamp: at(3) } }))
  t.same((await store.list({})).tasks.map((task) => task.id), ["p-2", "p-1"], "gone before its read")
  await settle()
  fs.writeFileSync(file("p-2"), JSON.stringify({ ...sampleTask("p-2", "completed"), contextId: "moved", status: { state: "completed", timestamp: at(2) } }))
  const working = await store.list({ status: "working" })
  t.same(working.tasks.map((task) => task.id), ["p-1"], "changed in place to another state: found on reading, and the page made again")
  t.equal(working.totalSize, 1)
  t.same((await store.list({ contextId: "moved" })).tasks.map((task) => task.id), ["p-2"], "and indexed as it is now")
  fs.writeFileSync(file("p-1"), "{")
  t.same((await store.list({})).tasks.map((task) => task.id), ["p-2"], "broken in place: left out")
  t.match(seen, [{ message: /left an unreadable file out of a listing: .*corrupt/, context: { operation: "list", taskId: "p-1" } }], "and reported")

  // Files the index cannot read: a directory with a Task file's name, a stat that fails, a file gone before its read.
  fs.mkdirSync(file("a-dir"))
  await store.save(sampleTask("no-stat"))
  await store.save(sampleTask("vanishing"))
  armed = { op: "stat", name: "no-stat.json", run: () => Promise.reject(simulated("EACCES")) }
  seen.length = 0
  const swept = await store.list({})
  t.notOk(swept.tasks.some((task) => task.id === "no-stat"), "a file whose stat fails is left out")
  t.match(
    seen.map((each) => each.message).sort(),
    [/could not read .*a-dir\.json: EISDIR/, /could not read .*no-stat\.json: EACCES/, /corrupt task file at .*p-1\.json/],
    "each reported, with the one still broken",
  )
  armed = { op: "readFile", name: "vanishing.json", run: () => fs.rmSync(file("vanishing")) }
  // Saved by another process: this one has to read it.
  fs.writeFileSync(file("vanishing"), JSON.stringify(sampleTask("vanishing", "working")))
  t.notOk((await store.list({})).tasks.some((task) => task.id === "vanishing"), "a file gone before the index read it is not listed")
})

t.test("retention: files that change or go between the index's look and the removal", async (t) => {
  let armed: { op: string; name: string; run: () => void | Promise<void> } | undefined
  const { dir, store, settle } = hooked(t, async (op, name) => {
    if (armed && armed.op === op && armed.name === name) {
      const { run } = armed
      armed = undefined
      await run()
    }
  })
  const peer = new FileTaskStore(dir)
  const finished = (id: string) => store.save({ ...sampleTask(id, "completed"), status: { state: "completed", timestamp: at(1) } })
  for (const id of ["gone-at-stat", "gone-at-rename", "saved-again", "finished-again"]) await finished(id)
  await settle()
  armed = { op: "stat", name: "gone-at-stat.json", run: () => fs.rmSync(path.join(dir, "gone-at-stat.json")) }
  t.equal(await store.deleteFinishedBefore(at(10)), 3, "a file removed by someone else before the check is not counted")
  t.same(fs.readdirSync(dir), [])

  for (const id of ["gone-at-rename", "saved-again", "finished-again"]) await finished(id)
  await settle()
  const removedBeforeRename = deferredRun(() => fs.rmSync(path.join(dir, "gone-at-rename.json")))
  armed = { op: "rename", name: "gone-at-rename.json", run: removedBeforeRename }
  t.equal(await store.deleteFinishedBefore(at(10)), 2, "nor one removed before it is moved aside")

  await finished("saved-again")
  await finished("finished-again")
  await settle()
  armed = { op: "stat", name: "saved-again.json", run: () => peer.save({ ...sampleTask("saved-again", "working"), status: { state: "working", timestamp: at(2) } }) }
  t.equal(await store.deleteFinishedBefore(at(10)), 1, "a Task saved by another process since the listing is read again, and kept")
  t.equal((await store.get("saved-again"))?.status.state, "working")
  await finished("finished-again")
  await settle()
  armed = { op: "stat", name: "finished-again.json", run: () => peer.save({ ...sampleTask("finished-again", "failed"), status: { state: "failed", timestamp: at(3) } }) }
  t.equal(await store.deleteFinishedBefore(at(10)), 1, "one saved again, still finished long ago, is removed")
  t.same(fs.readdirSync(dir), ["saved-again.json"])
})

/** `run`, as a hook that runs once. */
function deferredRun(run: () => void): () => void {
  let done = false
  return () => {
    if (!done) run()
    done = true
  }
}

t.test("after this store's own save, a page reads no file: the index trusts the stamp the save took, and the read cache has its text", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, { fs: recordingFs(dir, calls) })
  await store.save(sampleTask("mine", "working"))
  await store.list({}) // builds the index
  await store.save(sampleTask("mine", "completed"))
  calls.length = 0
  const page = await store.list({})
  t.equal(page.tasks[0]?.status.state, "completed")
  t.same(calls.filter((call) => call.startsWith("readFile")), [], "no read: none to index it again, and the page's text is the one saved")
  t.ok(calls.includes("stat mine.json"), "the page's stat says the file is still the one saved")
})
