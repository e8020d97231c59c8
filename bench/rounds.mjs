import { withChildCpu } from "./child.mjs"
import { getTaskBody, load, sendAndComplete, sendMessageBody } from "./load.mjs"
import { median } from "./stats.mjs"

/**
 * One run of a side on a scenario: a load result with the server's CPU per request.
 * @typedef {{ rps: number, p50: number, p99: number, requests: number, bad: number, cpuUsPerRequest: number }} RoundResult
 * @typedef {Record<string, Record<string, RoundResult[]>>} Samples samples[scenario][side.key]: the runs in round order
 * @typedef {{ seconds: number, rounds: number, connections: number, pipelining: number }} LoadSettings the load knobs a phase reads
 */

/**
 * The interleaved rounds the load phases share: each round runs every scenario on every side, in the sides' order in
 * odd rounds and the reverse in even ones, so a side is never always first or last; `before` runs ahead of each round
 * (reseeding a Task to read, say). Logs a line per run under `label`; returns the runs as samples[scenario][side.key].
 * @template {{ key: string }} Side
 * @param {{
 *   sides: Side[], scenarios: string[], rounds: number, seconds: number,
 *   runOnce: (side: Side, scenario: string, seconds: number) => Promise<RoundResult>,
 *   log: (line: string) => void, label?: string, before?: () => Promise<void>,
 * }} opts
 * @returns {Promise<Samples>}
 */
export async function alternatingRounds({ sides, scenarios, rounds, seconds, runOnce, log, label, before }) {
  /** @type {Samples} */
  const samples = {}
  for (let round = 1; round <= rounds; round++) {
    await before?.()
    const order = round % 2 === 1 ? sides : sides.toReversed()
    for (const scenario of scenarios) {
      for (const side of order) {
        const result = await runOnce(side, scenario, seconds)
        ;((samples[scenario] ??= {})[side.key] ??= []).push(result)
        log(
          `round ${round} ${label ? `${label} ` : ""}${scenario.padEnd(11)} ${side.key.padEnd(7)} ${result.rps.toFixed(0).padStart(6)} req/s  p99 ${String(result.p99).padStart(4)} ms  ` +
            `server CPU ${result.cpuUsPerRequest.toFixed(0).padStart(5)} µs/req${result.bad ? `  ${result.bad} bad answers` : ""}`,
        )
      }
    }
  }
  return samples
}

/**
 * GetTask and SendMessage→completed over JSON-RPC against servers running in child processes, in alternating rounds:
 * each server is seeded with a completed Task to read (again before every round), warmed 1 s per server and scenario,
 * then loaded `settings.seconds` per run with its CPU per request measured. The observe and ownAgent phases use it.
 * @template {{ key: string, child: import("node:child_process").ChildProcess, url: string }} Side
 * @param {{ running: Side[], settings: LoadSettings, log: (line: string) => void, label: string }} opts
 * @returns {Promise<Samples>}
 */
export async function getAndSendRounds({ running, settings, log, label }) {
  /** @type {Record<string, string>} */
  const seeded = {}
  const seed = async () => {
    for (const side of running) seeded[side.key] = (await sendAndComplete(side.url)).id
  }
  await seed()
  /** @type {Record<string, (side: Side) => string>} */
  const bodies = { GetTask: (side) => getTaskBody(seeded[side.key]), SendMessage: () => sendMessageBody() }
  /** @param {Side} side @param {string} scenario @param {number} seconds */
  const runOnce = (side, scenario, seconds) =>
    withChildCpu(side.child, () => load({ url: side.url, body: bodies[scenario](side), seconds, connections: settings.connections, pipelining: settings.pipelining }))
  log(`${label}: warming up (1 s per server and scenario)`)
  const scenarios = Object.keys(bodies)
  for (const scenario of scenarios) for (const side of running) await runOnce(side, scenario, 1)
  return alternatingRounds({ sides: running, scenarios, rounds: settings.rounds, seconds: settings.seconds, runOnce, log, label, before: seed })
}

/**
 * Each side's medians over its runs (rate, p50, p99, server CPU per request) and its bad answers summed: medians[scenario][side].
 * @param {Samples} samples
 */
export function mediansOf(samples) {
  /** @type {Record<string, Record<string, Omit<RoundResult, "requests">>>} */
  const medians = {}
  for (const [scenario, bySide] of Object.entries(samples)) {
    for (const [key, runs] of Object.entries(bySide)) {
      ;(medians[scenario] ??= {})[key] = {
        rps: median(runs.map((r) => r.rps)),
        p50: median(runs.map((r) => r.p50)),
        p99: median(runs.map((r) => r.p99)),
        cpuUsPerRequest: median(runs.map((r) => r.cpuUsPerRequest)),
        bad: runs.reduce((sum, r) => sum + r.bad, 0),
      }
    }
  }
  return medians
}
