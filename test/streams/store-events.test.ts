import fs from "node:fs"
import fsp from "node:fs/promises"
import path from "node:path"
import t, { type Test } from "tap"
import type { LoggedEvent } from "../../lib/streams/event-log.js"
import { eventSweepIntervalMs } from "../../lib/stores/event-sweep.js"
import { FileTaskStore, type FileSystem } from "../../lib/stores/file/store.js"
import { taskFileName } from "../../lib/stores/file/names.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { deadPid, recordingFs, sampleTask, tmpDir, waitFor } from "../fixtures/helpers.js"

/**
 * What the event-log contract (event-log-contract.ts) leaves to each store:
 * the memory store's bound, the file store's files on disk, and the log
 * going with its Task.
 */

function closedAtEnd<S extends TaskStore>(t: Test, store: S): S {
  t.teardown(() => store.close?.())
  return store
}

/** `count` events from position `from` on, each carrying `chars` characters of text. */
const events = (from: number, count: number, chars = 10, tag = "e"): LoggedEvent[] =>
  Array.from({ length: count }, (_, i) => ({ position: from + i, event: { kind: "artifact-update", text: `${tag}${from + i}:` + "x".repeat(chars) } }))

const positions = (logged: LoggedEvent[]) => logged.map((e) => e.position)
const tags = (logged: LoggedEvent[]) => logged.map((e) => String(e.event.text).split(":")[0])

/** The log and end-marker files of a Task in a file store's directory. */
const eventFiles = (dir: string, id: string) => {
  const name = taskFileName(id).slice(0, -".json".length)
  return { log: path.join(dir, ".events", `${name}.log`), end: path.join(dir, ".events", `${name}.end`) }
}

// ---------------------------------------------------------------------------
// Both stores

t.test("options: eventRetentionMs and maxEventBytes are checked, naming the option", async (t) => {
  t.throws(() => new InMemoryTaskStore({ eventRetentionMs: -1 }), /InMemoryTaskStore options\.eventRetentionMs should be a whole number of milliseconds >= 0/)
  t.throws(() => new InMemoryTaskStore({ eventRetentionMs: 1.5 }), /eventRetentionMs/)
  t.throws(() => new FileTaskStore(tmpDir(t), { eventRetentionMs: "1h" as never }), /FileTaskStore options\.eventRetentionMs should be/)
  t.throws(() => new InMemoryTaskStore({ maxEventBytes: 0 }), /opts\.maxEventBytes should be a positive integer/)
  t.equal(eventSweepIntervalMs(0), 100, "a retention of 0 is swept every 100 ms, not in a busy loop")
  t.equal(eventSweepIntervalMs(2000), 500, "a quarter of the retention")
  t.equal(eventSweepIntervalMs(60 * 60_000), 60_000, "an hour's: every minute")
})

for (const [name, make] of [
  ["InMemoryTaskStore", (t: Test, eventRetentionMs?: number) => closedAtEnd(t, new InMemoryTaskStore({ eventRetentionMs }))],
  ["FileTaskStore", (t: Test, eventRetentionMs?: number) => closedAtEnd(t, new FileTaskStore(tmpDir(t), { eventRetentionMs }))],
] as const) {
  t.test(`${name}: the log keeps the events as given: a caller changing its objects later changes nothing`, async (t) => {
    const store = make(t)
    const given = events(1, 1)
    await store.events.append("t", given)
    given[0].event.text = "changed"
    const [read] = await store.events.read("t", 0, 10)
    t.equal(tags([read]).join(), "e1", "an append is a copy")
    read.event.text = "changed again"
    t.same(tags(await store.events.read("t", 0, 10)), ["e1"], "and so is a read")
    t.same(await store.events.read("t", 0, 0), [], "a limit of 0 reads nothing")
  })

  t.test(`${name}: an event that is not JSON refuses the whole append`, async (t) => {
    const store = make(t)
    const cyclic: Record<string, unknown> = { kind: "x" }
    cyclic.self = cyclic
    await t.rejects(store.events.append("t", [...events(1, 1), { position: 2, event: cyclic }]), TypeError)
    t.same(await store.events.read("t", 0, 10), [], "nothing of it was kept")
    t.equal(await store.events.lastPosition("t"), 0)
  })

  t.test(`${name}: ended counts once (a later ended does not extend it), and an ended log with no events yet still goes`, async (t) => {
    const store = make(t, 1000)
    await store.events.ended("early")
    await store.events.append("t", events(1, 1))
    const endedAt = Date.now()
    await store.events.ended("t")
    await new Promise((resolve) => setTimeout(resolve, 600))
    await store.events.ended("t")
    await store.events.append("early", events(1, 2))
    t.same(positions(await store.events.read("early", 0, 10)), [1, 2], "appends after the end are taken")
    await waitFor(async () => (await store.events.read("t", 0, 10)).length === 0, 10_000, "the log to go")
    // By the first end's time and a sweep interval (250 ms), well before the second end's time (1600 ms).
    t.ok(Date.now() - endedAt < 1550, `by the first end's time, not the second's (${Date.now() - endedAt} ms)`)
    await waitFor(async () => (await store.events.read("early", 0, 10)).length === 0, 10_000, "the log ended before its appends to go")
    t.equal(await store.events.lastPosition("early"), 0)
  })

  t.test(`${name}: the retention sweep of Tasks removes their logs; running Tasks' logs stay`, async (t) => {
    const store = make(t) as TaskStore & { deleteFinishedBefore(cutoff: string): Promise<number> }
    await store.save(sampleTask("old", "completed"))
    await store.save(sampleTask("running", "working"))
    await store.events!.append("old", events(1, 3))
    await store.events!.append("running", events(1, 3))
    t.equal(await store.deleteFinishedBefore(new Date().toISOString()), 1)
    t.same(await store.events!.read("old", 0, 10), [], "the expired Task's log went with it")
    t.equal(await store.events!.lastPosition("old"), 0)
    t.same(positions(await store.events!.read("running", 0, 10)), [1, 2, 3])
  })

  t.test(`${name}: delete removes the log of an id the store holds no Task of`, async (t) => {
    const store = make(t)
    await store.events.append("no-task", events(1, 2))
    await store.delete("no-task")
    t.same(await store.events.read("no-task", 0, 10), [])
  })
}

// ---------------------------------------------------------------------------
// Memory store: the bound

t.test("InMemoryTaskStore: past maxEventBytes, ended logs go first (the earliest ended first), then the oldest events of the largest log", async (t) => {
  const one = 64 + 2 * JSON.stringify(events(1, 1, 10_000)[0].event).length
  // Room for four such events and a few logs' own bytes.
  const budget = 4 * one + 1000
  const store = closedAtEnd(t, new InMemoryTaskStore({ maxEventBytes: budget }))
  const log = store.events
  await log.append("done-1", events(1, 2, 10_000))
  await log.append("done-2", events(1, 2, 10_000))
  await log.ended("done-2")
  await log.ended("done-1")
  t.equal(log.usage.logs, 2)

  await log.append("run", events(1, 1, 10_000))
  t.same(positions(await log.read("done-2", 0, 10)), [], "the log that ended first went first")
  t.same(positions(await log.read("done-1", 0, 10)), [1, 2], "the other ended log stays while there is room")
  await log.append("run", events(2, 2, 10_000))
  t.same(await log.read("done-1", 0, 10), [], "then it goes too, before any running Task's event")
  t.same(positions(await log.read("run", 0, 10)), [1, 2, 3])

  await log.append("small", events(1, 2, 10_000))
  t.same(positions(await log.read("run", 0, 10)), [2, 3], "with no ended log left: the oldest event of the largest log")
  t.same(positions(await log.read("small", 0, 10)), [1, 2], "the smaller log keeps its events")
  t.ok(log.usage.bytes <= budget, "within the budget")
  t.equal(await log.lastPosition("run"), 3, "the log that lost its oldest events still knows its last position")
  t.same(await log.append("run", events(1, 2, 10)), [1, 2], "and positions it held are still held")

  await log.append("huge", events(1, 1, 200_000))
  t.ok(log.usage.bytes <= budget, "an event larger than the whole budget is not kept")
  t.equal(await log.lastPosition("huge"), 1)
  t.same(await log.read("huge", 0, 10), [])
})

t.test("InMemoryTaskStore: a Task dropped for room takes its log with it", async (t) => {
  const store = closedAtEnd(t, new InMemoryTaskStore({ maxTasks: 2, maxTasksPerOwner: 2 }))
  await store.save(sampleTask("done", "completed"))
  await store.events.append("done", events(1, 2))
  await store.save(sampleTask("a", "working"))
  await store.save(sampleTask("b", "working"))
  t.equal(await store.get("done"), undefined, "the finished Task made room")
  t.same(await store.events.read("done", 0, 10), [], "and its log went with it")
  t.equal(store.events.usage.logs, 0)
})

t.test("InMemoryTaskStore: maxEventBytes defaults to half of maxBytes", async (t) => {
  const store = closedAtEnd(t, new InMemoryTaskStore({ maxBytes: 10_000 }))
  await store.events.append("t", events(1, 10, 1000))
  t.ok(store.events.usage.bytes <= 5000, `${store.events.usage.bytes} bytes held`)
  t.equal(await store.events.lastPosition("t"), 10)
})

// ---------------------------------------------------------------------------
// File store: the files

t.test("FileTaskStore: the log is <dir>/.events/<name>.log in JSON lines, ended adds <name>.end with its time", async (t) => {
  const dir = tmpDir(t)
  const store = closedAtEnd(t, new FileTaskStore(dir))
  await store.events.append("abc-1", events(1, 2))
  await store.events.append("a/../b", events(1, 1))
  t.same(fs.readdirSync(path.join(dir, ".events")).sort(), ["abc-1.log", `${taskFileName("a/../b").slice(0, -5)}.log`].sort())
  const lines = fs.readFileSync(eventFiles(dir, "abc-1").log, "utf8").split("\n")
  t.same(lines.slice(0, 2).map((line) => JSON.parse(line)), events(1, 2).map(({ position, event }) => ({ p: position, e: event })))
  t.equal(lines[2], "", "each line ends with a newline")
  const before = Date.now()
  await store.events.ended("abc-1")
  const endedAt = Number(fs.readFileSync(eventFiles(dir, "abc-1").end, "utf8"))
  t.ok(endedAt >= before && endedAt <= Date.now(), "the marker holds the end time")
  t.same(fs.readdirSync(dir).sort(), [".events"], "no Task file, nothing else beside it")
})

t.test("FileTaskStore: a torn last line is skipped, and the next append starts a line of its own", async (t) => {
  const dir = tmpDir(t)
  const store = closedAtEnd(t, new FileTaskStore(dir))
  await store.events.append("t", events(1, 2))
  const { log } = eventFiles(dir, "t")
  // A crash mid-append: half of line 3, no newline.
  const line3 = `{"p":3,"e":${JSON.stringify(events(3, 1)[0].event)}}`
  fs.appendFileSync(log, line3.slice(0, 20))
  t.same(positions(await store.events.read("t", 0, 10)), [1, 2], "the torn line is not read")

  // A store after a restart (nothing remembered) and the one that wrote (its size no longer matches) both see it.
  const restarted = closedAtEnd(t, new FileTaskStore(dir))
  t.equal(await restarted.events.lastPosition("t"), 2)
  t.same(await restarted.events.append("t", events(3, 2, 10, "again")), [], "position 3 was not held")
  t.same(tags(await store.events.read("t", 0, 10)), ["e1", "e2", "again3", "again4"], "every whole line read")
  t.equal(await store.events.lastPosition("t"), 4)
  t.match(fs.readFileSync(log, "utf8"), /\n\{"p":3,"e":\{"kind":"artifact-update","text":"again3:/, "the append after the torn line began a new line")
})

t.test("FileTaskStore: lines that do not count are skipped: a position not above the one before, a line that is not an event", async (t) => {
  const dir = tmpDir(t)
  const store = closedAtEnd(t, new FileTaskStore(dir))
  await store.events.append("t", events(1, 1))
  const { log } = eventFiles(dir, "t")
  const line = (p: unknown, e: unknown) => JSON.stringify({ p, e }) + "\n"
  fs.appendFileSync(log, line(3, { text: "first3:" }) + line(2, { text: "late2:" }) + line(3, { text: "second3:" }))
  fs.appendFileSync(log, "null\n" + line(4, [1]) + line(4.5, {}) + line(4, null) + "\n" + line(4, { text: "four:" }))
  t.same(tags(await store.events.read("t", 0, 10)), ["e1", "first3", "four"])
  t.same(tags(await store.events.read("t", 1, 1)), ["first3"], "after and limit go by the lines that count")
  t.equal(await store.events.lastPosition("t"), 4)
})

t.test("FileTaskStore: the log survives a restart, with its end, which the restarted store's sweep goes by", async (t) => {
  const dir = tmpDir(t)
  const first = new FileTaskStore(dir, { eventRetentionMs: 1500 })
  await first.save(sampleTask("t", "completed"))
  await first.events.append("t", events(1, 3))
  await first.events.ended("t")
  await first.close()
  const restarted = closedAtEnd(t, new FileTaskStore(dir, { eventRetentionMs: 1500 }))
  t.same(positions(await restarted.events.read("t", 1, 10)), [2, 3], "read after the restart")
  t.same(await restarted.events.append("t", events(3, 2)), [3], "positions held before the restart are still held")
  await waitFor(() => !fs.existsSync(eventFiles(dir, "t").log), 10_000, "the ended log to go")
  await waitFor(() => !fs.existsSync(eventFiles(dir, "t").end), 10_000, "its marker to go after it")
  t.pass("its marker went after it")
  t.equal((await restarted.get("t"))?.status.state, "completed", "the Task stays: only its events went")
})

t.test("FileTaskStore: an end marker a crash left empty goes by its mtime", async (t) => {
  const dir = tmpDir(t)
  const store = closedAtEnd(t, new FileTaskStore(dir, { eventRetentionMs: 60_000 }))
  await store.events.append("t", events(1, 1))
  const { log, end } = eventFiles(dir, "t")
  fs.writeFileSync(end, "")
  const old = new Date(Date.now() - 120_000)
  fs.utimesSync(end, old, old)
  const sweep = (store as unknown as { eventFiles: { removeEndedBefore(cutoff: number): Promise<number> } }).eventFiles
  t.equal(await sweep.removeEndedBefore(Date.now() - 60_000), 1)
  t.notOk(fs.existsSync(log))
  t.notOk(fs.existsSync(end))
})

t.test("FileTaskStore: .events is not a Task to list(), to the index or to the start-up cleanup", async (t) => {
  const dir = tmpDir(t)
  const store = closedAtEnd(t, new FileTaskStore(dir))
  t.same((await store.list({})).tasks, [], "a first listing, before .events exists: the index watches from here")
  await store.save(sampleTask("a", "working"))
  await store.events.append("a", events(1, 2))
  await store.events.append("b", events(1, 2))
  await store.events.ended("b")
  const ids = async (s: FileTaskStore) => (await s.list({})).tasks.map((task) => task.id)
  t.same(await ids(store), ["a"], "only the Task")
  const restarted = closedAtEnd(t, new FileTaskStore(dir, { onError: (err) => t.fail(err.message) }))
  await restarted.open()
  t.same(await ids(restarted), ["a"], "after a restart too, with nothing reported")
  t.same(fs.readdirSync(path.join(dir, ".events")).sort(), ["a.log", "b.end", "b.log"], "the start-up cleanup left the logs alone")
})

t.test("FileTaskStore: delete removes the log and its marker from disk", async (t) => {
  const dir = tmpDir(t)
  const store = closedAtEnd(t, new FileTaskStore(dir))
  await store.save(sampleTask("gone", "completed"))
  await store.events.append("gone", events(1, 2))
  await store.events.ended("gone")
  await store.delete("gone")
  t.same(fs.readdirSync(path.join(dir, ".events")), [])
})

t.test("FileTaskStore: an append that another process's lands beside is told the positions it lost", async (t) => {
  const dir = tmpDir(t)
  const rival = `{"p":3,"e":{"text":"rival3:"}}\n`
  let race = false
  // Another process appends its position 3 just before this one's append lands.
  const racing: FileSystem = {
    ...fsp,
    appendFile: async (file, data, encoding) => {
      if (race) await fsp.appendFile(file, rival)
      await fsp.appendFile(file, data, encoding)
    },
  }
  const store = closedAtEnd(t, new FileTaskStore(dir, { fs: racing }))
  await store.events.append("t", events(1, 2))
  race = true
  t.same(await store.events.append("t", events(3, 2, 10, "mine")), [3], "position 3 went to the rival")
  race = false
  t.same(tags(await store.events.read("t", 0, 10)), ["e1", "e2", "rival3", "mine4"])
  t.same(await store.events.append("t", events(4, 2, 10, "later")), [4], "what it remembers after the race is the log as read")
})

t.test("FileTaskStore: a file system layer without appendFile rewrites the log whole, in .events", async (t) => {
  const dir = tmpDir(t)
  const calls: string[] = []
  const store = closedAtEnd(t, new FileTaskStore(dir, { fs: recordingFs(dir, calls) }))
  await store.events.append("t", events(1, 2))
  await store.events.append("t", events(2, 2))
  t.same(positions(await store.events.read("t", 0, 10)), [1, 2, 3])
  t.ok(calls.some((call) => /^rename \.events\/t\.log\.\d+\.\d+\.tmp \.events\/t\.log$/.test(call)), "a tmp file renamed over the log")
  t.same(fs.readdirSync(path.join(dir, ".events")), ["t.log"], "no tmp file left")
})

t.test("FileTaskStore: the event sweep removes tmp files a dead process left in .events", async (t) => {
  const dir = tmpDir(t)
  fs.mkdirSync(path.join(dir, ".events"))
  const leftover = path.join(dir, ".events", `t.log.${await deadPid()}.1.tmp`)
  fs.writeFileSync(leftover, "half")
  closedAtEnd(t, new FileTaskStore(dir, { eventRetentionMs: 0 }))
  await waitFor(() => !fs.existsSync(leftover), 10_000, "the leftover to go")
  t.pass("removed")
})

t.test("FileTaskStore: a failed append is refused, and the next one reads the log again", async (t) => {
  const dir = tmpDir(t)
  let failing = false
  const flaky: FileSystem = {
    ...fsp,
    appendFile: async (file, data, encoding) => {
      if (failing) {
        // Half of it landed, then the disk filled.
        await fsp.appendFile(file, data.slice(0, 15))
        throw Object.assign(new Error("ENOSPC: no space left"), { code: "ENOSPC" })
      }
      await fsp.appendFile(file, data, encoding)
    },
  }
  const store = closedAtEnd(t, new FileTaskStore(dir, { fs: flaky }))
  await store.events.append("t", events(1, 1))
  failing = true
  await t.rejects(store.events.append("t", events(2, 1)), /ENOSPC/)
  failing = false
  t.same(await store.events.append("t", events(2, 1, 10, "retry")), [], "position 2 was never held")
  t.same(tags(await store.events.read("t", 0, 10)), ["e1", "retry2"])
})

t.test("FileTaskStore: file system failures of the log are errors, named; a failed sweep is reported and the next one tries again", async (t) => {
  const dir = tmpDir(t)
  const failing = new Set<string>()
  const fail = (op: string, file: string) => {
    if (failing.has(op) && file.includes(`${path.sep}.events`)) throw Object.assign(new Error(`EIO: ${op} failed`), { code: "EIO" })
  }
  const calls: string[] = []
  const layer = recordingFs(dir, calls, fail)
  const reported: Array<{ message: string; operation: string }> = []
  const store = closedAtEnd(t, new FileTaskStore(dir, { fs: layer, eventRetentionMs: 0, onError: (err, context) => reported.push({ message: err.message, operation: context.operation }) }))
  t.same(await store.events.read("t", 0, 10), [], "no .events yet: nothing, and sweeps find nothing to do")
  await store.events.append("t", events(1, 1))

  failing.add("readFile")
  await t.rejects(store.events.read("t", 0, 10), /FileTaskStore could not read .*\.events.*t\.log: EIO: readFile failed/)
  failing.delete("readFile")
  failing.add("stat")
  await t.rejects(store.events.append("t", events(2, 1)), /EIO: stat failed/)
  failing.delete("stat")
  failing.add("rename")
  await t.rejects(store.events.append("t", events(2, 1)), /EIO: rename failed/, "a rewrite that cannot land")
  failing.delete("rename")
  t.same(fs.readdirSync(path.join(dir, ".events")), ["t.log"], "its tmp file was removed")
  t.same(positions(await store.events.read("t", 0, 10)), [1], "the log is as it was")

  failing.add("readdir")
  await waitFor(() => reported.length > 0, 10_000, "a failed sweep to be reported")
  t.match(reported[0], { operation: "retention", message: /EIO: readdir failed/ })
  failing.delete("readdir")
  await store.events.ended("t")
  await waitFor(async () => (await store.events.read("t", 0, 10)).length === 0, 10_000, "the next sweep to remove the ended log")
})
