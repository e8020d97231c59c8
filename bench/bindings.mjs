// The bindings phase (issue 14): GetTask and SendMessage→completed over JSON-RPC, HTTP+JSON (REST) and gRPC, ours
// against the official SDK's servers of each binding, in interleaved rounds as the JSON-RPC phase (run.mjs's http).
//
// ours: servers/toolnexus.mjs (serve(), memory store, logger: false) with "bindings": REST on the JSON-RPC port,
// gRPC on an address of its own, both where its agent card says. The SDK: servers/sdk-bindings.mjs, one
// DefaultRequestHandler and InMemoryTaskStore with server C's echo executor behind its JSON-RPC and REST Express
// handlers and its gRPC service. The gRPC rows' ceilings: servers/bare-grpc.mjs, grpc-js answering fixed bytes, and
// servers/bare-h2.mjs, node:http2 answering the same bytes in a gRPC frame. HTTP
// load from autocannon (load.mjs), gRPC load from grpc-load.mjs; every answer must be a completed Task. A binding ours
// does not serve in this build is reported "not served", its rows empty.
import path from "node:path"
import { ask, startChild, stopChild, withChildCpu } from "./child.mjs"
import { grpcAnswerBytes, grpcCall, grpcLoad } from "./grpc-load.mjs"
import { getTaskBody, load, restSendAndComplete, restSendMessageBody, sendAndComplete, sendMessageBody } from "./load.mjs"
import { median } from "./stats.mjs"

/**
 * @typedef {import("./child.mjs").ChildProcess} ChildProcess
 * @typedef {import("./child.mjs").ChildMessage} ChildMessage
 * @typedef {import("./rounds.mjs").LoadSettings & { grpcChannels: number }} BindingSettings the knobs this phase reads
 * @typedef {import("./load.mjs").LoadResult & { firstFailure?: string }} BindingLoad one load run over a binding
 * @typedef {BindingLoad & { cpuUsPerRequest: number }} BindingRun a load run with the server's CPU per request
 * @typedef {{ rps: number, p50: number, p99: number, cpuUsPerRequest: number, clientCpuUsPerRequest: number, bad: number }} BindingMedian
 * @typedef {{ key: string, label: string, script: string, args: string[], fixedAnswers?: boolean }} Side
 * @typedef {Side & { child: ChildProcess, info: ChildMessage, endpoints: Record<string, string> }} RunningSide a side started, with the endpoint of each binding it serves
 * @typedef {{
 *   endpoint: (info: ChildMessage) => string | undefined,
 *   seed: (endpoint: string) => Promise<string>,
 *   load: (endpoint: string, scenario: string, taskId: string, seconds: number, settings: BindingSettings) => Promise<BindingLoad>,
 * }} BindingCalls how a binding is called: its endpoint in a server's info, a completed Task made over it, a load run
 */

export const BINDINGS = ["JSON-RPC", "HTTP+JSON", "gRPC"]
export const SCENARIOS = ["GetTask", "SendMessage"]
// In this order in odd rounds (ours next to the ceilings, as in the HTTP phase), reversed in even ones.
/** @type {Side[]} */
export const SIDES = [
  { key: "ours", label: "toolnexus serve(), memory store (logger: false)", script: "toolnexus.mjs", args: ["memory", "off", "bindings"] },
  // gRPC only: fixed answers, so it has no Task to make; it answers with the bytes ours (or the SDK) answered.
  { key: "bare", label: "bare @grpc/grpc-js, a fixed answer (the gRPC ceiling)", script: "bare-grpc.mjs", args: [], fixedAnswers: true },
  { key: "h2", label: "bare node:http2, a fixed gRPC frame, no gRPC library (the floor under any gRPC server on Node)", script: "bare-h2.mjs", args: [], fixedAnswers: true },
  { key: "sdk", label: "@a2a-js/sdk 1.3: Express (JSON-RPC, REST) and grpc-js (gRPC), InMemoryTaskStore", script: "sdk-bindings.mjs", args: [] },
]

/**
 * How a binding is called: a completed Task made over it, and a load run of a scenario against it.
 * @type {Record<string, BindingCalls>}
 */
const CALLS = {
  "JSON-RPC": {
    endpoint: (info) => info.url,
    seed: async (url) => (await sendAndComplete(url)).id,
    load: (url, scenario, taskId, seconds, settings) =>
      load({ url, body: scenario === "GetTask" ? getTaskBody(taskId) : sendMessageBody(), seconds, connections: settings.connections, pipelining: settings.pipelining }),
  },
  "HTTP+JSON": {
    // Ours serves REST on the JSON-RPC port: when its card does not (yet) say so, the routes are tried there.
    endpoint: (info) => info.rest ?? info.url,
    seed: async (base) => (await restSendAndComplete(base)).id,
    load: (base, scenario, taskId, seconds, settings) => {
      const { origin, pathname } = new URL(base)
      const prefix = pathname.replace(/\/$/, "")
      return load({
        url: origin,
        ...(scenario === "GetTask"
          ? { method: "GET", path: `${prefix}/tasks/${encodeURIComponent(taskId)}` }
          : { method: "POST", path: `${prefix}/message:send`, body: restSendMessageBody() }),
        seconds,
        connections: settings.connections,
        pipelining: settings.pipelining,
      })
    },
  },
  gRPC: {
    endpoint: (info) => info.grpc,
    seed: async (address) => (await grpcCall(address, "SendMessage")).id,
    load: (address, scenario, taskId, seconds, settings) =>
      grpcLoad({ address, name: scenario, arg: taskId, seconds, concurrency: settings.connections, channels: settings.grpcChannels }),
  },
}

/**
 * Starts both sides, finds which bindings each serves (a completed Task made over it), then per round: for each
 * binding and scenario, ours and the SDK back to back (ours first in odd rounds); medians over rounds.
 * @param {{ settings: BindingSettings, here: string, log: (line: string) => void }} opts
 */
export async function bindingRounds({ settings, here, log }) {
  /** @type {RunningSide[]} */
  const running = []
  try {
    for (const side of SIDES) {
      const { child, info } = await startChild(path.join(here, "servers", side.script), side.args)
      running.push({ ...side, child, info, endpoints: {} })
    }
    // Which bindings each side serves: an endpoint, and a blocking SendMessage over it answered with a completed Task.
    /** @type {Record<string, string[]>} */
    const served = {}
    /** @type {Record<string, Record<string, string>>} */
    const notServed = {}
    for (const side of running) {
      if (side.fixedAnswers) continue
      for (const binding of BINDINGS) {
        const endpoint = CALLS[binding].endpoint(side.info)
        /** @type {string | undefined} */
        let reason
        if (endpoint === undefined) reason = "no endpoint (the card declares none and serve() gave none)"
        else {
          try {
            await CALLS[binding].seed(endpoint)
          } catch (err) {
            reason = String(/** @type {{ message?: unknown } | undefined} */ (err)?.message ?? err).split("\n")[0].slice(0, 300)
          }
        }
        if (reason === undefined && endpoint !== undefined) side.endpoints[binding] = endpoint
        else (notServed[side.key] ??= {})[binding] = reason ?? "no endpoint"
      }
      served[side.key] = Object.keys(side.endpoints)
      log(
        `bindings: ${side.key} serves ${served[side.key].map((b) => `${b} ${side.endpoints[b]}`).join(", ") || "nothing"}` +
          Object.entries(notServed[side.key] ?? {})
            .map(([b, why]) => `; ${b} not served: ${why}`)
            .join(""),
      )
    }
    if (notServed.sdk) throw new Error(`bindings: the SDK's servers failed: ${JSON.stringify(notServed.sdk)}`)

    // A completed Task per side and binding for GetTask, made over that binding before every round: the SendMessage
    // rounds add enough Tasks that a bounded store (ours keeps 100k) drops the oldest.
    /** @type {Record<string, Record<string, string>>} */
    const seeded = {}
    const seed = async () => {
      for (const side of running) {
        if (side.fixedAnswers) continue
        for (const [binding, endpoint] of Object.entries(side.endpoints)) (seeded[side.key] ??= {})[binding] = await CALLS[binding].seed(endpoint)
      }
    }
    await seed()
    // The ceiling answers what ours answered over gRPC (the SDK's answers when ours does not serve gRPC).
    const [ours, sdk] = ["ours", "sdk"].map((key) => {
      const side = running.find((candidate) => candidate.key === key)
      if (side === undefined) throw new Error(`bindings: no side ${key}`)
      return side
    })
    const source = ours.endpoints.gRPC ? ours : sdk
    /** @param {string} name @param {string} [arg] */
    const answer = async (name, arg) => (await grpcAnswerBytes(source.endpoints.gRPC, name, arg)).toString("base64")
    const payload = { GetTask: await answer("GetTask", seeded[source.key].gRPC), SendMessage: await answer("SendMessage") }
    for (const fixed of running.filter((side) => side.fixedAnswers)) {
      await ask(fixed.child, { payload })
      await grpcCall(fixed.info.grpc, "GetTask", "any")
      await grpcCall(fixed.info.grpc, "SendMessage")
      fixed.endpoints.gRPC = fixed.info.grpc
      seeded[fixed.key] = { gRPC: "any" }
      log(`bindings: ${fixed.key} serves gRPC ${fixed.info.grpc}, answering ${source.key}'s answers`)
    }
    /** @param {RunningSide} side @param {string} binding @param {string} scenario @param {number} seconds */
    const runOnce = (side, binding, scenario, seconds) =>
      withChildCpu(side.child, () => CALLS[binding].load(side.endpoints[binding], scenario, seeded[side.key][binding], seconds, settings))

    log("bindings: warming up (1 s per server, binding and scenario)")
    for (const binding of BINDINGS) for (const scenario of SCENARIOS) for (const side of running) if (side.endpoints[binding]) await runOnce(side, binding, scenario, 1)

    /** @type {Record<string, Record<string, Record<string, BindingRun[]>>>} samples[binding][scenario][side.key] */
    const samples = {}
    for (let round = 1; round <= settings.rounds; round++) {
      await seed()
      const order = round % 2 === 1 ? running : running.toReversed()
      for (const binding of BINDINGS) {
        for (const scenario of SCENARIOS) {
          for (const side of order) {
            if (!side.endpoints[binding]) continue
            const result = await runOnce(side, binding, scenario, settings.seconds)
            ;(((samples[binding] ??= {})[scenario] ??= {})[side.key] ??= []).push(result)
            log(
              `round ${round} ${binding.padEnd(9)} ${scenario.padEnd(11)} ${side.key.padEnd(4)} ${result.rps.toFixed(0).padStart(6)} req/s  p99 ${result.p99.toFixed(1).padStart(6)} ms  ` +
                `server CPU ${result.cpuUsPerRequest.toFixed(0).padStart(4)} µs/req  load generator ${result.clientCpuUsPerRequest.toFixed(0).padStart(4)} µs/req${result.bad ? `  ${result.bad} bad answers${result.firstFailure ? ` (${result.firstFailure})` : ""}` : ""}`,
            )
          }
        }
      }
    }
    /** @type {Record<string, Record<string, Record<string, BindingMedian>>>} */
    const medians = {}
    for (const [binding, scenarios] of Object.entries(samples)) {
      for (const [scenario, sides] of Object.entries(scenarios)) {
        for (const [key, runs] of Object.entries(sides)) {
          ;((medians[binding] ??= {})[scenario] ??= {})[key] = {
            rps: median(runs.map((r) => r.rps)),
            p50: median(runs.map((r) => r.p50)),
            p99: median(runs.map((r) => r.p99)),
            cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest)),
            clientCpuUsPerRequest: median(runs.map((r) => r.clientCpuUsPerRequest)),
            bad: runs.reduce((sum, r) => sum + r.bad, 0),
          }
        }
      }
    }
    for (const binding of BINDINGS) {
      for (const scenario of SCENARIOS) {
        const m = medians[binding]?.[scenario]
        if (!m?.ours || !m?.sdk) continue
        const bareToo = ["bare", "h2"].map((key) => (m[key] ? `, ${key} ${m[key].rps.toFixed(0)} req/s (${m[key].cpuUsPerRequest.toFixed(0)} µs CPU)` : "")).join("")
        log(`bindings: ${binding} ${scenario}: ours ${m.ours.rps.toFixed(0)} req/s (${m.ours.cpuUsPerRequest.toFixed(0)} µs CPU), SDK ${m.sdk.rps.toFixed(0)} req/s (${m.sdk.cpuUsPerRequest.toFixed(0)} µs CPU)${bareToo}`)
      }
    }
    return {
      sides: SIDES.map(({ key, label }) => ({ key, label })),
      endpoints: Object.fromEntries(running.map((side) => [side.key, side.endpoints])),
      served,
      notServed,
      grpcChannels: settings.grpcChannels,
      samples,
      medians,
    }
  } finally {
    for (const side of running) await stopChild(side.child)
  }
}
