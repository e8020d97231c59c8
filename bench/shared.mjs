// The shared-stores phase (issue 17): GetTask and SendMessage→completed on the stores several replicas share, ours
// (PostgresTaskStore, NatsTaskStore) against the official SDK's server with its DatabaseTaskStore (Kysely over pg) on
// the same Postgres database, in interleaved rounds as the JSON-RPC phase (run.mjs's http).
//
// ours: servers/toolnexus.mjs (serve(), logger: false) with a "postgres://…?table=" or "nats://…?bucket=" selector;
// the SDK: servers/sdk-db.mjs. Every table and bucket is named for this run and dropped after it. BENCH_POSTGRES and
// BENCH_NATS name the services (default the local ones); a service that does not answer leaves its rows out, said so.
import path from "node:path"
import pg from "pg"
import { connect } from "nats"
import { errorMessage, startChild, stopChild, withChildCpu } from "./child.mjs"
import { getTaskBody, load, sendAndComplete, sendMessageBody } from "./load.mjs"
import { alternatingRounds, mediansOf } from "./rounds.mjs"

export const SCENARIOS = ["GetTask", "SendMessage"]
export const POSTGRES_URL = process.env.BENCH_POSTGRES ?? "postgres://postgres@127.0.0.1:5432/test"
export const NATS_URL = process.env.BENCH_NATS ?? "nats://127.0.0.1:4222"

/**
 * Names of this run's own tables and buckets (lowercase, short: the stores derive longer names from them).
 * @param {string} tag
 */
export function runNames(tag) {
  const suffix = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`
  return { table: `bench_${tag}_${suffix}`, sdkTable: `bench_sdk_${suffix}`, bucket: `bench_${tag}_${suffix}` }
}

/** @typedef {ReturnType<typeof runNames>} RunNames */

/**
 * The three sides: ours on Postgres and on NATS, the SDK's DatabaseTaskStore on Postgres; the order of odd rounds.
 * @param {RunNames} names
 * @returns {{ key: string, label: string, script: string, args: string[], needs: "postgres" | "nats" }[]}
 */
export function sharedSides(names) {
  return [
    { key: "pg", label: "toolnexus serve(), PostgresTaskStore (logger: false)", script: "toolnexus.mjs", args: [`${POSTGRES_URL}?table=${names.table}`, "off"], needs: "postgres" },
    { key: "sdk", label: "@a2a-js/sdk 1.3 Express + DatabaseTaskStore (Kysely, pg) on the same database", script: "sdk-db.mjs", args: [POSTGRES_URL, names.sdkTable], needs: "postgres" },
    { key: "nats", label: "toolnexus serve(), NatsTaskStore (logger: false)", script: "toolnexus.mjs", args: [`${NATS_URL}?bucket=${names.bucket}`, "off"], needs: "nats" },
  ]
}

/** Which services answer: { postgres: true | "why not", nats: ... }. */
export async function servicesUp() {
  /** @type {Record<"postgres" | "nats", true | string>} */
  const up = { postgres: "not tried", nats: "not tried" }
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 })
  try {
    await client.connect()
    await client.query("SELECT 1")
    up.postgres = true
  } catch (err) {
    up.postgres = errorMessage(err)
  } finally {
    await client.end().catch(() => {})
  }
  try {
    const nc = await connect({ servers: NATS_URL, timeout: 3000, maxReconnectAttempts: 0 })
    await (await nc.jetstreamManager()).getAccountInfo()
    await nc.close()
    up.nats = true
  } catch (err) {
    up.nats = errorMessage(err)
  }
  return up
}

/**
 * Drops this run's tables (ours: the Tasks' and the ones the store makes beside them; the SDK's) and NATS streams.
 * @param {RunNames} names
 */
export async function dropShared(names) {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 })
  try {
    await client.connect()
    const t = names.table
    const tables = [t, `${t}_pushcfg`, `${t}_outbox`, `${t}_dead`, `${t}_events`, `${t}_events_ends`, names.sdkTable]
    await client.query(tables.map((name) => `DROP TABLE IF EXISTS "${name}";`).join("\n"))
  } catch {
    // No database: nothing was made there.
  } finally {
    await client.end().catch(() => {})
  }
  try {
    const nc = await connect({ servers: NATS_URL, timeout: 3000, maxReconnectAttempts: 0 })
    const jsm = await nc.jetstreamManager()
    for (const stream of [`KV_${names.bucket}`, `KV_${names.bucket}_push`, `${names.bucket}_events`]) await jsm.streams.delete(stream).catch(() => {})
    await nc.close()
  } catch {
    // No NATS: nothing was made there.
  }
}

/**
 * Starts the sides whose service answers, then per round: for each scenario, every side back to back (the order
 * reversed in even rounds); medians over rounds, as the other phases.
 * @param {{ settings: import("./rounds.mjs").LoadSettings, here: string, log: (line: string) => void }} opts
 */
export async function sharedRounds({ settings, here, log }) {
  const names = runNames("s")
  const up = await servicesUp()
  const sides = sharedSides(names).filter((side) => up[side.needs] === true)
  const skipped = Object.fromEntries(Object.entries(up).filter(([, ok]) => ok !== true))
  for (const [service, why] of Object.entries(skipped)) log(`shared: ${service} does not answer (${why}); its rows are left out`)
  /** @type {(ReturnType<typeof sharedSides>[number] & { child: import("node:child_process").ChildProcess, url: string })[]} */
  const running = []
  try {
    for (const side of sides) {
      const { child, info } = await startChild(path.join(here, "servers", side.script), side.args)
      running.push({ ...side, child, url: info.url })
    }
    log(`shared: servers up: ${running.map((s) => `${s.key} ${s.url}`).join(", ")}`)
    /** @type {Record<string, string>} */
    const seeded = {}
    const seed = async () => {
      for (const side of running) seeded[side.key] = (await sendAndComplete(side.url)).id
    }
    await seed()
    /** @param {(typeof running)[number]} side @param {string} scenario @param {number} seconds */
    const runOnce = (side, scenario, seconds) =>
      withChildCpu(side.child, () =>
        load({ url: side.url, body: scenario === "GetTask" ? getTaskBody(seeded[side.key]) : sendMessageBody(), seconds, connections: settings.connections, pipelining: settings.pipelining }),
      )
    log("shared: warming up (1 s per server and scenario)")
    for (const scenario of SCENARIOS) for (const side of running) await runOnce(side, scenario, 1)
    const samples = await alternatingRounds({ sides: running, scenarios: SCENARIOS, rounds: settings.rounds, seconds: settings.seconds, runOnce, log, label: "shared" })
    const medians = mediansOf(samples)
    for (const scenario of SCENARIOS) {
      const m = medians[scenario] ?? {}
      log(`shared: ${scenario}: ${Object.entries(m).map(([key, row]) => `${key} ${row.rps.toFixed(0)} req/s (${row.cpuUsPerRequest.toFixed(0)} µs CPU)`).join(", ")}`)
    }
    return { sides: sides.map(({ key, label }) => ({ key, label })), skipped, samples, medians }
  } finally {
    for (const side of running) await stopChild(side.child)
    await dropShared(names)
  }
}
