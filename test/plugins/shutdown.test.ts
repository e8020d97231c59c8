import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import fs from "node:fs"
import http from "node:http"
import os from "node:os"
import path from "node:path"
import { connect } from "nats"
import pg from "pg"
import t, { type Test } from "tap"

/**
 * After stop() resolves, nothing of ours is left running: a process that
 * served, ran a task and stopped ends on its own (the fixture never calls
 * process.exit), with no timer of ours pending, ref'd or unref'd.
 */

const fixture = path.resolve(import.meta.dirname, "../fixtures/serve-then-stop.mjs")

interface Report {
  rightAfter: string[]
  afterCloseCallbacks: string[]
  ourTimers: string[]
  otherTimers: string[]
  failedSaves?: number
}

/** Resources that stdout and stderr need, whatever they are connected to. */
const STDIO = new Set(["PipeWrap", "TTYWrap", "FSReqCallback", "WriteWrap"])

async function serveThenStop(t: Test, args: string[]): Promise<{ report: Report; exitMs: number; code: number | null }> {
  const child = spawn(process.execPath, [fixture, ...args], { stdio: ["ignore", "pipe", "pipe"] })
  t.teardown(() => child.kill("SIGKILL"))
  let stdout = ""
  let stderr = ""
  let reportedAt = 0
  child.stdout.on("data", (chunk) => {
    stdout += chunk
    if (stdout.includes("\n") && reportedAt === 0) reportedAt = performance.now()
  })
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`the process did not end on its own within 30 s of starting; stdout: ${stdout} stderr: ${stderr}`)), 30_000)
    child.once("exit", (exitCode) => {
      clearTimeout(deadline)
      resolve(exitCode)
    })
  })
  const exitMs = performance.now() - reportedAt
  if (code !== 0 || reportedAt === 0) throw new Error(`the fixture failed (exit ${code}): ${stderr}`)
  return { report: JSON.parse(stdout.split("\n")[0]) as Report, exitMs, code }
}

function assertNothingLeft(t: Test, what: string, { report, exitMs, code }: Awaited<ReturnType<typeof serveThenStop>>): void {
  t.equal(code, 0, `${what}: the process ended by itself, cleanly`)
  t.ok(exitMs < 5000, `${what}: it ended ${exitMs.toFixed(0)} ms after stop() resolved`)
  t.same(report.ourTimers, [], `${what}: no timer set by our code is pending after stop(), ref'd or not`)
  t.notOk(report.rightAfter.includes("Timeout"), `${what}: no ref'd timer at all right after stop() (${report.rightAfter.join(", ")})`)
  t.same(
    report.afterCloseCallbacks.filter((resource) => !STDIO.has(resource)),
    [],
    `${what}: once the closed sockets' close callbacks ran, only stdio is active (${report.afterCloseCallbacks.join(", ") || "nothing"})`,
  )
}

t.test("memory store: after stop() the process has nothing of ours left and exits on its own", async (t) => {
  assertNothingLeft(t, "memory", await serveThenStop(t, ["memory"]))
})

t.test("file store: the same", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-shutdown-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  assertNothingLeft(t, "file", await serveThenStop(t, [`file:${dir}`]))
})

t.test("Postgres store (leases renewed, a LISTEN connection): the same", async (t) => {
  const url = process.env.TOOLNEXUS_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
  const table = `tn_shutdown_${randomBytes(4).toString("hex")}`
  t.teardown(async () => {
    const admin = new pg.Client({ connectionString: url })
    await admin.connect()
    await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_pushcfg, ${table}_outbox, ${table}_dead`)
    await admin.end()
  })
  assertNothingLeft(t, "postgres", await serveThenStop(t, [`${url}?table=${table}`]))
})

t.test("NATS store (leases renewed, a KV watch): the same", async (t) => {
  const url = process.env.NATS_URL ?? "nats://127.0.0.1:4222"
  const bucket = `tn_shutdown_${randomBytes(4).toString("hex")}`
  t.teardown(async () => {
    const nc = await connect({ servers: url })
    await (await nc.jetstreamManager()).streams.delete(`KV_${bucket}`).catch(() => false)
    await nc.close()
  })
  assertNothingLeft(t, "nats", await serveThenStop(t, [`${url}?bucket=${bucket}`]))
})

t.test("a final save that failed and waits for its retry: stop() gives it one last try, and no retry timer is left", async (t) => {
  const result = await serveThenStop(t, ["failing-final"])
  t.ok((result.report.failedSaves ?? 0) >= 2, `the final save failed, then was tried again (${result.report.failedSaves} tries)`)
  assertNothingLeft(t, "failing final save", result)
})

t.test("a subscription to a Task another process runs, open across stop(): it ends, and the store polling with it", async (t) => {
  assertNothingLeft(t, "following", await serveThenStop(t, ["following"]))
})

t.test("a model over HTTP: no request timer of ours outlives stop(), and the process still ends on its own", async (t) => {
  const model = http.createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ choices: [{ message: { content: "DONE" } }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }))
    })
  })
  await new Promise<void>((resolve) => model.listen(0, "127.0.0.1", resolve))
  t.teardown(() => {
    model.closeAllConnections()
    model.close()
  })
  const url = `http://127.0.0.1:${(model.address() as { port: number }).port}`
  assertNothingLeft(t, "HTTP model", await serveThenStop(t, ["memory", url]))
})
