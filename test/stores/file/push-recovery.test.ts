import fsp from "node:fs/promises"
import path from "node:path"
import t, { type Test } from "tap"
import { FileTaskStore, type FileSystem } from "../../../lib/stores/file/store.js"
import { readJournal } from "../../../lib/stores/file/push-journal.js"
import type { PushConfigRecord } from "../../../lib/stores/push-store.js"
import type { TaskState } from "../../../lib/types.js"
import { killedJournalWriter, recordingFs, sampleTask, simulated, tmpDir, waitFor } from "../../fixtures/helpers.js"

/**
 * The file store's notifications are written unsynced, and recorded by their
 * Task's durable save: what a crash of the machine (simulated) leaves, and
 * what the record costs a Task.
 */

const config = (taskId: string, id = "a"): PushConfigRecord => ({ taskId, id, version: "1.0", url: "https://hooks.example.com/a", createdAt: new Date().toISOString() })

/** Task `id` saved in `state` with its status event. */
async function saveState(store: FileTaskStore, id: string, state: TaskState): Promise<void> {
  const task = sampleTask(id, state)
  await store.push.saveWithEvent(task, { kind: "status", task })
}

/** Task `id`'s file, parsed. */
const taskFile = async (dir: string, id: string) => JSON.parse(await fsp.readFile(path.join(dir, `${id}.json`), "utf8"))

/** What Task `id`'s file records as pending. */
const recorded = async (dir: string, id: string): Promise<Array<{ key: string; at: number; event: { task?: { status: { state: string } } } }>> =>
  (await taskFile(dir, id)).metadata?.toolnexus?.pushPending ?? []

/** The notification files of Task `id`. */
const itemFiles = async (dir: string, id: string) => (await fsp.readdir(path.join(dir, ".push", `${id}.json`))).filter((name) => name.startsWith("o-"))

const bootDir = (dir: string) => path.join(dir, ".push", ".boot")

/**
 * The machine crashed and booted again: the recorded boot is another one.
 * `keepMarks` false: as if it crashed before any store marked its
 * notifications durable.
 */
async function rebooted(dir: string, keepMarks = false): Promise<void> {
  const record = JSON.parse(await fsp.readFile(path.join(bootDir(dir), "id"), "utf8"))
  await fsp.writeFile(path.join(bootDir(dir), "id"), JSON.stringify({ ...record, boot: "id a-boot-before" }))
  if (!keepMarks) for (const name of await fsp.readdir(bootDir(dir))) if (name.startsWith("w-")) await fsp.rm(path.join(bootDir(dir), name))
}

/** Claims and acks until nothing is due: what was sent, as "task#state key", in order. */
async function drain(store: FileTaskStore): Promise<string[]> {
  const sent: string[] = []
  for (;;) {
    const claims = await store.push.claim("i-1", 100, 60_000, Date.now())
    if (claims.length === 0) return sent
    for (const claim of claims) {
      sent.push(`${claim.item.taskId}#${claim.item.event.task.status.state} ${claim.item.key}`)
      await store.push.ack(claim)
    }
  }
}

/** A file system layer that creates unsynced, recording what it does. */
function unsyncedFs(dir: string, calls: string[], hook?: (op: string, file: string) => void): FileSystem {
  const base = recordingFs(dir, calls, hook)
  return {
    ...base,
    createUnsynced: async (file, data, encoding) => {
      calls.push(`create ${path.relative(dir, file)}`)
      hook?.("create", file)
      await fsp.writeFile(file, data, { encoding, flag: "wx" })
    },
  }
}

/** A store on a new directory whose file-system calls are recorded in `calls`, and Task t-1 saved with config "a". */
async function storeWithConfig(t: Test): Promise<{ dir: string; calls: string[]; store: FileTaskStore }> {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, { fs: unsyncedFs(dir, calls) })
  await store.save(sampleTask("t-1"))
  await store.push.putConfig(config("t-1"))
  return { dir, calls, store }
}

/** The keys of a Task's notifications in the outbox now, by the state they report: in files of their own and in journals. */
async function keysOf(dir: string, id: string): Promise<Map<string, string>> {
  const keys = new Map<string, string>()
  const taskDir = path.join(dir, ".push", `${id}.json`)
  for (const name of await itemFiles(dir, id)) {
    const item = JSON.parse(await fsp.readFile(path.join(taskDir, name), "utf8"))
    keys.set(item.event.task.status.state, item.key)
  }
  for (const name of (await fsp.readdir(taskDir)).filter((name) => name.startsWith("j-"))) {
    for (const { item } of readJournal(await fsp.readFile(path.join(taskDir, name), "utf8")).open.values()) keys.set(item.event.task.status.state, item.key)
  }
  return keys
}

t.test("after a reboot, the notifications a Task records as pending whose files were lost or torn are sent, each once, under their keys; acked ones are not", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  await store.save(sampleTask("t-1"))
  await store.push.putConfig(config("t-1"))
  await saveState(store, "t-1", "working")
  await saveState(store, "t-1", "input-required")
  const [first] = await store.push.claim("i-1", 10, 60_000, Date.now())
  t.equal(first.item.event.task.status.state, "working")
  await store.push.ack(first)
  await saveState(store, "t-1", "completed")
  const keys = await keysOf(dir, "t-1")
  t.same([...keys.keys()].sort(), ["completed", "input-required"])

  const pending = await recorded(dir, "t-1")
  t.same(
    pending.map((record) => record.key),
    [keys.get("input-required"), keys.get("completed")],
    "the save records the earlier notification still pending and its own; not the one acked",
  )
  t.equal(pending[0].event.task?.status.state, "input-required", "an earlier one keeps the Task it reports")
  t.equal(pending[1].event.task, undefined, "the save's own does not repeat the Task saved")

  await store.close()
  await rebooted(dir)
  const taskDir = path.join(dir, ".push", "t-1.json")
  const files = await itemFiles(dir, "t-1")
  // One file lost, the other left empty (its data never reached the disk).
  await fsp.rm(path.join(taskDir, files[0]))
  await fsp.writeFile(path.join(taskDir, files[1]), "")

  const restarted = new FileTaskStore(dir)
  t.teardown(() => restarted.close())
  t.same(await drain(restarted), [`t-1#input-required ${keys.get("input-required")}`, `t-1#completed ${keys.get("completed")}`], "in order, under their keys")
  t.not(JSON.parse(await fsp.readFile(path.join(bootDir(dir), "id"), "utf8")).boot, "id a-boot-before", "this boot is recorded")

  // Without a reboot, a store's opening writes nothing again (a killed process loses nothing: the page cache keeps the files).
  const again = new FileTaskStore(dir)
  t.teardown(() => again.close())
  t.same(await drain(again), [], "the next opening sends nothing again")
})

t.test("after a reboot, the notifications a killed writer's journal lost are made again from its Task's record, under their keys", async (t) => {
  const dir = tmpDir(t)
  const setup = new FileTaskStore(dir)
  await setup.save(sampleTask("t-1"))
  await setup.push.putConfig(config("t-1"))
  await setup.close()
  await killedJournalWriter(t, dir, "t-1", ["working", "input-required"])
  const keys = (await recorded(dir, "t-1")).map((record) => record.key)
  t.equal(keys.length, 2, "the last save records both as pending: the earlier one is not durable yet")
  await rebooted(dir)
  // The machine's crash lost the journal's unsynced lines.
  const taskDir = path.join(dir, ".push", "t-1.json")
  for (const name of (await fsp.readdir(taskDir)).filter((name) => name.startsWith("j-"))) await fsp.writeFile(path.join(taskDir, name), "")
  const restarted = new FileTaskStore(dir)
  t.teardown(() => restarted.close())
  t.same(await drain(restarted), [`t-1#working ${keys[0]}`, `t-1#input-required ${keys[1]}`], "both sent, in order, under their keys")
  t.same((await fsp.readdir(taskDir)).filter((name) => name.startsWith("j-") || name.startsWith("o-")), [], "the dead writer's emptied journal is removed")
})

t.test("a notification made again after a reboot keeps the trace context its save gave it", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  await store.save(sampleTask("t-1"))
  await store.push.putConfig(config("t-1"))
  const traces = {
    working: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
    completed: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate: "vendor=opaque" },
  }
  for (const state of ["working", "completed"] as const) {
    const task = sampleTask("t-1", state)
    await store.push.saveWithEvent(task, { kind: "status", task, traceContext: traces[state] })
  }
  const pending = await recorded(dir, "t-1")
  t.same(
    pending.map((record) => record.event.task?.status.state ?? "the Task saved"),
    ["working", "the Task saved"],
    "the last save records an earlier notification with its Task, and its own without",
  )
  await store.close()
  await rebooted(dir)
  const taskDir = path.join(dir, ".push", "t-1.json")
  for (const name of await itemFiles(dir, "t-1")) await fsp.rm(path.join(taskDir, name))

  const restarted = new FileTaskStore(dir)
  t.teardown(() => restarted.close())
  const sent: Array<[string, unknown]> = []
  for (let claims; (claims = await restarted.push.claim("i-1", 10, 60_000, Date.now())).length > 0; ) {
    for (const claim of claims) {
      sent.push([claim.item.event.task.status.state, claim.item.traceContext])
      await restarted.push.ack(claim)
    }
  }
  t.same(sent, [["working", traces.working], ["completed", traces.completed]], "each made again with its save's trace context")
})

t.test("a store's mark: a notification sent after it was made durable is not sent again after a reboot, though its Task still records it", async (t) => {
  for (const keepMarks of [true, false]) {
    const dir = tmpDir(t)
    const store = new FileTaskStore(dir)
    await store.save(sampleTask("t-1"))
    await store.push.putConfig(config("t-1"))
    await saveState(store, "t-1", "completed")
    const [key] = (await recorded(dir, "t-1")).map((record) => record.key)
    await store.close() // makes the file durable, and marks it
    t.ok((await fsp.readdir(bootDir(dir))).some((name) => name.startsWith("w-")), "the store's mark")
    t.same((await drain(store)).length, 1, "sent")
    t.same((await recorded(dir, "t-1")).length, 1, "the final Task is not saved again: it still records it")
    await rebooted(dir, keepMarks)
    const restarted = new FileTaskStore(dir)
    t.teardown(() => restarted.close())
    if (keepMarks) t.same(await drain(restarted), [], "with the mark: not sent again")
    else t.same(await drain(restarted), [`t-1#completed ${key}`], "without it (a crash before the mark): sent again, under its key")
  }
})

t.test("a recovery leaves out a notification written anew after a failed attempt, one given up on, and one whose config was deleted; a corrupt Task is reported", async (t) => {
  const dir = tmpDir(t)
  const seen: Error[] = []
  const store = new FileTaskStore(dir)
  for (const id of ["retried", "dead", "unconfigured", "corrupt"]) {
    await store.save(sampleTask(id))
    await store.push.putConfig(config(id))
    await saveState(store, id, "working")
  }
  const claims = await store.push.claim("i-1", 10, 60_000, Date.now())
  for (const claim of claims) {
    if (claim.item.taskId === "retried") await store.push.retryLater(claim, Date.now(), "HTTP 503")
    else if (claim.item.taskId === "dead") await store.push.deadLetter(claim, "HTTP 410")
    else await store.push.retryLater(claim, Date.now() + 60_000, "HTTP 503")
  }
  await store.push.deleteConfig("unconfigured", "a")
  await store.close()
  await rebooted(dir)
  await fsp.writeFile(path.join(dir, "corrupt.json"), "{")

  const restarted = new FileTaskStore(dir, { onError: (err) => void seen.push(err) })
  t.teardown(() => restarted.close())
  const again = await restarted.push.claim("i-1", 10, 60_000, Date.now())
  t.same(
    again.map((claim) => `${claim.item.taskId} ${claim.item.attempts}`),
    ["retried 1"],
    "the retried one once, as rewritten; nothing of the dead letter or the deleted config",
  )
  t.same((await itemFiles(dir, "dead")).length, 0)
  t.same((await itemFiles(dir, "unconfigured")).length, 0)
  t.ok(seen.some((err) => /corrupt task file/.test(err.message)), "the corrupt Task is reported")
  t.not(JSON.parse(await fsp.readFile(path.join(bootDir(dir), "id"), "utf8")).boot, "id a-boot-before", "and does not hold the recovery back")
})

t.test("a recovery that fails is reported, and the next opening tries again", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  await store.save(sampleTask("t-1"))
  await store.push.putConfig(config("t-1"))
  await saveState(store, "t-1", "working")
  const [key] = (await recorded(dir, "t-1")).map((record) => record.key)
  await store.close()
  await rebooted(dir)
  for (const name of await itemFiles(dir, "t-1")) await fsp.rm(path.join(dir, ".push", "t-1.json", name))

  // The Task cannot be read; then its notification cannot be written; then the boot cannot be recorded.
  const failures: Array<(op: string, file: string) => boolean> = [
    (op, file) => op === "readFile" && file === path.join(dir, "t-1.json"),
    (op, file) => op === "open" && file.includes(`${path.sep}t-1.json${path.sep}o-`),
    (op, file) => op === "open" && file.startsWith(bootDir(dir)),
  ]
  for (const failing of failures) {
    const seen: Error[] = []
    const broken = new FileTaskStore(dir, {
      fs: recordingFs(dir, [], (op, file) => {
        if (failing(op, file)) throw simulated("EIO")
      }),
      onError: (err) => void seen.push(err),
    })
    await broken.open()
    t.match(seen, [{ message: /EIO/ }], "reported")
    await broken.close()
  }
  t.same((await itemFiles(dir, "t-1")).length, 1, "the third wrote the notification again before it failed")

  const restarted = new FileTaskStore(dir)
  t.teardown(() => restarted.close())
  t.same(await drain(restarted), [`t-1#working ${key}`], "the next opening sends it, once")
})

t.test("a recovery where no boot was recorded (a .push an older version made): whole files are kept, a hashed directory is read, a config without a Task is passed over", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  const long = "long-".repeat(100)
  for (const id of [long, "t-2"]) {
    await store.save(sampleTask(id))
    await store.push.putConfig(config(id))
    await saveState(store, id, "working")
  }
  await store.push.putConfig(config("never-saved")) // an inline config whose Task's first save failed
  await store.close()
  const [longDir] = (await fsp.readdir(path.join(dir, ".push"))).filter((name) => name.startsWith("~~"))
  const [kept] = (await fsp.readdir(path.join(dir, ".push", longDir))).filter((name) => name.startsWith("o-"))
  const before = await fsp.stat(path.join(dir, ".push", longDir, kept))
  for (const name of await itemFiles(dir, "t-2")) await fsp.rm(path.join(dir, ".push", "t-2.json", name))
  await fsp.rm(bootDir(dir), { recursive: true })

  const restarted = new FileTaskStore(dir)
  t.teardown(() => restarted.close())
  await restarted.open()
  t.equal((await fsp.stat(path.join(dir, ".push", longDir, kept))).ino, before.ino, "a whole file is left as it is")
  t.same((await drain(restarted)).map((sent) => sent.split(" ")[0]).sort(), [`${long}#working`, "t-2#working"])
  t.ok(JSON.parse(await fsp.readFile(path.join(bootDir(dir), "id"), "utf8")).boot, "this boot is recorded")
})

t.test("a notification another store holds is found under its held name and made durable", async (t) => {
  const { dir, calls, store } = await storeWithConfig(t)
  await saveState(store, "t-1", "working")
  const other = new FileTaskStore(dir)
  t.teardown(() => other.close())
  t.equal((await other.push.claim("i-2", 10, 60_000, Date.now())).length, 1, "held by the other store")
  calls.length = 0
  await store.close()
  t.ok(calls.some((call) => /^sync \.push\/t-1\.json\/o-[^~]+~\d+~/.test(call)), "synced under its held name")
  t.ok(calls.includes("sync .push/t-1.json"), "and its directory")
})

t.test("a save writes its notifications unsynced, and syncs neither them nor their directory; close makes those still there durable", async (t) => {
  const { calls, store } = await storeWithConfig(t)
  calls.length = 0
  await saveState(store, "t-1", "working")
  const push = calls.filter((call) => call.includes(".push"))
  t.match(push, [/^readdir \.push\/t-1\.json$/, /^create \.push\/t-1\.json\/o-0000000000000001-\d+-0-a\.json$/], "one listing, one unsynced create")
  t.notOk(
    calls.some((call) => call.startsWith("sync .push")),
    "no fsync of the notification or of its directory",
  )
  calls.length = 0
  await store.close()
  t.ok(calls.some((call) => /^sync \.push\/t-1\.json\/o-/.test(call)), "close syncs the notification still there")
  t.ok(calls.includes("sync .push/t-1.json"), "and its directory")
  t.ok(calls.some((call) => /^rename \.push\/\.boot\/.*\.tmp \.push\/\.boot\/w-/.test(call)), "then marks it")

  calls.length = 0
  t.equal((await drain(store)).length, 1)
  await store.close()
  t.same(calls.filter((call) => call.startsWith("sync")), [], "a close with nothing written since syncs nothing")
})

t.test("a save carries at most 16 earlier notifications in its record: past that, their files are synced instead", async (t) => {
  const { dir, calls, store } = await storeWithConfig(t)
  t.teardown(() => store.close())
  const sizes: number[] = []
  for (let i = 0; i < 20; i++) {
    await saveState(store, "t-1", i % 2 === 0 ? "working" : "input-required")
    sizes.push((await recorded(dir, "t-1")).length)
  }
  t.same(sizes, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 1, 2, 3], "the 18th save synced the 17 before it")
  t.equal(calls.filter((call) => /^sync \.push\/t-1\.json\/o-/.test(call)).length, 17)
  t.equal((await drain(store)).length, 20, "every notification is sent")
})

t.test("a Task whose file is past 64 KiB carries no earlier notification", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  t.teardown(() => store.close())
  const big = { metadata: { note: "x".repeat(30_000) } }
  await store.save(sampleTask("t-1", "submitted", big))
  await store.push.putConfig(config("t-1"))
  const sizes: number[] = []
  for (const state of ["working", "input-required", "working", "input-required"] as const) {
    const task = sampleTask("t-1", state, big)
    await store.push.saveWithEvent(task, { kind: "status", task })
    sizes.push((await recorded(dir, "t-1")).length)
  }
  t.same(sizes, [1, 2, 3, 1], "a Task of 30 KB with two snapshots is past it: the next save syncs them")
})

t.test("the record costs a Task without push nothing, and is never nested", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  t.teardown(() => store.close())
  const plain = sampleTask("plain", "working")
  await store.push.saveWithEvent(plain, { kind: "status", task: plain })
  t.equal(await fsp.readFile(path.join(dir, "plain.json"), "utf8"), JSON.stringify(plain), "a Task without push configs is saved as given")

  await store.save(sampleTask("t-1"))
  await store.push.putConfig(config("t-1"))
  await saveState(store, "t-1", "working")
  t.equal((await drain(store)).length, 1)
  // The Task as read back carries its record; saved again (a runner's next change), with an event of another copy of it.
  const read = (await store.get("t-1"))!
  t.equal(read.metadata?.toolnexus && (read.metadata.toolnexus as { pushPending?: unknown[] }).pushPending?.length, 1)
  const next = { ...read, status: { state: "completed" as const, timestamp: new Date().toISOString() } }
  await store.push.saveWithEvent(next, { kind: "status", task: structuredClone(next) })
  const pending = await recorded(dir, "t-1")
  t.equal(pending.length, 1, "the acked one is gone from the record; the new one is in it")
  t.equal(pending[0].event.task?.status.state, "completed", "an event of another Task object keeps its Task")
  t.notOk(JSON.stringify(pending[0].event.task).includes("pushPending"), "without the record it was read with")
  t.equal((await drain(store)).length, 1)
  await store.save((await store.get("t-1"))!)
  t.same((await taskFile(dir, "t-1")).metadata.toolnexus, { pushSeq: 2 }, "nothing pending: only the push sequence")
})

t.test("a failure to make the notifications durable is reported, and tried again by the next settle", async (t) => {
  const dir = tmpDir(t)
  let fail = true
  const seen: Error[] = []
  const store = new FileTaskStore(dir, {
    fs: unsyncedFs(dir, [], (op, file) => {
      if (fail && op === "sync" && path.basename(file).startsWith("o-")) throw simulated("EIO")
    }),
    onError: (err) => void seen.push(err),
  })
  await store.save(sampleTask("t-1"))
  await store.push.putConfig(config("t-1"))
  await saveState(store, "t-1", "working")
  await store.close()
  t.match(seen, [{ message: /EIO/ }], "reported")
  t.notOk((await fsp.readdir(bootDir(dir))).some((name) => name.startsWith("w-")), "and nothing marked")
  fail = false
  await store.close()
  t.ok((await fsp.readdir(bootDir(dir))).some((name) => name.startsWith("w-")), "the next one marks it")
})

t.test("a store never closed marks what it sent within seconds: a reboot then sends none of it again, and a notification sent in time cost no fsync", async (t) => {
  const { dir, calls, store } = await storeWithConfig(t)
  calls.length = 0
  await saveState(store, "t-1", "working")
  const [record] = await recorded(dir, "t-1")
  t.equal((await drain(store)).length, 1)
  const mark = async () => {
    const name = (await fsp.readdir(bootDir(dir))).find((file) => file.startsWith("w-") && !file.endsWith(".tmp"))
    return name === undefined ? 0 : Number(await fsp.readFile(path.join(bootDir(dir), name), "utf8"))
  }
  await waitFor(async () => (await mark()) > record.at, 15_000, "the store's mark to pass the notification")
  t.notOk(calls.some((call) => /^sync \.push\/t-1\.json/.test(call)), "sent before the pass: neither it nor its directory was synced")
  await rebooted(dir, true)
  const restarted = new FileTaskStore(dir)
  t.teardown(() => restarted.close())
  t.same(await drain(restarted), [], "not sent again")
})
