import { spawn } from "node:child_process"
import { once } from "node:events"
import fs from "node:fs"
import fsp from "node:fs/promises"
import path from "node:path"
import readline from "node:readline"
import t, { type Test } from "tap"
import { FileTaskStore } from "../../../lib/stores/file/store.js"
import { pidFromTmpFileName, taskFileName, tmpFileName } from "../../../lib/stores/file/names.js"
import type { A2ATask } from "../../../lib/types.js"
import { deadPid, recordingFs, ROOT, sampleTask, simulated, tmpDir } from "../../fixtures/helpers.js"

/** A working Task carrying `metadata`, so a test can tell saves of one id apart. */
const task = (id: string, metadata: Record<string, unknown> = {}): A2ATask => sampleTask(id, "working", { metadata })

// Power loss cannot be simulated in a test. What makes an acknowledged save
// survive one is this order of operations: the data is on disk (fsync) before
// the rename publishes it, and the rename is on disk (directory fsync) before
// the save resolves. This test stands for the power-loss case.
t.test("a save fsyncs the tmp file before the rename and the directory after it", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, { fs: recordingFs(dir, calls) })
  await store.close() // opening's tmp cleanup has run
  calls.length = 0

  await store.save(task("seq-1"))
  const tmp = calls[0]?.split(" ")[1] ?? ""
  t.match(tmp, new RegExp(`^seq-1\\.json\\.${process.pid}\\.\\d+\\.tmp$`), "the tmp file is <taskfile>.<pid>.<counter>.tmp")
  t.same(calls, [
    `open ${tmp} wx`,
    `write ${tmp}`,
    `sync ${tmp}`,
    `close ${tmp}`,
    `rename ${tmp} seq-1.json`,
    "open . r",
    "sync .",
    "close .",
  ])
  t.same(fs.readdirSync(dir), ["seq-1.json"])

  calls.length = 0
  await store.save(task("seq-1"))
  t.not(calls[0]?.split(" ")[1], tmp, "every save gets its own tmp name")
})

t.test("a save whose rename fails removes its tmp file and rejects", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  let fail = true
  const store = new FileTaskStore(dir, {
    fs: recordingFs(dir, calls, (op) => {
      if (fail && op === "rename") throw simulated("EXDEV")
    }),
  })
  await store.close()
  calls.length = 0

  await t.rejects(store.save(task("r-1")), { code: "EXDEV" })
  const tmp = calls[0]?.split(" ")[1] ?? ""
  t.same(calls.slice(-2), [`rename ${tmp} r-1.json`, `rm ${tmp}`], "the tmp file is removed after the failed rename")
  t.notOk(calls.includes("sync ."), "no directory fsync for a save that did not land")
  t.same(fs.readdirSync(dir), [], "nothing is left on disk")

  fail = false
  await store.save(task("r-1", { after: true }))
  t.same((await store.get("r-1"))?.metadata, { after: true }, "a failed save does not block the next save of the id")
})

t.test("a save whose fsync fails removes its tmp file and rejects", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, {
    fs: recordingFs(dir, calls, (op, file) => {
      if (op === "sync" && file.endsWith(".tmp")) throw simulated("EIO")
    }),
  })
  await t.rejects(store.save(task("s-1")), { code: "EIO" })
  t.notOk(calls.some((call) => call.startsWith("rename")), "an unsynced file is never renamed into place")
  t.same(fs.readdirSync(dir), [], "the tmp file is removed")
})

t.test("a save whose directory fsync fails rejects: it was not made durable", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir, {
    fs: recordingFs(dir, [], (op, file) => {
      if (op === "sync" && file === dir) throw simulated("EIO")
    }),
  })
  await t.rejects(store.save(task("d-1")), { code: "EIO" })
  t.same(fs.readdirSync(dir), ["d-1.json"], "no tmp file is left")
})

t.test("tmp names of the longest task file names stay within 255 bytes", async (t) => {
  const id = "A".repeat(150) // base32 of 150 bytes is 240 characters: the longest name before hashing
  t.equal(Buffer.byteLength(taskFileName(id)), 246, "the test uses the longest task file name")
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, { fs: recordingFs(dir, calls) })
  await store.save(task(id))
  const tmp = calls.find((call) => call.startsWith("open") && call.endsWith(" wx"))?.split(" ")[1] ?? ""
  t.ok(Buffer.byteLength(tmp) <= 255, `${Buffer.byteLength(tmp)} bytes`)
  t.equal(pidFromTmpFileName(tmp), process.pid)
  t.equal((await store.get(id))?.id, id)

  const longest = tmpFileName(taskFileName(id), 4_194_304, Number.MAX_SAFE_INTEGER)
  t.ok(Buffer.byteLength(longest) <= 255, "even with the largest pid and counter")
  t.equal(pidFromTmpFileName(longest), 4_194_304)
  t.notOk(longest.endsWith(".json"), "a tmp name never looks like a Task file")
})

t.test("a save takes a fresh tmp name when one is taken", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = new FileTaskStore(dir, { fs: recordingFs(dir, calls) })
  await store.save(task("taken"))
  const used = Number(/\.(\d+)\.tmp$/.exec(calls.find((call) => call.startsWith("open"))!.split(" ")[1])![1])
  // The next names this process will try, as if another process with our pid (another container) held them.
  for (let n = used + 1; n <= used + 3; n++) fs.writeFileSync(path.join(dir, tmpFileName("taken.json", process.pid, n)), "not mine")
  await store.save(task("taken", { n: 2 }))
  t.same((await store.get("taken"))?.metadata, { n: 2 })
  t.equal(fs.readdirSync(dir).filter((name) => name.endsWith(".tmp")).length, 3, "the other writer's files are untouched")
})

t.test("opening a directory removes abandoned tmp files and keeps those of live saves", async (t) => {
  const dir = tmpDir(t)
  const dead = await deadPid()
  t.throws(() => process.kill(dead, 0), { code: "ESRCH" }, `pid ${dead} is dead`)
  const put = (name: string, content = JSON.stringify(task("ghost"))) => fs.writeFileSync(path.join(dir, name), content)
  put("kept.json", JSON.stringify(task("kept")))
  put(`crashed.json.${dead}.1.tmp`, '{"id":"crash') // torn, from a writer killed mid-save
  put(`mine.json.${process.pid}.1.tmp`) // this process, fresh: may be another store's save in flight
  put(`other.json.${process.ppid}.7.tmp`) // another live process (the test runner), fresh
  put(`stale.json.${process.pid}.2.tmp`)
  const twentyMinutesAgo = new Date(Date.now() - 20 * 60_000)
  fs.utimesSync(path.join(dir, `stale.json.${process.pid}.2.tmp`), twentyMinutesAgo, twentyMinutesAgo)
  put("notes.txt", "not a task")
  put("x.json.tmp", "not ours: no pid")

  const store = new FileTaskStore(dir)
  const page = await store.list({})
  t.same(
    fs.readdirSync(dir).sort(),
    ["kept.json", `mine.json.${process.pid}.1.tmp`, "notes.txt", `other.json.${process.ppid}.7.tmp`, "x.json.tmp"].sort(),
    "the dead pid's and the 20-minute-old tmp files are gone; live ones and foreign files stay",
  )
  t.same(page.tasks.map((task) => task.id), ["kept"], "a tmp file is never read as a Task, even when it holds one")
})

t.test("a store opening the directory never removes the tmp file of a save in flight", async (t) => {
  const dir = tmpDir(t)
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let reachedSync!: () => void
  const atSync = new Promise<void>((resolve) => (reachedSync = resolve))
  const writer = new FileTaskStore(dir, {
    fs: recordingFs(dir, [], async (op, file) => {
      if (op === "sync" && file.endsWith(".tmp")) {
        reachedSync()
        await released
      }
    }),
  })
  const saving = writer.save(task("slow"))
  await atSync
  const [tmp] = fs.readdirSync(dir)
  t.match(tmp, /\.tmp$/, "the save is mid-way, its tmp file written")

  const other = new FileTaskStore(dir)
  await other.close()
  t.ok(fs.existsSync(path.join(dir, tmp)), "the second store left it alone")

  release()
  await saving
  t.same(fs.readdirSync(dir), ["slow.json"])
  t.equal((await other.get("slow"))?.id, "slow")
})

t.test("many concurrent saves of one id: the last call wins", async (t) => {
  const dir = tmpDir(t)
  const store = new FileTaskStore(dir)
  const count = 200
  await Promise.all(Array.from({ length: count }, (_, i) => store.save(task("one", { i }))))
  t.same((await store.get("one"))?.metadata, { i: count - 1 })
  t.same(fs.readdirSync(dir), ["one.json"], "no tmp file left behind")
})

t.test("saves and deletes of one id take effect in call order", async (t) => {
  const store = new FileTaskStore(tmpDir(t))
  await Promise.all([store.save(task("sd")), store.delete("sd")])
  t.equal(await store.get("sd"), undefined, "a delete called after a save removes what it saved")
  await Promise.all([store.delete("sd"), store.save(task("sd", { back: true }))])
  t.same((await store.get("sd"))?.metadata, { back: true }, "a save called after a delete stays")
  await t.rejects(store.delete(""), /non-empty string/)
})

t.test("options.fs must be a FileSystem", async (t) => {
  const dir = tmpDir(t)
  t.throws(() => new FileTaskStore(dir, { fs: { open: async () => ({}) } as never }), /options\.fs should be an object with mkdir, open, rename, rm, readFile, readdir, stat methods/)
  t.type(new FileTaskStore(dir, {}), FileTaskStore, "an empty options object is fine")
  t.type(new FileTaskStore(dir, { fs: fsp }), FileTaskStore, "node:fs/promises is a FileSystem")
})

t.test("the directory is created through the injected fs layer, and a failed attempt is tried again by the next call", async (t) => {
  const root = tmpDir(t)
  const dir = path.join(root, "nested", "tasks")
  const calls: string[] = []
  let refuse = true
  const store = new FileTaskStore(dir, {
    fs: recordingFs(dir, calls, (op) => {
      if (op === "mkdir" && refuse) throw simulated("EACCES")
    }),
  })
  await t.rejects(store.open(), /FileTaskStore could not create its directory .*nested\/tasks: EACCES: simulated failure/)
  await t.rejects(store.save(task("m-1")), /could not create its directory/, "a save waits for the directory and reports why it cannot be used")
  t.notOk(fs.existsSync(dir), "nothing created around the layer")
  t.same([...new Set(calls)], ["mkdir ."], "only mkdir was tried: nothing is written before the directory exists")

  refuse = false
  calls.length = 0
  await store.save(task("m-1"))
  t.same(calls.slice(0, 2), ["mkdir .", "readdir ."], "the next call creates the directory, then sweeps it")
  t.ok(fs.statSync(dir).isDirectory())
  t.equal((await store.get("m-1"))?.id, "m-1")
  calls.length = 0
  await store.save(task("m-2"))
  t.notOk(calls.includes("mkdir ."), "once open, the directory is not created again")
})

t.test("kill -9 during concurrent saves loses no acknowledged save and leaves no torn file", async (t) => {
  if (!compiledStoreIsFresh(t)) return
  const dir = tmpDir(t)
  const { acks, acked, pid: writerPid } = await killedWriter(t, "crash-writer.mjs", [dir, "50", "3"], 400)

  const leftovers = fs.readdirSync(dir).filter((name) => !name.endsWith(".json"))
  t.comment(`${acks} acks over ${acked.size} ids; the kill left ${leftovers.length} tmp files`)
  t.same(leftovers.filter((name) => pidFromTmpFileName(name) !== writerPid), [], "every other file is a tmp file of the writer")

  const store = new FileTaskStore(dir)
  const page = await store.list({ pageSize: 100 })
  const names = fs.readdirSync(dir)
  t.same(names.filter((name) => !name.endsWith(".json")), [], "opening the directory removed the dead writer's tmp files")

  const torn: string[] = []
  for (const name of names) {
    try {
      const stored = JSON.parse(fs.readFileSync(path.join(dir, name), "utf8")) as A2ATask
      if (typeof stored.id !== "string" || typeof stored.status?.state !== "string" || taskFileName(stored.id) !== name) torn.push(name)
    } catch {
      torn.push(name)
    }
  }
  t.same(torn, [], "every file holds a whole Task under its own name")

  const lost: string[] = []
  for (const [id, seq] of acked) {
    const stored = (await store.get(id))?.metadata?.seq
    if (typeof stored !== "number" || stored < seq) lost.push(`${id}: acked ${seq}, stored ${String(stored)}`)
  }
  t.same(lost, [], "every acknowledged save is on disk, none rolled back")
  t.equal(page.totalSize, names.length, "list() reads every Task file")
})

t.test("kill -9 during saves with push events loses no acknowledged notification and sends none for a save that did not land", async (t) => {
  if (!compiledStoreIsFresh(t)) return
  const dir = tmpDir(t)
  const { acks, acked } = await killedWriter(t, "crash-writer.mjs", [dir, "20", "2", "20000", "push"], 300)

  // A restarted store drains the outbox, as the sender would: claim, ack, again.
  const store = new FileTaskStore(dir)
  const sent = new Map<string, number[]>()
  for (;;) {
    const claims = await store.push.claim("restarted", 1000, 60_000, Date.now())
    if (claims.length === 0) break
    for (const claim of claims) {
      const channel = `${claim.item.taskId}/${claim.item.configId}`
      sent.set(channel, [...(sent.get(channel) ?? []), claim.item.event.task.metadata!.seq as number])
      await store.push.ack(claim)
    }
  }
  const problems: string[] = []
  for (const [id, last] of acked) {
    const stored = (await store.get(id))?.metadata?.seq as number
    for (const config of ["a", "b"]) {
      const seqs = sent.get(`${id}/${config}`) ?? []
      if (seqs.some((seq, i) => i > 0 && seq <= seqs[i - 1])) problems.push(`${id}/${config}: out of order ${seqs.join(",")}`)
      for (let seq = 1; seq <= last; seq++) if (!seqs.includes(seq)) problems.push(`${id}/${config}: acknowledged save ${seq} was not notified`)
      if (seqs.some((seq) => seq > stored)) problems.push(`${id}/${config}: notified ${Math.max(...seqs)} but the stored Task is at ${stored}`)
    }
  }
  t.comment(`${acks} acks over ${acked.size} ids; ${[...sent.values()].reduce((n, seqs) => n + seqs.length, 0)} notifications drained`)
  t.same(problems, [], "every acknowledged save's notification is there, in order, and none for a save that did not land")
})

t.test("concurrent saves share directory fsyncs, each one begun after the save's rename", async (t) => {
  const dir = tmpDir(t)
  const log: string[] = []
  const recording = {
    ...fs.promises,
    open: async (file: string, flags: "wx" | "r") => {
      const handle = await fs.promises.open(file, flags)
      const isDir = file === dir
      return {
        writeFile: (data: string, encoding: "utf8") => handle.writeFile(data, encoding),
        sync: async () => {
          if (isDir) log.push("dirsync-start")
          await handle.sync()
          if (isDir) log.push("dirsync-end")
        },
        close: () => handle.close(),
      }
    },
    rename: async (from: string, to: string) => {
      await fs.promises.rename(from, to)
      log.push(`rename ${path.basename(to)}`)
    },
  }
  const store = new FileTaskStore(dir, { fs: recording })
  const ids = Array.from({ length: 20 }, (_, i) => `g-${i}`)
  await Promise.all(
    ids.map((id) =>
      store.save({ id, status: { state: "working" } }).then(() => log.push(`acked ${id}.json`)),
    ),
  )
  const syncs = log.filter((entry) => entry === "dirsync-start").length
  t.ok(syncs >= 1 && syncs < ids.length, `${syncs} directory fsyncs served ${ids.length} saves`)
  for (const id of ids) {
    const renamed = log.indexOf(`rename ${id}.json`)
    const acked = log.indexOf(`acked ${id}.json`)
    const covering = log.findIndex((entry, i) => {
      const ended = log.indexOf("dirsync-end", i)
      return entry === "dirsync-start" && i > renamed && ended > i && ended < acked
    })
    t.ok(covering > renamed, `${id}: acknowledged only after a directory fsync that began after its rename`)
  }
})

/** The crash writers run compiled, as a user runs the store (npm test builds first): fails the test when dist/ is stale. */
function compiledStoreIsFresh(t: Test): boolean {
  const compiled = path.join(ROOT, "dist", "lib", "stores", "file", "store.js")
  const storeSources = path.join(ROOT, "lib", "stores")
  const sources = fs.readdirSync(storeSources, { recursive: true, encoding: "utf8" }).filter((name) => name.endsWith(".ts")).map((name) => path.join(storeSources, name))
  if (!fs.existsSync(compiled) || sources.some((source) => fs.statSync(source).mtimeMs > fs.statSync(compiled).mtimeMs)) {
    t.fail(`${compiled} is missing or older than lib/stores: run npm run build first`)
    return false
  }
  return true
}

/**
 * Runs a crash writer fixture and kills it with SIGKILL after `killAt` acks
 * (or 3 s after the first on a slow machine). Resolves with what it
 * acknowledged ("ack <id> <seq>" lines): the highest seq per id.
 */
async function killedWriter(t: Test, fixture: string, args: string[], killAt: number): Promise<{ acks: number; acked: Map<string, number>; pid: number | undefined }> {
  const writer = spawn(process.execPath, [path.join(ROOT, "test", "fixtures", fixture), ...args], { stdio: ["ignore", "pipe", "pipe"] })
  t.teardown(() => writer.kill("SIGKILL"))
  let stderr = ""
  writer.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const exited = once(writer, "exit") as Promise<[number | null, NodeJS.Signals | null]>
  const acked = new Map<string, number>()
  let acks = 0
  let deadline: NodeJS.Timeout | undefined
  const lines = readline.createInterface({ input: writer.stdout })
  lines.on("line", (line) => {
    const [word, id, seq] = line.split(" ")
    if (word !== "ack") return
    acks++
    acked.set(id, Math.max(acked.get(id) ?? 0, Number(seq)))
    deadline ??= setTimeout(() => writer.kill("SIGKILL"), 3000)
    if (acks === killAt) writer.kill("SIGKILL")
  })
  // Acks still in the pipe after the kill were printed after their save resolved: they count too.
  const [[, signal]] = await Promise.all([exited, once(lines, "close")])
  clearTimeout(deadline)
  t.equal(signal, "SIGKILL", `the writer was killed mid-run${stderr && `; its stderr: ${stderr}`}`)
  t.ok(acks > 0, "the writer acknowledged saves before it was killed")
  return { acks, acked, pid: writer.pid }
}
