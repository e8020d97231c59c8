import { spawn } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import t from "tap"
import { recoverInterrupted, RecoveryService, sameHostLiveness } from "../../lib/a2a/recovery.js"
import { createLocalClient } from "../../lib/client/client.js"
import { currentRunner, withInternals, type RunnerId } from "../../lib/internals.js"
import { createLogger, serve } from "../../plugins/serve.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import type { A2ATask } from "../../lib/types.js"
import { callRpc, deadPid, deferred, memoryLogger, modelServer, RecordingStore, rpc, sampleTask, startCli, tmpDir, userMessage, waitFor } from "../fixtures/helpers.js"

t.test("sameHostLiveness", async (t) => {
  const self = currentRunner()
  t.equal(sameHostLiveness(self, self), true, "this process is alive")
  t.equal(sameHostLiveness({ ...self, instance: "earlier-life" }, self), false, "our own pid under another instance is an earlier life")
  t.equal(sameHostLiveness({ ...self, pid: await deadPid(), instance: "x" }, self), false, "a dead pid")
  t.equal(sameHostLiveness({ ...self, pid: process.ppid, instance: "x" }, self), true, "a live pid")
  t.equal(sameHostLiveness({ host: "elsewhere", pid: 1, instance: "x" }, self), true, "another host cannot be checked: presumed alive")
})

t.test("recoverInterrupted fails only the unfinished tasks of dead processes", async (t) => {
  const store = new RecordingStore()
  const self = currentRunner()
  const dead: RunnerId = { ...self, pid: await deadPid(), instance: "dead" }
  const task = (id: string, state: A2ATask["status"]["state"], runner?: RunnerId) => (runner ? withInternals(sampleTask(id, state), { runner }) : sampleTask(id, state))
  await store.save(task("orphan-working", "working", dead))
  await store.save(task("orphan-submitted", "submitted", dead))
  await store.save(task("mine", "working", self))
  await store.save(task("done", "completed", dead))
  await store.save(task("waiting", "input-required", dead))
  await store.save(task("no-owner", "working"))
  const log = memoryLogger()
  const failed = await recoverInterrupted({ store, self, log })
  t.same(failed.sort(), ["orphan-submitted", "orphan-working"])
  const recovered = (await store.get("orphan-working"))!
  t.equal(recovered.status.state, "failed")
  t.match(recovered.status.message?.parts[0], { text: /Interrupted: the server running this task \(pid \d+\) stopped before it finished/ })
  t.equal(recovered.contextId, "ctx-1")
  for (const id of ["mine", "done", "waiting", "no-owner"]) t.same(store.statesOf(id).length, 1, `${id} untouched`)
  t.ok(log.lines.some((l) => l.taskId === "orphan-working" && l.msg === "recovered a task interrupted by a stopped server"))
  t.same(await recoverInterrupted({ store: { get: async () => undefined, save: async () => {} }, self, log }), [], "a store without list: nothing to do")
})

t.test("a real server killed mid-task: its task is failed by the next server, never by a live neighbour", async (t) => {
  const dir = tmpDir(t)
  // A model endpoint that takes requests and never answers, so the task stays working.
  const llm = await modelServer(t, ["hang"])
  const first = await startCli(t, ["--port", "0", "--store", `file:${dir}`, "--base-url", llm.url, "--model", "m"])
  const sent = await callRpc(first.url, rpc("SendMessage", { message: { messageId: "m-hold", role: "user", parts: [{ kind: "text", text: "hold" }] } }))
  const id: string = sent.result.id
  const files = new FileTaskStore(dir)
  await waitFor(async () => llm.requests.length === 1 && (await files.get(id))?.status.state === "working", 10_000, "the task to be working")

  // A second server on the same directory while the first lives: a rolling redeploy.
  const neighbour = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), a2a: { store: `file:${dir}` }, logger: false })
  t.equal((await files.get(id))?.status.state, "working", "a live process's running task is not failed by its neighbour")
  await neighbour.stop()

  first.child.kill("SIGKILL")
  await new Promise((resolve) => first.child.once("exit", resolve))
  const next = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), a2a: { store: `file:${dir}` }, logger: false })
  t.teardown(() => next.stop())
  const recovered = (await files.get(id))!
  t.equal(recovered.status.state, "failed", "after the restart the interrupted task is failed")
  t.match(recovered.status.message?.parts[0], { text: /Interrupted/ })
  const polled = await callRpc(next.url, rpc("GetTask", { id }))
  t.equal(polled.result.status.state, "failed", "a peer polling after the redeploy finds it, failed, not missing")
})

t.test("two servers in one process on one directory do not recover each other's live tasks", async (t) => {
  const dir = tmpDir(t)
  const hold = deferred<string>()
  const a = await serve("127.0.0.1:0", { client: createLocalClient(() => hold.promise), a2a: { store: `file:${dir}` }, logger: false })
  const sent = await callRpc(a.url, rpc("SendMessage", { message: userMessage("x") }))
  const files = new FileTaskStore(dir)
  await waitFor(async () => (await files.get(sent.result.id))?.status.state === "working")
  const b = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), a2a: { store: `file:${dir}` }, logger: false })
  t.equal((await files.get(sent.result.id))?.status.state, "working", "B left A's live task alone")
  hold.resolve("done")
  await waitFor(async () => (await files.get(sent.result.id))?.status.state === "completed")
  await b.stop()
  await a.stop()
})

t.test("one unreadable file does not stop listing or restart recovery", async (t) => {
  const dir = tmpDir(t)
  const files = new FileTaskStore(dir)
  const dead = { ...currentRunner(), pid: 2 ** 22 + 17, instance: "dead" }
  await files.save(withInternals(sampleTask("orphan", "working"), { runner: dead }))
  fs.writeFileSync(path.join(dir, "junk.json"), "{ torn")
  const lines: string[] = []
  const logger = createLogger({}, { write: (line: string) => void lines.push(line) })
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), a2a: { store: `file:${dir}` }, logger })
  t.teardown(() => srv.stop())
  t.equal((await files.get("orphan"))?.status.state, "failed", "the orphan was recovered")
  const listed = await callRpc(srv.url, rpc("ListTasks", {}))
  t.equal(listed.result.totalSize, 1, "ListTasks answers, without the unreadable file")
  // The store the server built reports what it skipped through the server's log.
  await waitFor(() => lines.some((line) => /task store background failure/.test(line) && /junk\.json/.test(line)), 5000, "the log line")
  await t.rejects(files.get("junk"), /corrupt task file/, "get still reports it")
})

t.test("a slow first sweep does not hold start-up; it finishes in the background", async (t) => {
  const store = new RecordingStore()
  const self = currentRunner()
  const dead: RunnerId = { ...self, pid: await deadPid(), instance: "dead" }
  await store.save(withInternals(sampleTask("late-orphan", "working"), { runner: dead }))
  const gate = { open: false }
  const slow: TaskStore = {
    get: (id) => store.get(id),
    save: (task) => store.save(task),
    list: async (query) => {
      await waitFor(() => gate.open, 30_000, "the gate")
      return store.list(query)
    },
  }
  const recovery = new RecoveryService({ store: slow, self, log: memoryLogger() })
  const started = Date.now()
  await recovery.start()
  t.ok(Date.now() - started < 10_000, "start() returned while the sweep still waits")
  t.equal((await store.get("late-orphan"))?.status.state, "working")
  gate.open = true
  await waitFor(async () => (await store.get("late-orphan"))?.status.state === "failed", 10_000, "the background sweep")
  await recovery.stop()
})

/** A memory store whose listings take at least `ms` (a large directory), timed as the store sees them. */
function slowListing(ms: number) {
  const store = new RecordingStore()
  const listings: Array<{ start: number; end: number }> = []
  const slow: TaskStore = {
    get: (id) => store.get(id),
    save: (task) => store.save(task),
    list: async (query) => {
      const start = performance.now()
      await new Promise((resolve) => setTimeout(resolve, ms)) // the listing's own cost, not a synchronisation
      const page = await store.list(query)
      listings.push({ start, end: performance.now() })
      return page
    },
  }
  return { store, slow, listings }
}

t.test("while running: a sweep is repeated at most once per 20 times its duration, however often the check runs", async (t) => {
  const { slow, listings } = slowListing(20)
  const recovery = new RecoveryService({ store: slow, self: currentRunner(), log: memoryLogger(), checkIntervalMs: 5 })
  await recovery.start()
  // One sweep lists "submitted" and then "working": two listings per sweep.
  await waitFor(() => listings.length >= 6, 20_000, "three sweeps")
  await recovery.stop()
  for (const sweep of [1, 2]) {
    const previous = { start: listings[2 * sweep - 2].start, end: listings[2 * sweep - 1].end }
    const gap = listings[2 * sweep].start - previous.end
    t.ok(gap >= 19 * (previous.end - previous.start), `sweep ${sweep + 1} began ${gap.toFixed(0)} ms after sweep ${sweep}, which took ${(previous.end - previous.start).toFixed(0)} ms`)
  }
})

t.test("while running: a neighbour that dies is swept for at the next check, before a sweep is due", async (t) => {
  const { store, slow, listings } = slowListing(400)
  const self = currentRunner()
  const neighbour = spawn("sleep", ["600"])
  t.teardown(() => neighbour.kill("SIGKILL"))
  await store.save(withInternals({ id: "theirs", contextId: "c", status: { state: "working", timestamp: new Date().toISOString() } }, { runner: { ...self, pid: neighbour.pid!, instance: "neighbour" } }))
  const recovery = new RecoveryService({ store: slow, self, log: memoryLogger(), checkIntervalMs: 10 })
  t.teardown(() => recovery.stop())
  await recovery.start()
  await waitFor(() => listings.length >= 2, 20_000, "the first sweep")
  t.equal((await store.get("theirs"))?.status.state, "working", "a live neighbour's task is left alone")
  neighbour.kill("SIGKILL")
  await new Promise((resolve) => neighbour.once("exit", resolve))
  await waitFor(async () => (await store.get("theirs"))?.status.state === "failed", 20_000, "the dead neighbour's task to be failed")
  const first = { start: listings[0].start, end: listings[1].end }
  t.ok(listings[2].start - first.end < 19 * (first.end - first.start), "the sweep came before one was due: the neighbour's death called it")
})
