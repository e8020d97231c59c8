// Instructions per request, counted by valgrind's callgrind: what tracing costs, measured in a way the machine's load
// does not move (a loaded machine changes how long an instruction takes, not how many a request runs).
//
//   node bench/instructions.mjs [mode ...]        (after npm run build; modes of servers/toolnexus-observe.mjs,
//                                                  default: off als bare traces on)
//
// Each mode's server (memory store, an agent that answers at once) runs under callgrind with the node that runs this
// script, or BENCH_NODE's (to count on another Node line). It is warmed with BENCH_WARMUP requests of each kind
// (default 5000), its counters zeroed (callgrind_control -z), then sent BENCH_REQUESTS GetTasks (default 1000) one at a time and dumped, zeroed, sent as many SendMessage→completed and
// dumped again. Each count is divided by its requests: the server's instructions per request, JIT and GC included.
// The client runs here, outside valgrind, so nothing of it is counted. The server's node runs with
// --single-threaded --predictable-gc-schedule (BENCH_NODE_FLAGS to change): without them V8's background threads and
// its timer-driven collections, both at the mercy of wall time under valgrind, moved the count of the same run by 2×;
// with them two runs agree within 2%. Valgrind starts uninstrumented (--instr-atstart=no) so the warm-up runs fast.
import { execFile, spawn } from "node:child_process"
import { once } from "node:events"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { call, getTaskBody, sendAndComplete } from "./load.mjs"

const here = path.dirname(fileURLToPath(import.meta.url))
const modes = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ["off", "als", "bare", "traces", "on"]
const node = process.env.BENCH_NODE ?? process.execPath
const warmup = Number(process.env.BENCH_WARMUP ?? 5000)
const requests = Number(process.env.BENCH_REQUESTS ?? 1000)
const settle = Math.ceil(requests / 4)
const run = promisify(execFile)

/**
 * Starts one observe server under callgrind and waits for its ready message.
 * @param {string} mode
 * @param {string} dir where callgrind writes its dumps
 * @returns {Promise<{ child: import("node:child_process").ChildProcess, url: string }>}
 */
async function start(mode, dir) {
  const args = ["--tool=callgrind", "--smc-check=all-non-file", "--instr-atstart=no", `--callgrind-out-file=${path.join(dir, "cg.out")}`, node, ...(process.env.BENCH_NODE_FLAGS ?? "--single-threaded --predictable-gc-schedule").split(" ").filter(Boolean), path.join(here, "servers", "toolnexus-observe.mjs"), mode]
  const child = spawn("valgrind", args, { stdio: ["ignore", "ignore", "pipe", "ipc"] })
  let stderr = ""
  child.stderr?.on("data", (chunk) => (stderr = (stderr + chunk).slice(-4000)))
  const [first] = /** @type {[{ url?: string, error?: string }]} */ (await Promise.race([
    once(child, "message"),
    once(child, "exit").then(([code]) => Promise.reject(new Error(`valgrind exited ${code} before the server was ready: ${stderr}`))),
  ]))
  if (!first.url) throw new Error(`the ${mode} server failed to start: ${first.error}`)
  return { child, url: first.url }
}

/**
 * Zeroes the counters, runs `requests` calls of `one`, dumps, and reads the dump's instruction total.
 * @param {number} pid
 * @param {string} dir
 * @param {() => Promise<unknown>} one
 */
async function counted(pid, dir, one) {
  await run("callgrind_control", ["-i", "on", String(pid)])
  // Some requests instrumented but not counted: what switching valgrind's instrumentation on sets off settles first.
  for (let i = 0; i < settle; i++) await one()
  await run("callgrind_control", ["-z", String(pid)])
  for (let i = 0; i < requests; i++) await one()
  const before = new Set(fs.readdirSync(dir))
  await run("callgrind_control", ["-d", String(pid)])
  const dump = fs.readdirSync(dir).find((name) => !before.has(name))
  if (dump === undefined) throw new Error("callgrind_control -d wrote no dump")
  await run("callgrind_control", ["-i", "off", String(pid)])
  const text = fs.readFileSync(path.join(dir, dump), "utf8")
  const total = /^(?:summary|totals): (\d+)/m.exec(text)
  if (!total) throw new Error(`no total in ${dump}`)
  return Number(total[1]) / requests
}

const version = (await run(node, ["--version"])).stdout.trim()
console.log(`node ${version}, ${warmup} warm-up and ${requests} counted requests of each kind, one at a time`)
/** @type {Record<string, { getTask: number, sendMessage: number }>} */
const perRequest = {}
for (const mode of modes) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `instructions-${mode}-`))
  const { child, url } = await start(mode, dir)
  try {
    const { id } = await sendAndComplete(url)
    for (let i = 0; i < warmup; i++) {
      await call(url, getTaskBody(id))
      await sendAndComplete(url)
    }
    const pid = /** @type {number} */ (child.pid)
    const getTask = await counted(pid, dir, () => call(url, getTaskBody(id)))
    const sendMessage = await counted(pid, dir, () => sendAndComplete(url))
    perRequest[mode] = { getTask, sendMessage }
    console.log(`${mode}: GetTask ${(getTask / 1000).toFixed(1)}k instructions, SendMessage→completed ${(sendMessage / 1000).toFixed(1)}k`)
  } finally {
    child.send({ stop: true })
    await once(child, "exit")
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
const off = perRequest.off
if (off) {
  for (const [mode, counts] of Object.entries(perRequest)) {
    if (mode === "off") continue
    console.log(`${mode}/off: GetTask ${(off.getTask / counts.getTask).toFixed(2)}×, SendMessage ${(off.sendMessage / counts.sendMessage).toFixed(2)}× (off's instructions over ${mode}'s)`)
  }
}
