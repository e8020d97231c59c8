// The observe phase (issue 15): what traces and metrics cost. GetTask and SendMessage→completed over JSON-RPC on
// server A (servers/toolnexus-observe.mjs) observed four ways, in interleaved rounds as the HTTP phase:
//   off      the OpenTelemetry API alone (no SDK registered), metrics off: every user's default
//   metrics  metrics: true
//   traces   the Node SDK registered (every span sampled, BatchSpanProcessor, an exporter that drops the spans)
//   on       both: the target row, on/off ≥ 0.85×
//   on10     both, the SDK sampling 10% of the traces, as a busy production runs it
//   als      off, with an AsyncLocalStorage entered once at start (as the SDK's context manager's first context.with
//            does): Node 20's price for propagating a context through every promise, which no span of ours causes
//   bare     the SDK registered without a context manager: its span work without AsyncLocalStorage (a cost probe)
//   base     the build from before the instrumentation (git archive of BENCH_OBSERVE_BASE, default the parent of
//            the commit that added lib/observe), served as "off": what the API alone costs against no instrumentation
// Then, in this process (no SDK registered), the API alone's cost per request measured directly: the calls a GetTask
// and a SendMessage make into lib/observe, timed over many iterations against the same work without them.
import { execFileSync } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import { startChild, stopChild } from "./child.mjs"
import { median } from "./stats.mjs"
import { getAndSendRounds, mediansOf } from "./rounds.mjs"

export const OBSERVE_SIDES = [
  { key: "off", label: "server A, the OpenTelemetry API alone (no SDK), metrics off" },
  { key: "on", label: "server A, metrics on and the Node SDK registered (BatchSpanProcessor, spans dropped)" },
  { key: "metrics", label: "server A, metrics on, no SDK" },
  { key: "traces", label: "server A, the Node SDK registered, metrics off" },
  { key: "on10", label: "server A, metrics on and the Node SDK sampling 10% of traces (ParentBased(TraceIdRatioBased(0.1)))" },
  { key: "als", label: "server A as off, with an AsyncLocalStorage entered once at start (Node 20's promise hooks then on)" },
  { key: "bare", label: "server A, the Node SDK registered without a context manager (spans made, never made active)" },
  { key: "base", label: "server A built from before the instrumentation (the API not called at all)" },
]
const SCENARIOS = ["GetTask", "SendMessage"]

/** @typedef {import("./rounds.mjs").RoundResult} RoundResult */
/** @typedef {{ key: string, label: string, child: import("node:child_process").ChildProcess, url: string }} Running */
/** @typedef {{ rate: number, cpu: number }} Ratio by rate, and by server CPU per request */

/**
 * @param {{
 *   settings: { seconds: number, rounds: number, connections: number, pipelining: number },
 *   here: string, log: (line: string) => void, scratch: string,
 * }} opts
 */
export async function observeRounds({ settings, here, log, scratch }) {
  const root = path.dirname(here)
  /** @type {Running[]} */
  const running = []
  try {
    const base = baseBuild(root, scratch, log)
    const baseArgs = base.dist === undefined ? [] : [base.dist]
    for (const side of OBSERVE_SIDES) {
      if (side.key === "base" && baseArgs.length === 0) continue
      const mode = side.key === "base" ? "off" : side.key
      const { child, info } = await startChild(path.join(here, "servers", "toolnexus-observe.mjs"), [mode, ...(side.key === "base" ? baseArgs : [])])
      running.push({ ...side, child, url: info.url })
    }
    log(`observe: servers up: ${running.map((s) => `${s.key} ${s.url}`).join(", ")}`)
    const samples = await getAndSendRounds({ running, settings, log, label: "observe" })
    // The metrics servers counted what they served: a check that the "on" rows measured metrics that work.
    /** @type {Record<string, number>} */
    const counted = {}
    for (const side of running.filter((s) => ["on", "on10", "metrics"].includes(s.key))) counted[side.key] = await countedRequests(side.url)
    const medians = mediansOf(samples)
    /** @type {Record<string, Record<"onOff" | "metricsOff" | "tracesOff" | "on10Off" | "alsOff" | "bareOff" | "offBase", Ratio | undefined> & { floor: ReturnType<typeof floorOf> }>} */
    const ratios = {}
    for (const scenario of SCENARIOS) {
      // Medians of per-round ratios (the two runs of a round are seconds apart): by rate, and by server CPU per request.
      /** @param {string} a @param {string} b @returns {Ratio | undefined} */
      const of = (a, b) => {
        const ra = samples[scenario][a]
        const rb = samples[scenario][b]
        if (!ra || !rb) return undefined
        return { rate: median(ra.map((r, i) => r.rps / rb[i].rps)), cpu: median(ra.map((r, i) => rb[i].cpuUsPerRequest / r.cpuUsPerRequest)) }
      }
      ratios[scenario] = {
        onOff: of("on", "off"),
        metricsOff: of("metrics", "off"),
        tracesOff: of("traces", "off"),
        on10Off: of("on10", "off"),
        alsOff: of("als", "off"),
        bareOff: of("bare", "off"),
        offBase: of("off", "base"),
        floor: floorOf(samples[scenario]),
      }
      /** @param {Ratio | undefined} r */
      const show = (r) => (r ? `${r.rate.toFixed(3)}× by rate, ${r.cpu.toFixed(3)}× by CPU` : "n/a")
      const r = ratios[scenario]
      log(
        `observe: ${scenario}: on/off ${show(r.onOff)}; metrics/off ${show(r.metricsOff)}; traces/off ${show(r.tracesOff)}; on10/off ${show(r.on10Off)}; ` +
          `als/off ${show(r.alsOff)}; bare/off ${show(r.bareOff)}; off/base ${show(r.offBase)}`,
      )
      if (r.floor) {
        log(
          `observe: ${scenario}: server CPU per request: off ${r.floor.offUs.toFixed(1)} µs; AsyncLocalStorage on adds ${r.floor.alsUs.toFixed(1)} µs, ` +
            `the SDK's spans without it ${r.floor.spansUs.toFixed(1)} µs: traces on cannot beat ${r.floor.ceiling.toFixed(3)}× by CPU, whatever our code costs`,
        )
      }
    }
    const apiAlone = await apiAloneCost(root)
    log(`observe: the API alone, measured in-process: ${apiAlone.getTaskNs.toFixed(0)} ns per GetTask, ${apiAlone.sendMessageNs.toFixed(0)} ns per SendMessage`)
    return { sides: OBSERVE_SIDES.filter((s) => running.some((r) => r.key === s.key)).map(({ key, label }) => ({ key, label })), base, samples, medians, ratios, counted, apiAlone }
  } finally {
    for (const side of running) await stopChild(side.child)
  }
}

/**
 * The build from before the instrumentation, in the scratch directory: its dist/index.js, or why there is none.
 * @param {string} root
 * @param {string} scratch
 * @param {(line: string) => void} log
 * @returns {{ commit?: string, dist?: string, skipped?: string }}
 */
function baseBuild(root, scratch, log) {
  let commit = process.env.BENCH_OBSERVE_BASE
  if (commit === "none") return { skipped: "BENCH_OBSERVE_BASE=none" }
  try {
    if (commit === undefined) {
      const added = execFileSync("git", ["log", "--diff-filter=A", "--format=%H", "--", "lib/observe/names.ts"], { cwd: root, encoding: "utf8" }).trim().split("\n").at(-1)
      commit = execFileSync("git", ["rev-parse", `${added}^`], { cwd: root, encoding: "utf8" }).trim()
    }
    const dir = path.join(scratch, "observe-base")
    fs.mkdirSync(dir, { recursive: true })
    execFileSync("sh", ["-c", `git archive ${commit} | tar -x -C "${dir}"`], { cwd: root })
    fs.symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"))
    log(`observe: building the base (${commit.slice(0, 7)}, before the instrumentation)`)
    execFileSync(process.execPath, [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], { cwd: dir, stdio: "inherit" })
    return { commit, dist: path.join(dir, "dist", "index.js") }
  } catch (err) {
    const why = (err instanceof Error ? err.message : String(err)).split("\n")[0]
    log(`observe: no base build (${why}); its rows are left out`)
    return { commit, skipped: why }
  }
}

/**
 * What tracing costs before any code of ours, by server CPU per request (medians of the rounds): Node 20's
 * AsyncLocalStorage once entered (als - off) plus the SDK's span work without it (bare - off, which also holds the
 * API calls of ours, measured apart at ~0.1-0.8 µs); the best "traces on / off" could be if ours cost nothing.
 * @param {Record<string, RoundResult[]>} runs
 */
function floorOf(runs) {
  if (!runs.off || !runs.als || !runs.bare) return undefined
  /** @param {string} key */
  const cpu = (key) => median(runs[key].map((r) => r.cpuUsPerRequest))
  const offUs = cpu("off")
  const alsUs = cpu("als") - offUs
  const spansUs = cpu("bare") - offUs
  return { offUs, alsUs, spansUs, ceiling: offUs / (offUs + Math.max(0, alsUs) + Math.max(0, spansUs)) }
}

/**
 * The sum of toolnexus_a2a_requests_total on a server with metrics.
 * @param {string} url
 */
async function countedRequests(url) {
  const text = await (await fetch(`${url}/metrics`)).text()
  return text
    .split("\n")
    .filter((line) => line.startsWith("toolnexus_a2a_requests_total{"))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0)
}

/**
 * The calls a GetTask and a SendMessage→completed make into lib/observe with no SDK registered, timed in this process
 * against the same awaits without them: ns per request, the median of 7 runs of 100k iterations.
 * @param {string} root
 */
async function apiAloneCost(root) {
  /** @type {typeof import("../dist/lib/observe/telemetry.js")} */
  const { Telemetry } = await import(path.join(root, "dist", "lib", "observe", "telemetry.js"))
  const telemetry = new Telemetry(undefined, "bench")
  /** @type {Record<string, string>} */
  const headers = { "content-type": "application/json" }
  /** @param {string} name */
  const lookup = (name) => headers[name]
  const work = async () => 1
  const getTask = async () => {
    const observed = telemetry.request("GetTask", "jsonrpc", "1.0", lookup)
    await observed.within(work)
    observed.answered("t", undefined, false)
  }
  const sendMessage = async () => {
    const observed = telemetry.request("SendMessage", "jsonrpc", "1.0", lookup)
    const parent = telemetry.here()
    await observed.within(work)
    telemetry.taskState("submitted")
    const run = telemetry.taskRun("t", "c", parent)
    await run.within(async () => {
      telemetry.taskState("working")
      const call = telemetry.modelCall("local", "local")
      await call.within(work)
      call.end({ inputTokens: 0, outputTokens: 0, totalTokens: 0 })
      telemetry.taskState("completed")
    })
    run.end("completed")
    observed.answered("t", undefined, false)
  }
  const bare = async () => {
    await work()
  }
  const bareSend = async () => {
    await work()
    await (async () => {
      await work()
    })()
  }
  /** @param {() => Promise<void>} fn @param {number} n */
  const time = async (fn, n) => {
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < n; i++) await fn()
    return Number(process.hrtime.bigint() - t0) / n
  }
  const N = 100_000
  /** @param {() => Promise<void>} fn @param {() => Promise<void>} without */
  const per = async (fn, without) => {
    await time(fn, N)
    await time(without, N)
    const diffs = []
    for (let i = 0; i < 7; i++) diffs.push((await time(fn, N)) - (await time(without, N)))
    return median(diffs)
  }
  return { getTaskNs: await per(getTask, bare), sendMessageNs: await per(sendMessage, bareSend), iterations: N }
}
