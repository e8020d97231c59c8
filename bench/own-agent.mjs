// The ownAgent phase (issue 31): an agent of your own that answers at once against the built-in loop with
// createLocalClient, both on server A (servers/toolnexus-agent.mjs), GetTask and SendMessage→completed over
// JSON-RPC in interleaved rounds as the HTTP phase. The target: agent/loop ≥ 1.0× within the noise (the runner does
// the same work around either; the loop's own steps are skipped).
import path from "node:path"
import { startChild, stopChild } from "./child.mjs"
import { median } from "./stats.mjs"
import { getAndSendRounds, mediansOf } from "./rounds.mjs"

export const OWN_AGENT_SIDES = [
  { key: "loop", label: "server A, the built-in loop with createLocalClient answering at once" },
  { key: "agent", label: "server A, an agent function of your own answering at once" },
]
const SCENARIOS = ["GetTask", "SendMessage"]

/**
 * @param {{ settings: { seconds: number, rounds: number, connections: number, pipelining: number }, here: string, log: (line: string) => void }} opts
 */
export async function ownAgentRounds({ settings, here, log }) {
  /** @type {Array<{ key: string, label: string, child: import("node:child_process").ChildProcess, url: string }>} */
  const running = []
  try {
    for (const side of OWN_AGENT_SIDES) {
      const { child, info } = await startChild(path.join(here, "servers", "toolnexus-agent.mjs"), [side.key])
      running.push({ ...side, child, url: info.url })
    }
    log(`ownAgent: servers up: ${running.map((s) => `${s.key} ${s.url}`).join(", ")}`)
    const samples = await getAndSendRounds({ running, settings, log, label: "ownAgent" })
    /** @type {Record<string, { rate: number, cpu: number }>} */
    const ratios = {}
    for (const scenario of SCENARIOS) {
      // Medians of per-round ratios (the two runs of a round are seconds apart): by rate, and by server CPU per request.
      const agent = samples[scenario].agent
      const loop = samples[scenario].loop
      ratios[scenario] = { rate: median(agent.map((r, i) => r.rps / loop[i].rps)), cpu: median(agent.map((r, i) => loop[i].cpuUsPerRequest / r.cpuUsPerRequest)) }
      log(`ownAgent: ${scenario}: agent/loop ${ratios[scenario].rate.toFixed(3)}× by rate, ${ratios[scenario].cpu.toFixed(3)}× by CPU`)
    }
    return { sides: OWN_AGENT_SIDES, samples, medians: mediansOf(samples), ratios }
  } finally {
    for (const side of running) await stopChild(side.child)
  }
}
