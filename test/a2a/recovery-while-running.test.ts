import { spawn } from "node:child_process"
import fs from "node:fs"
import http from "node:http"
import os from "node:os"
import path from "node:path"
import readline from "node:readline"
import t, { type Test } from "tap"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import type { A2ATask } from "../../lib/types.js"
import { waitFor } from "../fixtures/helpers.js"

/**
 * A rolling redeploy on one host: two real servers on one file-store
 * directory. When one is killed with SIGKILL, the other, still running,
 * fails the dead one's Tasks within seconds; no restart needed.
 */

const fixture = path.resolve(import.meta.dirname, "../fixtures/file-store-server.mjs")

/** An OpenAI-style model that holds every request, so each Task stays working. */
async function silentModel(t: Test): Promise<{ url: string; calls: () => number }> {
  let calls = 0
  const server = http.createServer(() => void calls++)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, calls: () => calls }
}

async function startServer(t: Test, dir: string, modelUrl: string, recoveryIntervalMs: number) {
  const child = spawn(process.execPath, [fixture, dir, modelUrl, String(recoveryIntervalMs)], { stdio: ["ignore", "pipe", "pipe"] })
  t.teardown(() => child.kill("SIGKILL"))
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const { url, pid } = await new Promise<{ url: string; pid: number }>((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once("line", (line) => resolve(JSON.parse(line)))
    child.once("exit", (code) => reject(new Error(`the server exited early (${code}): ${stderr}`)))
  })
  return { url, pid, child }
}

async function send(url: string, text: string): Promise<string> {
  const body = { jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { kind: "message", messageId: `m-${text}`, role: "user", parts: [{ kind: "text", text }] } } }
  const answer = (await fetch(url + "/", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then((r) => r.json())) as { result: A2ATask }
  return answer.result.id
}

t.test("a neighbour on the same directory killed with SIGKILL: the running server fails its Tasks within seconds", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-rolling-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const model = await silentModel(t)
  const files = new FileTaskStore(dir)
  const stateOf = async (id: string) => (await files.get(id))?.status.state

  // Checked every 200 ms here (5 s by default), so the test is quick; the wait below allows for a loaded machine.
  const old = await startServer(t, dir, model.url, 200)
  const next = await startServer(t, dir, model.url, 200)
  const oldTask = await send(old.url, "on the old server")
  const nextTask = await send(next.url, "on the new server")
  await waitFor(async () => model.calls() === 2 && (await stateOf(oldTask)) === "working" && (await stateOf(nextTask)) === "working", 15_000, "both tasks working")

  old.child.kill("SIGKILL")
  await new Promise((resolve) => old.child.once("exit", resolve))
  await waitFor(async () => (await stateOf(oldTask)) === "failed", 15_000, "the killed server's task to be failed by its running neighbour")
  const failed = (await files.get(oldTask))!
  t.match(failed.status.message?.parts[0], { kind: "text", text: `Interrupted: the server running this task (pid ${old.pid}) stopped before it finished; send the message again` })
  t.equal(await stateOf(nextTask), "working", "the live server's own task is left alone")

  // A Task the old server created after the new one's last look is found too: a third server dies the same way.
  const third = await startServer(t, dir, model.url, 200)
  const thirdTask = await send(third.url, "on a third server")
  await waitFor(async () => model.calls() === 3 && (await stateOf(thirdTask)) === "working", 15_000, "the third server's task working")
  third.child.kill("SIGKILL")
  await new Promise((resolve) => third.child.once("exit", resolve))
  await waitFor(async () => (await stateOf(thirdTask)) === "failed", 15_000, "the third server's task to be failed")
  t.equal(await stateOf(nextTask), "working", "still left alone")
  const polled = (await fetch(next.url + "/", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: oldTask } }),
  }).then((r) => r.json())) as { result: A2ATask }
  t.equal(polled.result.status.state, "failed", "a peer polling the surviving server sees it failed")
})
