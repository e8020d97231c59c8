import fs from "node:fs"
import fsp from "node:fs/promises"
import path from "node:path"
import t from "tap"
import { FileTaskStore, type FileSystem } from "../../../lib/stores/file/store.js"
import type { PushConfigRecord } from "../../../lib/stores/push-store.js"
import type { StoreErrorContext } from "../../../lib/stores/background-errors.js"
import { deadPid, deferred, recordingFs, sampleTask, simulated, tmpDir, waitFor } from "../../fixtures/helpers.js"

/** The file store's push part on its own: what the shared contract cannot stage. */

const config = (taskId: string, id: string): PushConfigRecord => ({ taskId, id, version: "1.0", url: "https://hooks.example.com/a", createdAt: new Date().toISOString() })

/** Task `id` saved, with config "a", then saved working: one notification enqueued; resolves with how many. */
async function pending(store: FileTaskStore, id: string): Promise<number> {
  await store.save(sampleTask(id))
  await store.push.putConfig(config(id, "a"))
  const working = sampleTask(id, "working")
  return store.push.saveWithEvent(working, { kind: "status", task: working }) as Promise<number>
}

t.test("a claim whose listing of .push began before a putConfig made its directory does not make later saves skip that Task's notifications", async (t) => {
  const dir = tmpDir(t)
  const pushRoot = path.join(dir, ".push")
  const base = recordingFs(dir, [])
  // A listing of .push read now and answered when the test says: it began before the config's directory existed.
  let held: { names: string[]; answer: ReturnType<typeof deferred<void>> } | undefined
  const fs: FileSystem = {
    ...base,
    readdir: async (file) => {
      const names = await base.readdir(file)
      if (file === pushRoot && held === undefined) {
        held = { names, answer: deferred<void>() }
        await held.answer.promise
        return held.names
      }
      return names
    },
  }
  const store = new FileTaskStore(dir, { fs })
  await store.save(sampleTask("other"))
  await store.push.putConfig(config("other", "a")) // .push exists, so a claim lists it
  await fsp.readdir(pushRoot)
  const claiming = store.push.claim("i-1", 10, 60_000, Date.now())
  await waitFor(() => held !== undefined, 5000, "the claim's listing of .push")
  await store.save(sampleTask("late"))
  await store.push.putConfig(config("late", "a"))
  held!.answer.resolve()
  await claiming
  const late = sampleTask("late", "working")
  await store.push.saveWithEvent(late, { kind: "status", task: late })
  const claims = await store.push.claim("i-1", 10, 60_000, Date.now())
  t.same(
    claims.map((c) => `${c.item.taskId}#${c.item.event.task.status.state}`),
    ["late#working"],
    "the save after the stale listing enqueued its notification",
  )
})

t.test("two processes that saved one Task at once each wrote a notification of the same seq: both are sent, in turn", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  t.equal(await pending(store, "t-1"), 1)
  // Another live process's notification of the same seq, for the same config (pid 1 is alive on every host).
  const taskDir = path.join(dir, ".push", "t-1.json")
  const mine = (await fsp.readdir(taskDir)).find((name) => name.startsWith("o-"))!
  const theirs = mine.replace(`-${process.pid}-`, "-1-")
  const canceled = sampleTask("t-1", "canceled")
  const item = JSON.parse(await fsp.readFile(path.join(taskDir, mine), "utf8"))
  await fsp.writeFile(path.join(taskDir, theirs), JSON.stringify({ ...item, key: "their-key", event: { kind: "status", task: canceled } }))

  const sent: string[] = []
  for (let round = 0; round < 2; round++) {
    const claims = await store.push.claim("i-1", 10, 60_000, Date.now())
    t.equal(claims.length, 1, "one at a time: the channel's head")
    sent.push(claims[0].item.event.task.status.state)
    await store.push.ack(claims[0])
  }
  t.same(sent.sort(), ["canceled", "working"], "each process's notification, neither dropped")
  t.same(await store.push.claim("i-1", 10, 60_000, Date.now()), [])
})

t.test("a notification whose config is gone (its delete cut short) is removed by the next claim, not looked at for ever", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  await pending(store, "t-1")
  const taskDir = path.join(dir, ".push", "t-1.json")
  // What a delete killed after removing the config leaves: its notification.
  for (const name of await fsp.readdir(taskDir)) if (name.startsWith("c-")) await fsp.rm(path.join(taskDir, name))
  t.same(await store.push.claim("i-1", 10, 60_000, Date.now()), [], "nothing to send: its config is gone")
  t.same((await fsp.readdir(taskDir)).filter((name) => name.startsWith("o-")), [], "and the notification went with it")
})

t.test("a full scan that stops at its limit leaves the directories it did not read to the next claim", async (t) => {
  const dir = tmpDir(t)
  const writer = new FileTaskStore(dir)
  for (let i = 0; i < 12; i++) await pending(writer, `t-${i}`)
  // Another store on the directory knows of none of them: its first claim reads the directories (8 side by side) and stops
  // at one; those it did not start on are the next claim's.
  const reader = new FileTaskStore(dir)
  const claimed = new Set<string>()
  for (let i = 0; i < 12; i++) {
    const claims = await reader.push.claim("i-1", 1, 60_000, Date.now())
    t.equal(claims.length, 1, `claim ${i + 1} finds one, without waiting for the next full scan`)
    for (const claim of claims) claimed.add(claim.item.taskId)
  }
  t.equal(claimed.size, 12, "each Task's notification, once")
})

t.test("a claim reads no more of the due Task directories than it has room for, and leaves the rest due for the next claims", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, { fs: recordingFs(dir, calls) })
  for (let i = 0; i < 12; i++) await pending(store, `t-${i}`)
  // The first claim is a full scan: with no room, it only leaves every directory due.
  t.same(await store.push.claim("i-1", 0, 60_000, Date.now()), [])
  const claimed = new Set<string>()
  for (let i = 0; i < 12; i++) {
    calls.length = 0
    const claims = await store.push.claim("i-1", 1, 60_000, Date.now())
    t.equal(claims.length, 1, `claim ${i + 1} finds one`)
    for (const claim of claims) claimed.add(claim.item.taskId)
    t.equal(calls.filter((call) => /^readdir \.push\/t-\d+\.json$/.test(call)).length, 1, "reading one directory")
    t.equal(calls.filter((call) => call.startsWith("rename ")).length, 1, "and renaming only the notification it holds (none taken and released)")
  }
  t.equal(claimed.size, 12, "each Task's notification, once")
})

t.test("times that are not whole milliseconds make names a claim can still read and settle", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  await store.save(sampleTask("t-1"))
  await store.push.putConfig(config("t-1", "a"))
  for (const state of ["working", "completed"] as const) {
    const task = sampleTask("t-1", state)
    await store.push.saveWithEvent(task, { kind: "status", task })
  }
  const now = Date.now() + 0.25
  const [first] = await store.push.claim("i-1", 10, 1000.5, now)
  t.same(await store.push.claim("i-1", 10, 1000.5, now), [], "held: the channel's next waits")
  await store.push.retryLater(first, now + 10.5, "HTTP 503")
  const [again] = await store.push.claim("i-1", 10, 1000.5, now + 11)
  t.equal(again?.item.key, first.item.key, "due again after its wait, in order")
  await store.push.ack(again)
  const [next] = await store.push.claim("i-1", 10, 1000.5, now + 11)
  t.equal(next?.item.event.task.status.state, "completed")
})

t.test("another process's first push config in the directory is seen at once by a store whose listing watches it", async (t) => {
  const dir = tmpDir(t)
  const running = new FileTaskStore(dir)
  await running.save(sampleTask("t-1", "working"))
  await running.list({}) // a server's start-up listing: the store now watches its directory
  t.notOk(fs.existsSync(path.join(dir, ".push")), "no push data in the directory yet")
  // Another process (here another store) takes the Task's first config, which makes .push.
  const other = new FileTaskStore(dir)
  await other.push.putConfig(config("t-1", "a"))
  // The running store claims nothing in between (no full scan): only the watch can tell it.
  await waitFor(
    async () => {
      const task = sampleTask("t-1", "working")
      return (await running.push.saveWithEvent(task, { kind: "status", task })) === 1
    },
    10_000,
    "a save of the running store to enqueue a notification for the new config",
  )
  t.pass("its saves enqueue for the new config")
})

/** The names in a Task's push directory that start with `prefix`. */
const namesIn = async (dir: string, taskFile: string, prefix: string) => (await fsp.readdir(path.join(dir, ".push", taskFile))).filter((name) => name.startsWith(prefix))

t.test("crash leftovers: a retry's older copy goes; a dead writer's notification of a save that never landed goes; an unreadable one is reported and goes", async (t) => {
  const dir = tmpDir(t)
  const seen: Array<{ err: Error; context: StoreErrorContext }> = []
  const store = new FileTaskStore(dir, { onError: (err, context) => void seen.push({ err, context }) })
  await pending(store, "t-1")
  const taskDir = path.join(dir, ".push", "t-1.json")
  const [mine] = await namesIn(dir, "t-1.json", "o-")
  const text = await fsp.readFile(path.join(taskDir, mine), "utf8")
  // The rewrite of a failed attempt, cut short after writing its new name: both names, the newer with attempts 1.
  const rewritten = mine.replace(`-${process.pid}-0-`, `-${process.pid}-1-`)
  await fsp.writeFile(path.join(taskDir, rewritten), JSON.stringify({ ...JSON.parse(text), attempts: 1 }))
  const [claim] = await store.push.claim("i-1", 10, 60_000, Date.now())
  t.equal(claim.item.attempts, 1, "the newer copy is the one claimed")
  t.notOk((await namesIn(dir, "t-1.json", "o-")).includes(mine), "the older copy is gone")
  await store.push.ack(claim)
  t.same(await namesIn(dir, "t-1.json", "o-"), [], "nothing left after the ack")

  // A save by a process that died before its Task landed: seq 2, above the stored pushSeq 1.
  const unlanded = mine.replace("o-0000000000000001-", "o-0000000000000002-").replace(`-${process.pid}-`, `-${await deadPid()}-`)
  await fsp.writeFile(path.join(taskDir, unlanded), text)
  t.same(await store.push.claim("i-1", 10, 60_000, Date.now()), [], "never sent")
  t.same(await namesIn(dir, "t-1.json", "o-"), [], "and removed")

  // A committed notification whose file a crash of the machine left unreadable: written by a store that does not send
  // (one that does keeps it in its journal).
  const waiting = sampleTask("t-1", "input-required")
  await new FileTaskStore(dir).push.saveWithEvent(waiting, { kind: "status", task: waiting })
  const [broken] = await namesIn(dir, "t-1.json", "o-")
  await fsp.writeFile(path.join(taskDir, broken), "{")
  // Read by a store that did not write it (the writer knows what it wrote), as after a restart.
  const restarted = new FileTaskStore(dir, { onError: (err, context) => void seen.push({ err, context }) })
  t.same(await restarted.push.claim("i-1", 10, 60_000, Date.now()), [], "nothing to send")
  t.same(await namesIn(dir, "t-1.json", "o-"), [], "and it does not hold its channel for ever")
  t.match(seen, [{ err: { message: /removed an unreadable push notification file/ }, context: { operation: "push" } }], "reported")
})

t.test("a notification due later whose wait was lost (a crash of the machine) waits again, then is sent", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  await pending(store, "t-1")
  const taskDir = path.join(dir, ".push", "t-1.json")
  const [name] = await namesIn(dir, "t-1.json", "o-")
  const item = JSON.parse(await fsp.readFile(path.join(taskDir, name), "utf8"))
  const now = Date.now()
  // Its retry's rewrite landed, but not the rename that held it until then.
  await fsp.writeFile(path.join(taskDir, name.replace("-0-", "-1-")), JSON.stringify({ ...item, attempts: 1, notBefore: now + 60_000 }))
  await fsp.rm(path.join(taskDir, name))
  t.same(await store.push.claim("i-1", 10, 60_000, now), [], "not due yet")
  t.match(await namesIn(dir, "t-1.json", "o-"), [/~wait$/], "held until its time again")
  const [claim] = await store.push.claim("i-1", 10, 60_000, now + 60_001)
  t.equal(claim?.item.key, item.key, "due at its time")
})

t.test("a Task whose id is too long for a file name: its push directory is named by a hash, and its notifications are sent", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  const id = "long-".repeat(100)
  t.equal(await pending(store, id), 1)
  const [dirName] = await fsp.readdir(path.join(dir, ".push"))
  t.notOk(dirName.includes("long-long"), "a hashed name")
  // Another store on the directory finds the Task in it from the files inside.
  const other = new FileTaskStore(dir)
  const [claim] = await other.push.claim("i-1", 10, 60_000, Date.now())
  t.equal(claim?.item.taskId, id)
})

t.test("file system failures: a save whose notification cannot be written fails whole; a claim that cannot read a directory reports it and looks again", async (t) => {
  const dir = tmpDir(t)
  let failOpen = false
  let failReaddir = false
  const base = recordingFs(dir, [])
  const fs: FileSystem = {
    ...base,
    open: async (file, flags) => {
      if (failOpen && path.basename(file).startsWith("o-")) throw simulated("EIO")
      return base.open(file, flags)
    },
    readdir: async (file) => {
      if (failReaddir && file.endsWith("t-1.json")) {
        failReaddir = false
        throw simulated("EIO")
      }
      return base.readdir(file)
    },
  }
  const seen: Error[] = []
  const store = new FileTaskStore(dir, { fs, onError: (err) => void seen.push(err) })
  await pending(store, "t-1")
  const claims = await store.push.claim("i-1", 10, 60_000, Date.now())
  await store.push.ack(claims[0])

  failOpen = true
  const refused = sampleTask("t-1", "input-required")
  await t.rejects(store.push.saveWithEvent(refused, { kind: "status", task: refused }), /EIO: simulated failure/)
  failOpen = false
  t.equal((await store.get("t-1"))?.status.state, "working", "the Task was not saved")
  t.same(await namesIn(dir, "t-1.json", "o-"), [], "and no notification of it is left")

  const next = sampleTask("t-1", "completed")
  await store.push.saveWithEvent(next, { kind: "status", task: next })
  failReaddir = true
  t.same(await store.push.claim("i-1", 10, 60_000, Date.now()), [], "the directory could not be read")
  t.match(seen, [{ message: /could not read .*t-1\.json: EIO/ }], "reported")
  const [claim] = await store.push.claim("i-1", 10, 60_000, Date.now())
  t.equal(claim?.item.event.task.status.state, "completed", "the next claim looks again")
})

t.test("oldestPendingAt passes over another process's notification whose save has not landed, and counts it once a save of its Task at or past its seq landed", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  await pending(store, "t-1")
  const [claim] = await store.push.claim("i-1", 10, 60_000, Date.now())
  await store.push.ack(claim)
  // Another live process (pid 1 is alive on every host) wrote seq 2, an hour ago by its record, for a save not landed: the stored pushSeq is 1.
  const hourAgo = Date.now() - 3_600_000
  const theirs = `o-${String(2).padStart(16, "0")}-1-0-a.json`
  await fsp.writeFile(path.join(dir, ".push", "t-1.json", theirs), JSON.stringify({ ...claim.item, key: "their-key", seq: 2, enqueuedAt: hourAgo, notBefore: hourAgo }))
  // A full scan (past FULL_SCAN_MS) finds it: not handed out, and its directory is due.
  t.same(await store.push.claim("i-1", 10, 60_000, Date.now() + 5000), [], "not sent before its save lands")
  t.equal(await store.push.oldestPendingAt!(), undefined, "nor pending")
  const completed = sampleTask("t-1", "completed")
  t.equal(await store.push.saveWithEvent(completed, { kind: "status", task: completed }), 1, "a later save (seq 3) landed")
  t.equal(await store.push.oldestPendingAt!(), hourAgo, "now deliverable: the oldest, by the time in its file")
})

t.test("oldestPendingAt reads at most 32 of the Task directories due, those due longest first, through the records the store wrote", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, { fs: recordingFs(dir, calls) })
  for (let i = 0; i < 40; i++) await pending(store, `t-${i}`)
  const [first] = await namesIn(dir, "t-0.json", "o-")
  const { enqueuedAt } = JSON.parse(await fsp.readFile(path.join(dir, ".push", "t-0.json", first), "utf8"))
  calls.length = 0
  t.equal(await store.push.oldestPendingAt!(), enqueuedAt, "the first Task's notification, enqueued first")
  const listed = calls.flatMap((call) => /^readdir \.push\/(t-\d+)\.json$/.exec(call)?.[1] ?? [])
  t.same(listed.sort(), Array.from({ length: 32 }, (_, i) => `t-${i}`).sort(), "the 32 directories marked due first, each listed once")
  t.same(calls.filter((call) => !call.startsWith("readdir ")), [], "and no file read: the store keeps what it wrote")
})

t.test("oldestPendingAt of a store that did not write the notifications: none known before its first claim's full scan, then the time in the oldest one's file", async (t) => {
  const dir = tmpDir(t)
  const writer = new FileTaskStore(dir)
  await pending(writer, "t-1")
  await pending(writer, "t-2")
  // The first notification's record says it was enqueued an hour ago: the answer is from the file, not from its name or mtime.
  const [name] = await namesIn(dir, "t-1.json", "o-")
  const file = path.join(dir, ".push", "t-1.json", name)
  const hourAgo = Date.now() - 3_600_000
  await fsp.writeFile(file, JSON.stringify({ ...JSON.parse(await fsp.readFile(file, "utf8")), enqueuedAt: hourAgo }))
  const restarted = new FileTaskStore(dir)
  t.equal(await restarted.push.oldestPendingAt!(), undefined, "its limit: before a full scan it knows of no directory due")
  t.same(await restarted.push.claim("i-1", 0, 60_000, Date.now()), [], "a claim with no room: its full scan leaves every directory due")
  t.equal(await restarted.push.oldestPendingAt!(), hourAgo, "then the oldest of the two, read from its file")
  const [claim] = await restarted.push.claim("i-1", 1, 60_000, Date.now())
  t.equal(claim.item.enqueuedAt, hourAgo, "held by a claim")
  t.equal(await restarted.push.oldestPendingAt!(), hourAgo, "and still pending")
})
