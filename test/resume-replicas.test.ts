import { randomBytes } from "node:crypto"
import { connect } from "nats"
import pg from "pg"
import t, { type Test } from "tap"
import { createLocalClient } from "../lib/client/client.js"
import { NatsTaskStore } from "../lib/stores/nats.js"
import { PostgresTaskStore } from "../lib/stores/postgres.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import { serve } from "../plugins/serve.js"
import { NATS_URL, PG_URL, scriptedModel } from "./helpers.js"
import { resumeAfterTheEnd, resumeMidAnswer } from "./resume-scenarios.js"

/**
 * A stream started on one server, cut, and resumed with Last-Event-ID on
 * another server sharing the store: the second reads the first's event log
 * and follows it, so the peer gets the rest exactly once.
 */

const suffix = () => randomBytes(6).toString("hex")

/** Two stores on one fresh medium; dropped when the test ends. */
type Medium = (t: Test) => Promise<[TaskStore, TaskStore]>

const postgres: Medium = async (t) => {
  const table = `tn_resume_${suffix()}`
  const stores = [0, 1].map(() => new PostgresTaskStore(PG_URL, { table, leaseTable: `${table}_leases` }))
  t.teardown(async () => {
    await Promise.all(stores.map((store) => store.close()))
    const admin = new pg.Client({ connectionString: PG_URL })
    await admin.connect()
    const tables = ["", "_leases", "_pushcfg", "_outbox", "_dead", "_events", "_events_ends"].map((end) => `"${table}${end}"`)
    await admin.query(`DROP TABLE IF EXISTS ${tables.join(", ")}`)
    await admin.end()
  })
  return [stores[0], stores[1]]
}

const nats: Medium = async (t) => {
  const bucket = `tn_resume_${suffix()}`
  const opts = { bucket, leaseBucket: `${bucket}_leases` }
  const stores = [0, 1].map(() => new NatsTaskStore(NATS_URL, opts))
  t.teardown(async () => {
    await Promise.all(stores.map((store) => store.close()))
    const nc = await connect({ servers: NATS_URL })
    const jsm = await nc.jetstreamManager()
    for (const name of [bucket, opts.leaseBucket, `${bucket}_push`]) await jsm.streams.delete(`KV_${name}`).catch(() => {})
    await jsm.streams.delete(`${bucket}_events`).catch(() => {})
    await nc.drain()
  })
  return [stores[0], stores[1]]
}

async function twoServers(t: Test, medium: Medium) {
  const [storeA, storeB] = await medium(t)
  const model = scriptedModel()
  const a = await serve("127.0.0.1:0", { client: model.client, a2a: { store: storeA }, logger: false })
  t.teardown(() => a.stop())
  // B never runs this Task: a model that would fail the test if it were asked.
  const b = await serve("127.0.0.1:0", { client: createLocalClient(() => "B must not run it"), a2a: { store: storeB }, logger: false })
  t.teardown(() => b.stop())
  return { model, a, b }
}

for (const [name, medium] of [
  ["Postgres", postgres],
  ["NATS", nats],
] as const) {
  t.test(`${name}: a stream cut on one server resumes on another with the rest exactly once`, async (t) => {
    const { model, a, b } = await twoServers(t, medium)
    await resumeMidAnswer(t, { model, streamUrl: a.url, resumeUrl: b.url })
  })

  t.test(`${name}: a Task that finished on one server replays to its end on another`, async (t) => {
    const { model, a, b } = await twoServers(t, medium)
    await resumeAfterTheEnd(t, { model, streamUrl: a.url, resumeUrl: b.url })
  })
}
