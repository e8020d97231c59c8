import { randomBytes } from "node:crypto"
import { connect } from "nats"
import pg from "pg"
import t, { type Test } from "tap"
import { createLocalClient } from "../lib/client/client.js"
import { NatsTaskStore } from "../lib/stores/nats.js"
import { PostgresTaskStore } from "../lib/stores/postgres.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import { serve } from "../plugins/serve.js"
import { callRpc, joinedChunks, kindsOf, NATS_URL, openStream, PG_URL, resumeRpc, rpc, scriptedModel, sendStreamingRpc, waitFor } from "./helpers.js"

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
    const first = await openStream(a.url, sendStreamingRpc("hi"))
    model.say("one ")
    model.say("two ")
    await waitFor(() => first.messages.length >= 4, 10_000, "two chunks on A")
    const lastId = first.ids.at(-1)!
    const taskId = first.messages[0].result.task.id
    first.cut()
    model.say("three ")
    const again = await openStream(b.url, resumeRpc(taskId), { "last-event-id": String(lastId) })
    t.equal(again.status, 200)
    await waitFor(() => again.messages.length >= 2, 10_000, "the Task, then the chunk said while away, through B")
    t.match(again.messages[0].result, { task: { id: taskId } }, "the stream starts with the Task")
    model.say("four")
    model.end()
    const results = (await again.done).map((m) => m.result)
    t.same(kindsOf(results), ["task", "artifactUpdate", "artifactUpdate", "artifactUpdate", "statusUpdate"], "the missed chunk, the later ones, the end: nothing twice")
    t.same(again.ids, [lastId, lastId + 1, lastId + 2, lastId + 3, lastId + 4], "ids go on from the last one seen")
    t.equal(results.at(-1).statusUpdate.status.state, "TASK_STATE_COMPLETED")
    t.equal(joinedChunks(first.messages.map((m) => m.result)) + joinedChunks(results.slice(1)), "one two three four")
  })

  t.test(`${name}: a Task that finished on one server replays to its end on another`, async (t) => {
    const { model, a, b } = await twoServers(t, medium)
    const first = await openStream(a.url, sendStreamingRpc("hi"))
    model.say("a")
    await waitFor(() => first.messages.length >= 3, 10_000, "the first chunk")
    const lastId = first.ids.at(-1)!
    const taskId = first.messages[0].result.task.id
    first.cut()
    model.say("b")
    model.end()
    await waitFor(async () => (await callRpc(b.url, rpc("GetTask", { id: taskId }))).result?.status.state === "completed", 10_000, "the Task completed")
    const again = await openStream(b.url, resumeRpc(taskId), { "last-event-id": String(lastId) })
    const results = (await again.done).map((m) => m.result)
    t.same(kindsOf(results), ["task", "artifactUpdate", "artifactUpdate", "statusUpdate"])
    t.equal("a" + joinedChunks(results.slice(1)), "ab")
  })
}
