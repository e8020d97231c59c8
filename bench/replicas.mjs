// The replicas phase (issue 17): two toolnexus replicas on one Postgres against one replica alone, and the time a
// cancel sent to one replica takes to stop the work running on the other.
//
// Throughput: GetTask and SendMessage→completed against one replica (BENCH_CONNECTIONS connections) and against two
// (half the connections on each, at once: a client spreading its connections round-robin over the replicas), the two
// in alternating rounds; the pair's rate is the sum of both, its server CPU both children's per answer. Each side has
// a table of its own (servers/toolnexus-replica.mjs, which answers at once). Cancel: a Task whose agent works until
// canceled is started on replica A (SendMessage, returnImmediately), CancelTask is sent to replica B, and the time from
// sending it to A's agent seeing its abort is taken, Task after Task (BENCH_CANCELS, default 100).
import path from "node:path"
import { ask, startChild, stopChild } from "./child.mjs"
import { call, getTaskBody, load, sendAndComplete, sendMessageBody } from "./load.mjs"
import { POSTGRES_URL, dropShared, runNames, servicesUp } from "./shared.mjs"
import { median, percentile } from "./stats.mjs"

/** @typedef {{ child: import("node:child_process").ChildProcess, url: string }} Server */
/** @typedef {{ rps: number, requests: number, cpuUsPerRequest: number, bad: number, p50: number }} SpreadResult */

const now = () => performance.timeOrigin + performance.now()
/** @param {import("node:child_process").ChildProcess[]} children */
const cpuOf = async (children) => (await Promise.all(children.map((child) => ask(child, { cpu: {} })))).reduce((sum, answer) => sum + answer.cpuUs, 0)

/**
 * Runs the load on every server at once, the connections shared out; the rates summed, the servers' CPU per answer.
 * @param {Server[]} servers
 * @param {(server: Server) => string} body
 * @param {number} seconds
 * @param {number} connections
 * @returns {Promise<SpreadResult>}
 */
async function spread(servers, body, seconds, connections) {
  const before = await cpuOf(servers.map((s) => s.child))
  const runs = await Promise.all(servers.map((s) => load({ url: s.url, body: body(s), seconds, connections: Math.max(1, Math.round(connections / servers.length)) })))
  const cpu = (await cpuOf(servers.map((s) => s.child))) - before
  const requests = runs.reduce((sum, r) => sum + r.requests, 0)
  return { rps: runs.reduce((sum, r) => sum + r.rps, 0), requests, cpuUsPerRequest: cpu / requests, bad: runs.reduce((sum, r) => sum + r.bad, 0), p50: median(runs.map((r) => r.p50)) }
}

/**
 * @param {{ settings: import("./rounds.mjs").LoadSettings & { cancels: number }, here: string, log: (line: string) => void }} opts
 */
export async function replicaRows({ settings, here, log }) {
  const up = await servicesUp()
  if (up.postgres !== true) {
    log(`replicas: postgres does not answer (${up.postgres}); the phase is left out`)
    return { skipped: { postgres: up.postgres } }
  }
  const one = runNames("r1")
  const two = runNames("r2")
  const gone = runNames("rc")
  /** @type {Server[]} */
  const running = []
  /** @param {import("./shared.mjs").RunNames} names */
  const start = async (names) => {
    const { child, info } = await startChild(path.join(here, "servers", "toolnexus-replica.mjs"), [`${POSTGRES_URL}?table=${names.table}`])
    const server = { child, url: info.url }
    running.push(server)
    return server
  }
  try {
    const single = [await start(one)]
    const pair = [await start(two), await start(two)]
    /** @type {Record<string, Server[]>} */
    const sides = { one: single, two: pair }
    // GetTask reads a Task made on the first server of each side (on the pair, the other replica reads it too).
    /** @type {Record<string, string>} */
    const seeded = { one: (await sendAndComplete(single[0].url)).id, two: (await sendAndComplete(pair[0].url)).id }
    /** @type {Record<string, (key: string) => () => string>} */
    const bodies = {
      GetTask: (key) => () => getTaskBody(seeded[key]),
      SendMessage: () => () => sendMessageBody(),
    }
    for (const scenario of ["GetTask", "SendMessage"]) for (const key of ["one", "two"]) await spread(sides[key], bodies[scenario](key), 1, settings.connections)
    /** @type {Record<string, Record<string, SpreadResult[]>>} */
    const samples = {}
    for (let round = 1; round <= settings.rounds; round++) {
      for (const scenario of ["GetTask", "SendMessage"]) {
        for (const key of round % 2 === 1 ? ["one", "two"] : ["two", "one"]) {
          const result = await spread(sides[key], bodies[scenario](key), settings.seconds, settings.connections)
          ;((samples[scenario] ??= {})[key] ??= []).push(result)
          log(`round ${round} replicas ${scenario.padEnd(11)} ${key} ${result.rps.toFixed(0).padStart(6)} req/s  server CPU ${result.cpuUsPerRequest.toFixed(0).padStart(5)} µs/req${result.bad ? `  ${result.bad} bad answers` : ""}`)
        }
      }
    }
    /** @type {Record<string, { byRate: number, cpuOne: number, cpuTwo: number, rpsOne: number, rpsTwo: number, bad: number }>} */
    const factor = {}
    for (const scenario of ["GetTask", "SendMessage"]) {
      const { one: a, two: b } = samples[scenario]
      factor[scenario] = {
        byRate: median(b.map((r, i) => r.rps / a[i].rps)),
        cpuOne: median(a.map((r) => r.cpuUsPerRequest)),
        cpuTwo: median(b.map((r) => r.cpuUsPerRequest)),
        rpsOne: median(a.map((r) => r.rps)),
        rpsTwo: median(b.map((r) => r.rps)),
        bad: [...a, ...b].reduce((sum, r) => sum + r.bad, 0),
      }
      log(`replicas: ${scenario}: two replicas ${factor[scenario].rpsTwo.toFixed(0)} req/s, one ${factor[scenario].rpsOne.toFixed(0)} req/s: ${factor[scenario].byRate.toFixed(2)}×`)
    }
    for (const server of running.splice(0)) await stopChild(server.child)

    // Cancel on B, work stopped on A.
    const [a, b] = [await start(gone), await start(gone)]
    /** @type {number[]} */
    const cancels = []
    let refused = 0
    for (let i = 0; i < settings.cancels; i++) {
      const tag = `c${i}`
      const sent = await call(a.url, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: `m-${tag}`, role: "ROLE_USER", parts: [{ text: `wait ${tag}` }] }, configuration: { returnImmediately: true } } }))
      const id = sent.result?.task?.id
      if (!id) throw new Error(`replicas: SendMessage on A did not answer a Task: ${JSON.stringify(sent).slice(0, 300)}`)
      // Its agent is at work once A stored it working (the agent is called right after that save).
      for (let tries = 0; ; tries++) {
        const got = await call(b.url, getTaskBody(id))
        if (got.result?.status?.state === "TASK_STATE_WORKING") break
        if (tries > 1000) throw new Error(`replicas: Task ${id} never showed working on B`)
      }
      const t0 = now()
      const canceled = await call(b.url, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "CancelTask", params: { id } }))
      if (canceled.result?.status?.state !== "TASK_STATE_CANCELED") refused++
      /** @type {number | undefined} */
      let stoppedAt
      for (let tries = 0; stoppedAt === undefined; tries++) {
        stoppedAt = (await ask(a.child, { aborts: {} })).aborts[tag]
        if (stoppedAt === undefined && tries > 5000) throw new Error(`replicas: the work of Task ${id} on A never stopped`)
      }
      cancels.push(stoppedAt - t0)
    }
    const cancel = { count: cancels.length, refused, p50Ms: percentile(cancels, 50), p99Ms: percentile(cancels, 99), maxMs: Math.max(...cancels), ms: cancels }
    log(`replicas: cancel on B to the work stopped on A: p50 ${cancel.p50Ms.toFixed(2)} ms, p99 ${cancel.p99Ms.toFixed(2)} ms over ${cancel.count} Tasks${refused ? ` (${refused} cancels not answered canceled)` : ""}`)
    return { samples, factor, cancel }
  } finally {
    for (const server of running) await stopChild(server.child)
    for (const names of [one, two, gone]) await dropShared(names)
  }
}
