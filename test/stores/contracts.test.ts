import fs from "node:fs"
import path from "node:path"
import t, { type Test } from "tap"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { NatsTaskStore } from "../../lib/stores/nats/store.js"
import { PostgresTaskStore } from "../../lib/stores/postgres/store.js"
import { resolveStore } from "../../lib/stores/resolve.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { storeContract } from "../fixtures/store-contract.js"
import { pushStoreContract } from "../fixtures/push-store-contract.js"
import { eventLogContract } from "../fixtures/event-log-contract.js"
import type { A2ATask } from "../../lib/types.js"
import { recordingFs, sampleTask, tmpDir, waitFor } from "../fixtures/helpers.js"

const task = sampleTask

/** A store closed when the test ends, so its retention sweeper stops with it. */
function closedAtEnd<S extends TaskStore>(t: Test, store: S): S {
  t.teardown(() => store.close?.())
  return store
}

/** How a sweep of a store with its own sweep method fails: the method made to reject, then given back (the prototype's again). */
async function failOwnSweeps(_t: Test, store: TaskStore): Promise<() => Promise<void>> {
  const sweeping = store as TaskStore & { deleteFinishedBefore?: (cutoff: string) => Promise<number> }
  sweeping.deleteFinishedBefore = () => Promise.reject(new Error("sweep failed on purpose"))
  return async () => {
    delete sweeping.deleteFinishedBefore
  }
}

storeContract("InMemoryTaskStore", {
  make: async (t, options) => closedAtEnd(t, new InMemoryTaskStore(options)),
  retention: true,
  failSweeps: failOwnSweeps,
})
storeContract("FileTaskStore", {
  make: async (t, options) => closedAtEnd(t, new FileTaskStore(tmpDir(t), options)),
  corrupt: async (_t, store, id) => fs.writeFileSync((store as FileTaskStore).fileFor(id), '{"id":"broken","status":'),
  retention: true,
  failSweeps: failOwnSweeps,
})

pushStoreContract("InMemoryTaskStore", {
  make: async (t) => ({ store: closedAtEnd(t, new InMemoryTaskStore()), another: () => new InMemoryTaskStore() }),
  shared: false,
  tellsOldestPending: true,
})
pushStoreContract("FileTaskStore", {
  make: async (t) => {
    const dir = tmpDir(t)
    return { store: closedAtEnd(t, new FileTaskStore(dir)), another: () => closedAtEnd(t, new FileTaskStore(dir)) }
  },
  tellsOldestPending: true,
})

eventLogContract("InMemoryTaskStore", {
  make: async (t, options) => ({ store: closedAtEnd(t, new InMemoryTaskStore(options)), another: () => closedAtEnd(t, new InMemoryTaskStore(options)) }),
  shared: false,
})
eventLogContract("FileTaskStore", {
  make: async (t, options) => {
    const dir = tmpDir(t)
    return { store: closedAtEnd(t, new FileTaskStore(dir, options)), another: () => closedAtEnd(t, new FileTaskStore(dir, options)) }
  },
})

t.test("FileTaskStore keeps one <id>.json per plain id and nothing else", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  await store.save(task("abc-123"))
  await store.save(task("abc-123", "working"))
  t.same(fs.readdirSync(dir), ["abc-123.json"], "no tmp files left behind")
  t.equal(JSON.parse(fs.readFileSync(path.join(dir, "abc-123.json"), "utf8")).status.state, "working")
})

t.test("FileTaskStore creates its directory, and open() says when it cannot", async (t) => {
  const dir = path.join(tmpDir(t), "nested", "tasks")
  const store = new FileTaskStore(dir)
  await store.open()
  t.ok(fs.statSync(dir).isDirectory())
  await store.save(task("x"))
  t.ok(fs.existsSync(path.join(dir, "x.json")))

  const blocked = new FileTaskStore(path.join(dir, "x.json", "tasks"))
  await t.rejects(blocked.open(), /FileTaskStore could not create its directory .*x\.json\/tasks: (ENOTDIR|EEXIST)/)
  await t.rejects(blocked.get("x"), /could not create its directory/, "and every call says so")
})

t.test("FileTaskStore never writes outside its directory", async (t) => {
  const root = tmpDir(t)
  const dir = path.join(root, "tasks")
  const store = new FileTaskStore(dir)
  for (const id of ["../escape", "/etc/passwd", "..", "sub/../../x", "C:\\win"]) {
    await store.save(task(id))
    t.equal((await store.get(id))?.id, id)
  }
  t.same(fs.readdirSync(root), ["tasks"], "nothing appeared beside the directory")
  t.equal(fs.readdirSync(dir).length, 5)
  t.ok(fs.readdirSync(dir).every((name) => !name.includes("/") && name.endsWith(".json")))
})

t.test("FileTaskStore refuses to save ids with a NUL, and finds no Task by one", async (t) => {
  const store = new FileTaskStore(tmpDir(t))
  await t.rejects(store.save(task("a\0b")), /must not contain NUL/)
  t.equal(await store.get("a\0b"), undefined)
  t.equal(await store.getText("a\0b"), undefined)
  await t.resolves(store.delete("a\0b"), "deleting it deletes nothing")
  await t.rejects(store.get(""), /non-empty string/, "a non-id is still refused")
})

t.test("FileTaskStore stores over-long ids", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  const long = "é".repeat(2000)
  const other = "é".repeat(1999) + "e"
  await store.save(task(long, "working"))
  await store.save(task(other, "completed"))
  t.equal((await store.get(long))?.status.state, "working")
  t.equal((await store.get(other))?.status.state, "completed")
  t.ok(fs.readdirSync(dir).every((name) => Buffer.byteLength(name) <= 255), "every file name fits the 255-byte limit")
})

t.test("FileTaskStore reports a corrupt file as an error, not as missing", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  fs.writeFileSync(path.join(dir, "broken.json"), '{"id":"broken","status":')
  await t.rejects(store.get("broken"), /corrupt task file at .*broken\.json/)
  fs.writeFileSync(path.join(dir, "other.json"), JSON.stringify(task("someone-else")))
  await t.rejects(store.get("other"), /does not hold task "other"/)
  await t.rejects(store.get("other"), /does not hold task "other"/, "also when the text comes from the read cache")
  await t.rejects(store.getText("other"), /does not hold task "other"/)
  await t.rejects(store.getText("broken"), /corrupt task file/)
})

t.test("FileTaskStore reports an unreadable file as an error", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  fs.mkdirSync(path.join(dir, "isdir.json"))
  await t.rejects(store.get("isdir"), /could not read .*isdir\.json/)
})

t.test("FileTaskStore.close() waits for the saves already called", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  const saves = Array.from({ length: 20 }, (_, i) => store.save(task(`c-${i}`)))
  await store.close()
  t.equal(fs.readdirSync(dir).filter((n) => n.endsWith(".json")).length, 20)
  await Promise.all(saves)
})

t.test("FileTaskStore snapshots a task at save() time", async (t) => {
  const store = new FileTaskStore(tmpDir(t))
  const saved = task("snap")
  const pending = store.save(saved)
  saved.status.state = "failed"
  await pending
  t.equal((await store.get("snap"))?.status.state, "submitted")
})

t.test("FileTaskStore: a save that cannot be serialized is refused at once", async (t) => {
  const store = new FileTaskStore(tmpDir(t))
  const cyclic = task("cyc") as A2ATask & { self?: unknown }
  cyclic.self = cyclic
  await t.rejects(store.save(cyclic), /circular/i, "a Task that is not JSON is refused before it is queued")
  await store.save(task("cyc", "completed"))
  t.equal((await store.get("cyc"))?.status.state, "completed")
})

t.test("FileTaskStore: a failed save does not block the save of the same id queued behind it", async (t) => {
  let failNextRename = true
  const failingOnce = {
    ...fs.promises,
    rename: async (from: string, to: string) => {
      if (failNextRename) {
        failNextRename = false
        throw Object.assign(new Error("EIO: simulated failure"), { code: "EIO" })
      }
      return fs.promises.rename(from, to)
    },
  }
  const store = new FileTaskStore(tmpDir(t), { fs: failingOnce })
  // Both called before either settles: the second waits in the first one's queue.
  const first = store.save(task("queued", "working"))
  const second = store.save(task("queued", "completed"))
  await t.rejects(first, { code: "EIO" }, "the first save, called first, met the failing rename")
  await second
  t.equal((await store.get("queued"))?.status.state, "completed", "the save queued behind it landed")
})

t.test("resolveStore", async (t) => {
  const dir = tmpDir(t)
  t.type(resolveStore(), InMemoryTaskStore)
  t.type(resolveStore("memory"), InMemoryTaskStore)
  const file = resolveStore(`file:${dir}/inner`)
  t.type(file, FileTaskStore)
  await file.open!()
  t.ok(fs.existsSync(path.join(dir, "inner")), "file:<dir> creates the directory")
  const custom = { get: async () => undefined, save: async () => {} }
  t.equal(resolveStore(custom), custom)
  t.throws(() => resolveStore("file:"), /names no directory/)
  t.throws(() => resolveStore("redis:whatever"), /Unknown A2A store "redis:whatever": expected "memory", "file:<dir>", "postgres:\/\/…", "nats:\/\/…" or an object with get\(id\) and save\(task\)/)
  t.type(resolveStore("postgres://u@127.0.0.1:5432/test?table=my_tasks"), PostgresTaskStore, "postgres:// needs no connection until first use")
  t.type(resolveStore("postgresql://u@127.0.0.1/test"), PostgresTaskStore)
  t.type(resolveStore("nats://127.0.0.1:4222?bucket=my_tasks"), NatsTaskStore)
  t.throws(() => resolveStore("postgres://u@127.0.0.1/test?table=bad name"), /table/)
  const withPassword = (() => {
    try {
      resolveStore("redis://user:hunter2@host")
    } catch (err) {
      return (err as Error).message
    }
  })()
  t.match(withPassword, /Unknown A2A store "redis:\/\/user:\*\*\*@host"/, "a password in a selector is not echoed")
  t.throws(() => resolveStore({ get: () => undefined } as never), /Unknown A2A store \(an object without get\/save methods\)/)
  t.throws(() => resolveStore(42 as never), /Unknown A2A store \(a number\)/)
})

t.test("resolveStore gives every store it builds the same onError", async (t) => {
  const dir = tmpDir(t)
  const seen: unknown[] = []
  const file = resolveStore(`file:${dir}`, { onError: (_err, context) => seen.push(context) })
  await file.save(task("half-written"))
  fs.writeFileSync(path.join(dir, "half-written.json"), '{"id":')
  t.same((await file.list!({})).tasks, [])
  t.same(seen, [{ store: "FileTaskStore", operation: "list", taskId: "half-written" }], "the file store reports to it")
  for (const [selector, store] of [
    ["memory", "InMemoryTaskStore"],
    [`file:${tmpDir(t)}`, "FileTaskStore"],
    [`file:${dir}`, "FileTaskStore"],
    ["postgres://u@127.0.0.1/test", "PostgresTaskStore"],
    ["nats://127.0.0.1:4222", "NatsTaskStore"],
  ]) {
    t.throws(() => resolveStore(selector, { onError: "log" as never }), new RegExp(`^${store}: opts\\.onError should be a function`), `${store} gets it too`)
  }
  const custom = { get: async () => undefined, save: async () => {} }
  t.equal(resolveStore(custom, { onError: () => {} }), custom, "a host's own store is returned as it is")
})

t.test("resolveStore gives the stores it builds options.retention, checked by each; a host's own store cannot take it", async (t) => {
  for (const [selector, store] of [
    ["memory", "InMemoryTaskStore"],
    [`file:${tmpDir(t)}`, "FileTaskStore"],
    ["postgres://u@127.0.0.1/test", "PostgresTaskStore"],
    ["nats://127.0.0.1:4222", "NatsTaskStore"],
  ]) {
    t.throws(() => resolveStore(selector, { retention: { terminalTtl: "later" } }), new RegExp(`^${store}: opts\\.retention should be`), `${store} gets it`)
    t.doesNotThrow(() => resolveStore(selector, { retention: { terminalTtl: "30d" } }))
  }
  const custom = { get: async () => undefined, save: async () => {} }
  t.throws(() => resolveStore(custom, { retention: { terminalTtl: "30d" } }), /options\.retention applies to the stores built from a selector/)
})

t.test("FileTaskStore.get reuses a file it read while the file is unchanged, and sees every change", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, { fs: recordingFs(dir, calls) })
  const reads = () => calls.filter((call) => call.startsWith("readFile")).length
  await store.save(task("cached", "working"))
  t.equal((await store.get("cached"))?.status.state, "working")
  t.equal((await store.get("cached"))?.status.state, "working")
  t.equal(reads(), 1, "the second get did not read the file again")
  const copy = await store.get("cached")
  copy!.status.state = "failed"
  t.equal((await store.get("cached"))?.status.state, "working", "each get hands out its own copy")

  await store.save(task("cached", "completed"))
  t.equal((await store.get("cached"))?.status.state, "completed", "a save through the store is seen")
  // Another process replaces the file the way a save does (new file renamed over it), same length.
  const other = new FileTaskStore(dir)
  await other.save(task("cached", "canceled"))
  t.equal((await store.get("cached"))?.status.state, "canceled", "another process's save is seen")
  // An edit in place that keeps the size: the times change. Within one tick of the file
  // system's clock they may not yet, so the edit is written until its times show it.
  const file = path.join(dir, "cached.json")
  const read = fs.statSync(file)
  const edited = fs.readFileSync(file, "utf8").replace('"canceled"', '"rejected"')
  await waitFor(() => {
    fs.writeFileSync(file, edited)
    const written = fs.statSync(file)
    return written.mtimeMs !== read.mtimeMs || written.ctimeMs !== read.ctimeMs
  }, 5000, "the edit to change the file's times")
  t.equal((await store.get("cached"))?.status.state, "rejected", "an edit in place is seen")
  fs.rmSync(file)
  t.equal(await store.get("cached"), undefined, "a removed file is missing, not served from the cache")
})
