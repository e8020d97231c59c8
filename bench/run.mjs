// npm run bench: toolnexus against the official A2A SDK and a bare Fastify ceiling, in one interleaved run.
// Knobs (environment): BENCH_SECONDS (per load run, default 2), BENCH_ROUNDS (default 5),
// BENCH_CONNECTIONS (default 32), BENCH_FILE_ROUNDS (FileTaskStore against raw fs, default 8),
// BENCH_GROWTH (file-store sizes, default "1000,10000,100000"), BENCH_LIST_TASKS (file-store listing, default 10000),
// BENCH_PUSH_TASKS, the streaming phase's BENCH_STREAM_CHUNKS, BENCH_STREAM_CONNECTIONS, BENCH_TTFT_SAMPLES,
// BENCH_IDLE_STREAMS, the bindings phase's BENCH_GRPC_CHANNELS, and BENCH_ONLY (a comma-separated list of phases to
// run alone, printed, no report written).
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import fs from "node:fs"
import fsp from "node:fs/promises"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { bindingRounds } from "./bindings.mjs"
import { observeRounds } from "./observe.mjs"
import { ownAgentRounds } from "./own-agent.mjs"
import { sharedRounds } from "./shared.mjs"
import { steadyRows } from "./steady.mjs"
import { replicaRows } from "./replicas.mjs"
import { dropShared, runNames } from "./shared.mjs"
import { ask, killAll, startChild, stopChild, withChildCpu } from "./child.mjs"
import { completedTask } from "./fixtures.mjs"
import { call, getTaskBody, load, sendAndComplete, sendMessageBody } from "./load.mjs"
import { analyzeProfile, hotSpotGroups, profileIn, streamingHotSpotGroups } from "./profile.mjs"
import { codeVersion, writeReport } from "./report.mjs"
import { median, percentile } from "./stats.mjs"
import { alternatingRounds, mediansOf } from "./rounds.mjs"
import { FileTaskStore } from "../dist/index.js"

/**
 * @typedef {import("./child.mjs").ChildProcess} ChildProcess
 * @typedef {import("./child.mjs").ChildMessage} ChildMessage
 * @typedef {{ key: string, label: string, script: string, args: string[] }} Server one server of the HTTP phase
 * @typedef {{ addedMs: number[], modelFirstTokenMs: number[], peerFirstTokenMs: number[], firstTokenDelayMs: number, modelChunks: number, gapMs: number }} TtftRun
 *   one block of time-to-first-token samples, as streaming.mjs's ttft answers it
 * @typedef {{ events: number, streams: number, bad: number, seconds: number, eventsPerSecond: number, streamP50Ms: number, streamP99Ms: number, requests: number }} StreamLoad
 *   a streaming load run, as streaming.mjs's load answers it
 * @typedef {{ frames: number, kinds: { kind: string, count: number }[], finalState?: string, textMatches: boolean, appendsAfterFirst: boolean, lastChunkOnLast: boolean }} StreamCheck
 *   one stream parsed whole, as streaming.mjs's check answers it
 * @typedef {{ eventsPerSecond: number, cpuUsPerEvent: number, events: number, streams: number, bad: number, streamP50Ms: number, streamP99Ms: number }} StreamRound
 */

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.dirname(here)
const settings = {
  seconds: Number(process.env.BENCH_SECONDS ?? 2),
  rounds: Number(process.env.BENCH_ROUNDS ?? 5),
  connections: Number(process.env.BENCH_CONNECTIONS ?? 32),
  // The gRPC rows' connections (HTTP/2, each carrying its share of BENCH_CONNECTIONS calls in flight).
  grpcChannels: Number(process.env.BENCH_GRPC_CHANNELS ?? 4),
  pipelining: 1,
  fileSeconds: 1,
  fileRounds: Number(process.env.BENCH_FILE_ROUNDS ?? 8),
  growthSeconds: 2,
  growth: (process.env.BENCH_GROWTH ?? "1000,10000,100000").split(",").map(Number),
  listTasks: Number(process.env.BENCH_LIST_TASKS ?? 10_000),
  pushTasks: Number(process.env.BENCH_PUSH_TASKS ?? 500),
  streamChunks: Number(process.env.BENCH_STREAM_CHUNKS ?? 200),
  streamConnections: Number(process.env.BENCH_STREAM_CONNECTIONS ?? 16),
  ttftSamples: Number(process.env.BENCH_TTFT_SAMPLES ?? 300),
  ttftWarmup: 20,
  ttftModelChunks: 20,
  idleStreams: Number(process.env.BENCH_IDLE_STREAMS ?? 1000),
  profileSeconds: 5,
  // The steady phase: how long each store is held at half its peak rate.
  steadySeconds: Number(process.env.BENCH_STEADY_SECONDS ?? 4),
  // The replicas phase: Tasks canceled on one replica while working on the other.
  cancels: Number(process.env.BENCH_CANCELS ?? 100),
  // The storeList phase: Tasks in each store, and the stores (a comma-separated list of memory, file, postgres, nats).
  storeListTasks: Number(process.env.BENCH_STORE_LIST_TASKS ?? 100_000),
  storeListStores: (process.env.BENCH_STORE_LIST_STORES ?? "memory,file,postgres,nats").split(","),
  // The NATS store reads every Task on each list() (seconds per call at 100k): fewer Tasks there, unless asked.
  storeListNatsTasks: Number(process.env.BENCH_STORE_LIST_NATS_TASKS ?? 10_000),
}

/** @type {Server[]} */
const SERVERS = [
  { key: "A", label: "toolnexus, memory store (logger: false)", script: "toolnexus.mjs", args: ["memory", "off"] },
  { key: "A+log", label: "toolnexus, memory store, default logging (info) to /dev/null", script: "toolnexus.mjs", args: ["memory", "devnull"] },
  { key: "B", label: "toolnexus, file store (logger: false)", script: "toolnexus.mjs", args: ["file:<dir>", "off"] },
  { key: "C", label: "@a2a-js/sdk 1.3 Express + InMemoryTaskStore", script: "sdk.mjs", args: [] },
  { key: "D", label: "bare Fastify route, task-sized JSON (ceiling)", script: "bare.mjs", args: [] },
]
const SCENARIOS = ["GetTask", "SendMessage"]
const RUN_ORDER = ["A", "D", "A+log", "B", "C"]

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "toolnexus-bench-"))
const log = (/** @type {unknown[]} */ ...parts) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}]`, ...parts)

function cleanUp() {
  killAll()
  fs.rmSync(scratch, { recursive: true, force: true })
}
process.on("exit", killAll)
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    cleanUp()
    process.exit(130)
  })
}

// The phases in the order a full run takes them, by their key in results.json.
/** @type {Record<string, () => Promise<unknown>>} */
const PHASES = {
  http: httpRounds,
  bindings: () => bindingRounds({ settings, here, log }),
  shared: () => sharedRounds({ settings, here, log }),
  steady: () => steadyRows({ settings, here, log, scratch }),
  replicas: () => replicaRows({ settings, here, log }),
  storeList: storeListing,
  observe: () => observeRounds({ settings, here, log, scratch }),
  ownAgent: () => ownAgentRounds({ settings, here, log }),
  fileStore: fileStoreOps,
  memory: memoryPerTasks,
  fileList: fileStoreList,
  push: pushDelivery,
  streaming: streamingRows,
  growth: fileStoreGrowth,
  profiles,
}
// BENCH_ONLY=streaming (or a list, "push,streaming"): only those phases, their results printed and written to
// <tmp>/toolnexus-bench-only.json; no report is written.
const only = process.env.BENCH_ONLY?.split(",").map((name) => name.trim()).filter(Boolean)

const started = performance.now()
try {
  /** @type {{ settings: typeof settings, startedAt: string, commit: string, loadAverage: { start: number, end?: number }, wallSeconds?: number, [phase: string]: unknown }} */
  const results = { settings, startedAt: new Date().toISOString(), commit: codeVersion(root), loadAverage: { start: os.loadavg()[0] } }
  if (only) {
    const unknown = only.filter((name) => !(name in PHASES))
    if (unknown.length > 0) throw new Error(`BENCH_ONLY: no phase ${unknown.join(", ")} (phases: ${Object.keys(PHASES).join(", ")})`)
    for (const name of only) results[name] = await PHASES[name]()
    const partial = Object.fromEntries(only.map((name) => [name, results[name]]))
    console.log(JSON.stringify(partial, (key, value) => (Array.isArray(value) && value.length > 40 ? `[${value.length} values]` : value), 2))
    // Whole, for a look at every sample: outside the checkout, so it is never mistaken for a run's results.
    const out = path.join(os.tmpdir(), "toolnexus-bench-only.json")
    fs.writeFileSync(out, JSON.stringify(results, null, 2) + "\n")
    log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s (BENCH_ONLY=${only.join(",")}: no report written; results in ${out})`)
  } else {
    for (const [name, phase] of Object.entries(PHASES)) results[name] = await phase()
    const wallSeconds = (performance.now() - started) / 1000
    results.wallSeconds = wallSeconds
    results.loadAverage.end = os.loadavg()[0]
    // Every phase has run: the results have the shape report.mjs reads.
    const summary = await writeReport(/** @type {import("./report.mjs").BenchResults} */ (/** @type {unknown} */ (results)), { root, here })
    console.log("\n" + summary)
    log(`done in ${wallSeconds.toFixed(0)} s; wrote bench/results.md and bench/results.json`)
  }
} catch (err) {
  console.error(err)
  process.exitCode = 1
} finally {
  cleanUp()
}

/** Starts every server, seeds each with a completed Task, then A B C D A B C D... per scenario; medians over rounds. */
async function httpRounds() {
  /** @type {(Server & { child: ChildProcess, url: string })[]} */
  const running = []
  try {
    for (const server of SERVERS) {
      const args = server.args.map((arg) => arg.replace("<dir>", path.join(scratch, "b-tasks")))
      const { child, info } = await startChild(path.join(here, "servers", server.script), args)
      running.push({ ...server, child, url: info.url })
    }
    log(`servers up: ${running.map((s) => `${s.key} ${s.url}`).join(", ")}`)
    /** @param {string} key */
    const serverOf = (key) => {
      const server = running.find((s) => s.key === key)
      if (server === undefined) throw new Error(`bench: no server ${key}`)
      return server
    }
    const a = serverOf("A")
    // A completed Task for GetTask on each server, made anew before every round: the SendMessage rounds add enough
    // Tasks that a bounded store (ours keeps 100k) drops the oldest.
    /** @type {Record<string, string>} */
    const seeded = {}
    const seed = async () => {
      for (const server of running) if (server.key !== "D") seeded[server.key] = (await sendAndComplete(server.url)).id
    }
    await seed()
    // The ceiling answers exactly what our GetTask answers.
    const answer = await call(a.url, getTaskBody(seeded.A))
    await ask(serverOf("D").child, { payload: answer })
    /** @type {Record<string, (server: { key: string }) => string>} */
    const bodies = {
      GetTask: (server) => getTaskBody(seeded[server.key] ?? seeded.A),
      SendMessage: () => sendMessageBody(),
    }
    /** @param {(typeof running)[number]} server @param {string} scenario @param {number} seconds */
    const runOnce = (server, scenario, seconds) =>
      withChildCpu(server.child, () =>
        load({ url: server.url, body: bodies[scenario](server), seconds, connections: settings.connections, pipelining: settings.pipelining }),
      )

    log("warming up (1 s per server and scenario)")
    for (const scenario of SCENARIOS) for (const server of running) await runOnce(server, scenario, 1)

    // Ours next to the ceiling; every other round in reverse order, so a drift in the machine's speed favours none.
    const runOrder = RUN_ORDER.map(serverOf)
    const samples = await alternatingRounds({ sides: runOrder, scenarios: SCENARIOS, rounds: settings.rounds, seconds: settings.seconds, runOnce, log, before: seed })
    const medians = mediansOf(samples)
    return { servers: SERVERS.map(({ key, label }) => ({ key, label })), answerBytes: JSON.stringify(answer).length, samples, medians }
  } finally {
    for (const server of running) await stopChild(server.child)
  }
}

/** FileTaskStore save/get against the raw fs ceilings, in a child of its own. */
async function fileStoreOps() {
  log("FileTaskStore ops vs raw fs ceilings (16 concurrent, 256 ids)")
  const dir = path.join(scratch, "file-ops")
  const { child, info } = await startChild(path.join(here, "file-store.mjs"), [dir, String(settings.fileSeconds), String(settings.fileRounds)], { timeoutMs: 300_000 })
  await stopChild(child)
  await fsp.rm(dir, { recursive: true, force: true })
  return info
}

/** Heap per 100k Tasks, in a child with --expose-gc. */
async function memoryPerTasks() {
  log("heap per 100k tasks (child with --expose-gc)")
  const { child, info } = await startChild(path.join(here, "memory.mjs"), ["100000"], { execArgv: ["--expose-gc"], timeoutMs: 300_000 })
  await stopChild(child)
  return info
}

/** FileTaskStore.list at BENCH_LIST_TASKS Tasks: a context lookup, a ListTasks page, the index's heap; child with --expose-gc. */
async function fileStoreList() {
  log(`FileTaskStore.list at ${settings.listTasks} tasks (child with --expose-gc)`)
  const dir = path.join(scratch, "file-list")
  const { child, info } = await startChild(path.join(here, "file-list.mjs"), [dir, String(settings.listTasks), String(settings.rounds * 2)], {
    execArgv: ["--expose-gc"],
    timeoutMs: 600_000,
  })
  await stopChild(child)
  await fsp.rm(dir, { recursive: true, force: true })
  log(`file store at ${info.count} tasks: context lookup ${info.contextMs.toFixed(2)} ms, ListTasks page ${info.pageMs.toFixed(2)} ms, index ${info.heapPerTask.toFixed(0)} B/task`)
  return info
}

/** ListTasks, filtered by context and paged, on every store holding BENCH_STORE_LIST_TASKS Tasks: one child per store (list-stores.mjs). */
async function storeListing() {
  const rows = []
  const names = runNames("ls")
  const dir = path.join(scratch, "store-list")
  try {
    for (const kind of settings.storeListStores) {
      const where = kind === "file" ? dir : kind === "postgres" ? names.table : names.bucket
      try {
        log(`ListTasks on the ${kind} store`)
        const count = kind === "nats" ? settings.storeListNatsTasks : settings.storeListTasks
        const { child, info } = await startChild(path.join(here, "list-stores.mjs"), [kind, where, String(count), String(settings.rounds * 2)], { timeoutMs: 900_000 })
        await stopChild(child)
        rows.push(info)
        log(
          `${kind} store at ${info.count} tasks (seeded in ${info.seedSeconds.toFixed(1)} s): context page 1 ${info.contextPage1Ms.toFixed(2)} ms, page 3 ${info.contextPage3Ms.toFixed(2)} ms; ` +
            `unfiltered page 1 ${info.allPage1Ms.toFixed(2)} ms, page 2 ${info.allPage2Ms.toFixed(2)} ms (first call ${info.firstListMs.toFixed(0)} ms)`,
        )
      } catch (err) {
        rows.push({ kind, error: firstLine(err) })
        log(`${kind} store: ${firstLine(err)}`)
      }
    }
    return { rows }
  } finally {
    await fsp.rm(dir, { recursive: true, force: true })
    await dropShared(names)
  }
}

/** Push notifications to a local receiver: ours through the outbox against the SDK's sender, and save-to-webhook latency. */
async function pushDelivery() {
  log(`push notifications: ${settings.pushTasks} tasks x 4 state changes to a local receiver`)
  const dir = path.join(scratch, "push")
  const { child, info } = await startChild(path.join(here, "push.mjs"), [dir, String(settings.pushTasks), "4", "500", String(settings.rounds)], { timeoutMs: 600_000 })
  await stopChild(child)
  await fsp.rm(dir, { recursive: true, force: true })
  log(
    `push: ours (memory) ${info.memoryPerSecond.toFixed(0)}/s${info.filePerSecond === undefined ? "" : `, ours (file) ${info.filePerSecond.toFixed(0)}/s`}, SDK ${info.sdkPerSecond.toFixed(0)}/s; ` +
      `state change to webhook p50 ${info.latencyP50Ms.toFixed(2)} ms, p99 ${info.latencyP99Ms.toFixed(2)} ms; ` +
      `CPU per notification ${info.memoryCpuUs.toFixed(0)} / ${info.fileCpuUs?.toFixed(0) ?? "n/a"} / ${info.sdkCpuUs.toFixed(0)} µs`,
  )
  return info
}

/**
 * Token streaming (issue 13), with the peer and a fake OpenAI-style model in one child (streaming.mjs) and each
 * server in its own: the first token's delay through our server, events/s through SendStreamingMessage against the
 * SDK's streaming server (alternating rounds, server CPU per event), a --cpu-prof of ours under that load, and the
 * memory an idle open stream holds.
 */
async function streamingRows() {
  /** @type {Record<string, any>} the phase's results, by row: ttft, checks, rounds, ours, sdk, profile, idle... */
  const out = {}
  /** @type {ChildProcess[]} */
  const running = []
  /** @param {string} script @param {string[]} [args] @param {Parameters<typeof startChild>[2]} [opts] */
  const start = async (script, args = [], opts = {}) => {
    const started = await startChild(path.join(here, script), args, opts)
    running.push(started.child)
    return started
  }
  const minutes = (/** @type {number} */ n) => n * 60_000
  try {
    const peer = await start("streaming.mjs", [String(settings.ttftModelChunks)])

    // 1. Time to first token: ours relaying a fake OpenAI endpoint that streams, and a bare relay (the floor), in
    // alternating blocks of sequential streams.
    log(`streaming: time to first token through toolnexus and a bare relay (${settings.ttftSamples} sequential streams each, after ${settings.ttftWarmup} warm-ups)`)
    const relays = [
      { key: "ours", ...(await start("servers/toolnexus-stream.mjs", ["openai", peer.info.modelUrl])) },
      { key: "bare", ...(await start("servers/bare-relay.mjs", [peer.info.modelUrl])) },
    ]
    // Two shapes of answer: the rest of the chunks right behind the first (the row's figure: a fast model, a few chunks
    // reach the server together), and the first alone (the next one ALONE_GAP_MS later: the server's own path).
    const BLOCKS = 3
    const ALONE_GAP_MS = 3
    const variants = [
      { key: "", gapMs: 0 },
      { key: "Alone", gapMs: ALONE_GAP_MS },
    ]
    /** @type {Record<string, TtftRun[]>} */
    const taken = Object.fromEntries(variants.flatMap((v) => relays.map((r) => [`${r.key}${v.key}`, []])))
    for (let block = 0; block < BLOCKS; block++) {
      for (const relay of block % 2 === 0 ? relays : relays.toReversed()) {
        for (const variant of variants) {
          const samples = Math.ceil(settings.ttftSamples / BLOCKS)
          const warmup = block === 0 && variant.gapMs === 0 ? settings.ttftWarmup : 0
          taken[`${relay.key}${variant.key}`].push(/** @type {TtftRun} */ (await ask(peer.child, { ttft: { url: relay.info.url, samples, warmup, gapMs: variant.gapMs } }, minutes(5))))
        }
      }
    }
    for (const relay of relays) await stopChild(relay.child)
    /** @param {TtftRun[]} blocks */
    const ttftOf = (blocks) => {
      const added = blocks.flatMap((b) => b.addedMs)
      return {
        samples: added.length,
        p50Ms: percentile(added, 50),
        p90Ms: percentile(added, 90),
        p99Ms: percentile(added, 99),
        maxMs: Math.max(...added),
        modelFirstTokenP50Ms: percentile(blocks.flatMap((b) => b.modelFirstTokenMs), 50),
        peerFirstTokenP50Ms: percentile(blocks.flatMap((b) => b.peerFirstTokenMs), 50),
        addedMs: added,
      }
    }
    out.ttft = { ...ttftOf(taken.ours), warmup: settings.ttftWarmup, blocks: BLOCKS, firstTokenDelayMs: taken.ours[0].firstTokenDelayMs, modelChunks: taken.ours[0].modelChunks }
    out.ttftBare = ttftOf(taken.bare)
    out.ttftAlone = { ...ttftOf(taken.oursAlone), gapMs: ALONE_GAP_MS }
    out.ttftAloneBare = ttftOf(taken.bareAlone)
    const p50p99 = (/** @type {{ p50Ms: number, p99Ms: number }} */ t) => `p50 ${t.p50Ms.toFixed(3)} ms, p99 ${t.p99Ms.toFixed(3)} ms`
    log(`streaming: first token at the peer minus at the model: ours ${p50p99(out.ttft)}; bare relay ${p50p99(out.ttftBare)}`)
    log(`streaming: the same, the next chunk ${ALONE_GAP_MS} ms behind the first: ours ${p50p99(out.ttftAlone)}; bare relay ${p50p99(out.ttftAloneBare)}`)

    // 2. Events per second: ours and the SDK, the same events per Task, alternating rounds.
    const chunks = String(settings.streamChunks)
    const started = [
      { key: "ours", ...(await start("servers/toolnexus-stream.mjs", ["chunks", chunks])) },
      { key: "sdk", ...(await start("servers/sdk-stream.mjs", [chunks])) },
    ]
    /** @type {{ key: string, child: ChildProcess, info: ChildMessage, check: StreamCheck }[]} */
    const sides = []
    for (const side of started) sides.push({ ...side, check: /** @type {StreamCheck} */ (await ask(peer.child, { check: { url: side.info.url, expectChunks: settings.streamChunks } })) })
    const [ours, sdk] = sides
    const shape = (/** @type {StreamCheck} */ check) => JSON.stringify({ frames: check.frames, kinds: check.kinds, finalState: check.finalState, text: check.textMatches, appends: check.appendsAfterFirst, last: check.lastChunkOnLast })
    out.equivalent = shape(ours.check) === shape(sdk.check) && ours.check.textMatches && ours.check.appendsAfterFirst && ours.check.lastChunkOnLast
    out.checks = { ours: ours.check, sdk: sdk.check }
    log(`streaming: per Task ${ours.check.frames} events from ours, ${sdk.check.frames} from the SDK (${ours.check.kinds.map((k) => `${k.count} ${k.kind}`).join(", ")})${out.equivalent ? "" : ": **NOT the same events**"}`)
    /** @param {(typeof sides)[number]} side @param {number} seconds */
    const runOnce = (side, seconds) =>
      withChildCpu(side.child, async () =>
        /** @type {StreamLoad} */ (await ask(peer.child, { load: { url: side.info.url, connections: settings.streamConnections, seconds, expectFrames: side.check.frames } }, minutes(2))),
      )
    for (const side of sides) await runOnce(side, 1)
    /** @type {Record<string, StreamRound[]>} */
    const rounds = { ours: [], sdk: [] }
    out.rounds = rounds
    for (let round = 1; round <= settings.rounds; round++) {
      for (const side of round % 2 === 1 ? sides : sides.toReversed()) {
        const run = await runOnce(side, settings.seconds)
        rounds[side.key].push({ eventsPerSecond: run.eventsPerSecond, cpuUsPerEvent: run.cpuUsPerRequest, events: run.events, streams: run.streams, bad: run.bad, streamP50Ms: run.streamP50Ms, streamP99Ms: run.streamP99Ms })
        log(
          `round ${round} SendStreamingMessage ${side.key.padEnd(4)} ${run.eventsPerSecond.toFixed(0).padStart(7)} events/s  ${run.streams} streams  ` +
            `stream p50 ${run.streamP50Ms.toFixed(1)} ms  server CPU ${run.cpuUsPerRequest.toFixed(1)} µs/event${run.bad ? `  ${run.bad} bad streams` : ""}`,
        )
      }
    }
    for (const side of sides) {
      const rows = rounds[side.key]
      out[side.key] = {
        eventsPerSecond: median(rows.map((r) => r.eventsPerSecond)),
        cpuUsPerEvent: median(rows.map((r) => r.cpuUsPerEvent)),
        streamP50Ms: median(rows.map((r) => r.streamP50Ms)),
        bad: rows.reduce((sum, r) => sum + r.bad, 0),
      }
      await stopChild(side.child)
    }

    // Where our server's time goes under that load.
    log("streaming: profiling ours under the events/s load (--cpu-prof)")
    const dir = path.join(scratch, "profile-streaming")
    fs.mkdirSync(dir)
    const profiled = await start("servers/toolnexus-stream.mjs", ["chunks", chunks], { execArgv: ["--cpu-prof", "--cpu-prof-dir", dir, "--cpu-prof-interval", "250"] })
    const loadProfiled = async (/** @type {number} */ seconds) => /** @type {StreamLoad} */ (await ask(peer.child, { load: { url: profiled.info.url, connections: settings.streamConnections, seconds, expectFrames: ours.check.frames } }, minutes(2)))
    await loadProfiled(1)
    const sinceUs = (await ask(profiled.child, { mark: {} })).atUs
    const run = await loadProfiled(settings.profileSeconds)
    await stopChild(profiled.child)
    const analysis = analyzeProfile(profileIn(dir), { root, sinceUs, groups: streamingHotSpotGroups(root) })
    out.profile = { run: { eventsPerSecond: run.eventsPerSecond, streams: run.streams, bad: run.bad }, ...analysis, self: analysis.self.slice(0, 25), categories: analysis.categories.slice(0, 12) }

    // 3. Idle streams: Tasks whose model waits, one SubscribeToTask stream held open on each.
    const n = settings.idleStreams
    log(`streaming: ${n} idle open streams on one toolnexus server (child with --expose-gc)`)
    const caps = { maxStreams: n + 16, maxStreamsPerPrincipal: n + 16, maxRunningTasks: n, maxQueuedTasks: n }
    const waiting = await start("servers/toolnexus-stream.mjs", ["wait", "0", JSON.stringify(caps)], { execArgv: ["--expose-gc"] })
    const memory = () => ask(waiting.child, { memory: {} })
    const settle = () => new Promise((resolve) => setTimeout(resolve, 500))
    const before = await memory()
    await ask(peer.child, { tasks: { url: waiting.info.url, count: n } }, minutes(2))
    await settle()
    const withTasks = await memory()
    const opened = await ask(peer.child, { subscribe: {} }, minutes(2))
    await settle()
    const withStreams = await memory()
    await ask(waiting.child, { release: {} })
    const drained = await ask(peer.child, { drain: {} }, minutes(2))
    await stopChild(waiting.child)
    out.idle = {
      streams: opened.open,
      completed: drained.completed,
      gc: withStreams.gc,
      heapPerTask: (withTasks.heapUsed - before.heapUsed) / n,
      rssPerTask: (withTasks.rss - before.rss) / n,
      heapPerStream: (withStreams.heapUsed - withTasks.heapUsed) / n,
      rssPerStream: (withStreams.rss - withTasks.rss) / n,
      externalPerStream: (withStreams.external - withTasks.external) / n,
      memory: { before, withTasks, withStreams },
    }
    log(
      `streaming: ${opened.open} idle streams: ${out.idle.heapPerStream.toFixed(0)} B heap and ${out.idle.rssPerStream.toFixed(0)} B RSS per stream ` +
        `(a waiting Task without a stream: ${out.idle.heapPerTask.toFixed(0)} B heap); ${drained.completed} of ${drained.streams} read to completed after the release`,
    )
    log(
      `streaming: events/s ours ${out.ours.eventsPerSecond.toFixed(0)} (${out.ours.cpuUsPerEvent.toFixed(1)} µs CPU/event), SDK ${out.sdk.eventsPerSecond.toFixed(0)} (${out.sdk.cpuUsPerEvent.toFixed(1)} µs CPU/event)`,
    )
    return out
  } finally {
    for (const child of running) await stopChild(child)
  }
}

/**
 * GetTask on a file-store server as its directory grows. The files are written straight into
 * the directory (no fsync: the reads are what is measured), named as FileTaskStore names them.
 */
async function fileStoreGrowth() {
  const dir = path.join(scratch, "growth")
  const namer = new FileTaskStore(dir)
  const template = completedTask()
  /** @type {string[]} */
  const ids = []
  /** @type {{ size: number, writeSeconds: number, rps: number, p50: number, p99: number, cpuUsPerRequest: number, bad: number }[]} */
  const rows = []
  /** @type {Awaited<ReturnType<typeof startServerTimed>> | undefined} */
  let server = await startServerTimed(dir)
  const emptyStartMs = server.startMs
  try {
    for (const size of settings.growth) {
      const t0 = performance.now()
      await writeTaskFiles(namer, template, ids, size)
      flushToDisk()
      const writeSeconds = (performance.now() - t0) / 1000
      // Random ids from the whole directory, fixed before the run so the load costs the same at every size.
      const bodies = Array.from({ length: 4096 }, () => getTaskBody(ids[Math.floor(Math.random() * ids.length)]))
      await load({ url: server.url, bodies, seconds: 1, connections: settings.connections })
      const runs = []
      for (let round = 0; round < settings.rounds; round++) {
        const { url } = server
        runs.push(await withChildCpu(server.child, () => load({ url, bodies, seconds: settings.growthSeconds, connections: settings.connections })))
      }
      const row = {
        size,
        writeSeconds,
        rps: median(runs.map((r) => r.rps)),
        p50: median(runs.map((r) => r.p50)),
        p99: median(runs.map((r) => r.p99)),
        cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest)),
        bad: runs.reduce((sum, r) => sum + r.bad, 0),
      }
      rows.push(row)
      log(`file store with ${size} tasks: GetTask ${row.rps.toFixed(0)} req/s, p99 ${row.p99} ms, server CPU ${row.cpuUsPerRequest.toFixed(0)} µs/req (files written in ${writeSeconds.toFixed(1)} s)`)
    }
    // A restart on the full directory: start-up recovery reads every Task file.
    await stopChild(server.child)
    server = undefined
    const t0 = performance.now()
    /** @type {string | undefined} */
    let fullStartError
    try {
      server = await startServerTimed(dir)
    } catch (err) {
      fullStartError = firstLine(err)
    }
    const fullStartMs = server?.startMs ?? performance.now() - t0
    log(
      `file-store server start on ${ids.length} tasks: ${fullStartError ? `FAILED after ${fullStartMs.toFixed(0)} ms: ${fullStartError}` : `${fullStartMs.toFixed(0)} ms`}` +
        ` (on an empty directory: ${emptyStartMs.toFixed(0)} ms)`,
    )
    return { rows, emptyStartMs, fullStartMs, fullStartError, fullSize: ids.length }
  } finally {
    if (server) await stopChild(server.child)
    await fsp.rm(dir, { recursive: true, force: true })
  }
}

/** @param {string} dir */
async function startServerTimed(dir) {
  const t0 = performance.now()
  const { child, info } = await startChild(path.join(here, "servers", "toolnexus.mjs"), [`file:${dir}`, "off"], { timeoutMs: 300_000 })
  return { child, url: info.url, startMs: performance.now() - t0 }
}

/** Writes dirty pages out now (sync(1)), so the kernel's writeback of the files just written does not run during the reads. */
function flushToDisk() {
  try {
    execFileSync("sync", { stdio: "ignore" })
  } catch {
    // No sync command here: the reads may then share the machine with writeback.
  }
}

/**
 * The error's message without the stack, e.g. a child's "failed to start: FastifyError: ...".
 * @param {unknown} err
 */
function firstLine(err) {
  return String(/** @type {{ message?: unknown } | undefined} */ (err)?.message ?? err).split("\n")[0]
}

/**
 * @param {FileTaskStore} namer names the files as the store does
 * @param {{ id: string }} template the Task written, its id replaced
 * @param {string[]} ids the ids written so far; grows to `size`
 * @param {number} size
 */
async function writeTaskFiles(namer, template, ids, size) {
  const text = JSON.stringify(template)
  let next = ids.length
  const writer = async () => {
    while (next < size) {
      next++
      const id = randomUUID()
      ids.push(id)
      // The template's text with this id: a Task as the runner saves it.
      await fsp.writeFile(namer.fileFor(id), text.replaceAll(template.id, id))
    }
  }
  await Promise.all(Array.from({ length: 64 }, writer))
}

/** --cpu-prof on server A during GetTask, then during SendMessage; start-up and warm-up are left out. */
async function profiles() {
  /** @type {Record<string, object>} */
  const out = {}
  for (const scenario of SCENARIOS) {
    log(`profiling server A under ${scenario} (--cpu-prof)`)
    const dir = path.join(scratch, `profile-${scenario}`)
    fs.mkdirSync(dir)
    const { child, info } = await startChild(path.join(here, "servers", "toolnexus.mjs"), ["memory", "off"], {
      execArgv: ["--cpu-prof", "--cpu-prof-dir", dir, "--cpu-prof-interval", "250"],
    })
    let run
    let sinceUs
    try {
      const id = (await sendAndComplete(info.url)).id
      const body = scenario === "GetTask" ? getTaskBody(id) : sendMessageBody()
      await load({ url: info.url, body, seconds: 1, connections: settings.connections })
      sinceUs = (await ask(child, { mark: {} })).atUs
      run = await load({ url: info.url, body, seconds: settings.profileSeconds, connections: settings.connections })
    } finally {
      await stopChild(child)
    }
    const analysis = analyzeProfile(profileIn(dir), { root, sinceUs, groups: hotSpotGroups(root) })
    out[scenario] = { run, ...analysis, self: analysis.self.slice(0, 25), categories: analysis.categories.slice(0, 12) }
  }
  return out
}
