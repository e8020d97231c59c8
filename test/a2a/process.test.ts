import { spawn } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import readline from "node:readline"
import t, { type Test } from "tap"
import { recoverInterrupted } from "../../lib/a2a/recovery.js"
import { currentRunner, withInternals } from "../../lib/internals.js"
import { isProcessAlive } from "../../lib/process.js"
import { tmpFileName } from "../../lib/stores/file/names.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { memoryLogger, RecordingStore, waitFor } from "../fixtures/helpers.js"

/** The state letter in /proc/<pid>/stat, or undefined once the pid is gone. */
function stateOf(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1")
    return stat.slice(stat.lastIndexOf(")") + 2).charAt(0)
  } catch {
    return undefined
  }
}

/**
 * A real zombie: sh starts a child, then execs `sleep`, which never reaps
 * it. The child waits until the exec happened (its parent's name is
 * "sleep"), so the shell has no chance to reap it first. Returns the
 * zombie's pid and its (live) parent's.
 */
async function zombie(t: Test): Promise<{ pid: number; parent: number }> {
  const script = `(until read name < /proc/$$/comm && [ "$name" = sleep ]; do :; done) & echo $!; exec sleep 600`
  const parent = spawn("sh", ["-c", script], { stdio: ["ignore", "pipe", "inherit"] })
  t.teardown(() => parent.kill("SIGKILL"))
  const pid = await new Promise<number>((resolve) => readline.createInterface({ input: parent.stdout }).once("line", (line) => resolve(Number(line))))
  await waitFor(() => stateOf(pid) === "Z", 10_000, `process ${pid} to be a zombie`)
  return { pid, parent: parent.pid! }
}

/** A pid no process has: one that exited and was reaped. */
async function reapedPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""])
  await new Promise((resolve) => child.once("exit", resolve))
  return child.pid!
}

t.test("isProcessAlive: live, reaped and impossible pids", async (t) => {
  t.equal(isProcessAlive(process.pid), true, "this process")
  t.equal(isProcessAlive(process.ppid), true, "its parent")
  t.equal(isProcessAlive(await reapedPid()), false, "a reaped pid")
  for (const pid of [0, -1, 1.5, Number.NaN]) t.equal(isProcessAlive(pid), false, `${pid} names no single process`)
})

t.test("a zombie (exited, not reaped) counts as dead, though signal 0 still reaches it", async (t) => {
  const { pid, parent } = await zombie(t)
  t.doesNotThrow(() => process.kill(pid, 0), "signal 0 succeeds on the zombie: a check by signal alone calls it alive")
  t.equal(isProcessAlive(pid), false, "the zombie is dead")
  t.equal(isProcessAlive(parent), true, "its sleeping parent is alive")
})

t.test("restart recovery fails the task of a server that is now a zombie", async (t) => {
  const { pid, parent } = await zombie(t)
  const store = new RecordingStore()
  const self = currentRunner()
  const working = (id: string, runnerPid: number) =>
    withInternals({ id, contextId: "c", status: { state: "working", timestamp: new Date().toISOString() } }, { runner: { ...self, pid: runnerPid, instance: `i-${id}` } })
  await store.save(working("zombie-run", pid))
  await store.save(working("live-run", parent))
  t.same(await recoverInterrupted({ store, self, log: memoryLogger() }), ["zombie-run"])
  t.match((await store.get("zombie-run"))?.status, { state: "failed", message: { parts: [{ text: new RegExp(`Interrupted: the server running this task \\(pid ${pid}\\)`) }] } })
  t.equal((await store.get("live-run"))?.status.state, "working", "a live process's task is left alone")
})

t.test("a FileTaskStore removes a zombie's fresh tmp file, and keeps a live process's", async (t) => {
  const { pid, parent } = await zombie(t)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-zombie-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const zombieTmp = tmpFileName("a.json", pid, 1)
  const liveTmp = tmpFileName("b.json", parent, 1)
  fs.writeFileSync(path.join(dir, zombieTmp), "{")
  fs.writeFileSync(path.join(dir, liveTmp), "{")
  const store = new FileTaskStore(dir)
  await store.close() // waits for the opening's tmp cleanup
  t.same(fs.readdirSync(dir), [liveTmp], "only the live process's tmp file is left")
})
