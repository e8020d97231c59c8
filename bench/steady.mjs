// The steady phase (issue 17): latency under a steady load, not only at peak. For every store of ours (memory, file,
// Postgres, NATS), GetTask and SendMessage→completed are first run as fast as the server answers (the peak), then held
// at half that rate (autocannon's overallRate) while every answer's time is kept: p50, p99 and p99.9 from the times
// themselves (autocannon's own histogram counts whole milliseconds).
import path from "node:path"
import autocannon from "autocannon"
import { startChild, stopChild, withChildCpu } from "./child.mjs"
import { A2A_HEADERS, getTaskBody, load, sendAndComplete, sendMessageBody } from "./load.mjs"
import { NATS_URL, POSTGRES_URL, dropShared, runNames, servicesUp } from "./shared.mjs"
import { median, percentile } from "./stats.mjs"

/**
 * Runs `body` at `rate` requests/s for `seconds`; every answer's time in ms, and the answers that were not a completed Task.
 * @param {{ url: string, body: string, rate: number, seconds: number, connections: number }} opts
 * @returns {Promise<{ times: number[], rps: number, requests: number, bad: number }>}
 */
export function steadyLoad({ url, body, rate, seconds, connections }) {
  /** @type {number[]} */
  const times = []
  let wrong = 0
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections,
        duration: seconds,
        overallRate: rate,
        requests: [{ method: "POST", path: "/", headers: A2A_HEADERS, body, onResponse: (status, text) => void (status !== 200 || !text.includes("TASK_STATE_COMPLETED") ? wrong++ : 0) }],
      },
      (err, result) => (err ? reject(err) : resolve({ times, rps: result.requests.average, requests: result.requests.total, bad: wrong + result.errors + result.timeouts })),
    )
    instance.on("response", (_client, _status, _bytes, ms) => times.push(ms))
  })
}

/**
 * @param {{
 *   settings: import("./rounds.mjs").LoadSettings & { steadySeconds: number },
 *   here: string, log: (line: string) => void, scratch: string,
 * }} opts
 */
export async function steadyRows({ settings, here, log, scratch }) {
  const names = runNames("l")
  const up = await servicesUp()
  const sides = [
    { key: "memory", store: "memory" },
    { key: "file", store: `file:${path.join(scratch, "steady-file")}` },
    ...(up.postgres === true ? [{ key: "postgres", store: `${POSTGRES_URL}?table=${names.table}` }] : []),
    ...(up.nats === true ? [{ key: "nats", store: `${NATS_URL}?bucket=${names.bucket}` }] : []),
  ]
  /** @type {Record<string, string | number>[]} */
  const rows = []
  try {
    for (const side of sides) {
      const { child, info } = await startChild(path.join(here, "servers", "toolnexus.mjs"), [side.store, "off"])
      try {
        const id = (await sendAndComplete(info.url)).id
        for (const scenario of ["GetTask", "SendMessage"]) {
          const body = scenario === "GetTask" ? getTaskBody(id) : sendMessageBody()
          await load({ url: info.url, body, seconds: 1, connections: settings.connections })
          const peaks = []
          for (let i = 0; i < 2; i++) peaks.push(await withChildCpu(child, () => load({ url: info.url, body, seconds: settings.seconds, connections: settings.connections })))
          const peak = median(peaks.map((r) => r.rps))
          const rate = Math.max(1, Math.round(peak / 2))
          const held = await withChildCpu(child, () => steadyLoad({ url: info.url, body, rate, seconds: settings.steadySeconds, connections: settings.connections }))
          const row = {
            store: side.key,
            scenario,
            peakRps: peak,
            rate,
            rps: held.rps,
            requests: held.requests,
            p50Ms: percentile(held.times, 50),
            p99Ms: percentile(held.times, 99),
            p999Ms: percentile(held.times, 99.9),
            maxMs: Math.max(...held.times),
            cpuUsPerRequest: held.cpuUsPerRequest,
            bad: held.bad + peaks.reduce((sum, r) => sum + r.bad, 0),
          }
          rows.push(row)
          log(
            `steady: ${side.key.padEnd(8)} ${scenario.padEnd(11)} peak ${peak.toFixed(0)} req/s; at ${rate}/s: p50 ${row.p50Ms.toFixed(2)} ms, p99 ${row.p99Ms.toFixed(2)} ms, ` +
              `p99.9 ${row.p999Ms.toFixed(2)} ms (${held.requests} answers${row.bad ? `, ${row.bad} bad` : ""})`,
          )
        }
      } finally {
        await stopChild(child)
      }
    }
    return { rows, skipped: Object.fromEntries(Object.entries(up).filter(([, ok]) => ok !== true)) }
  } finally {
    await dropShared(names)
  }
}
