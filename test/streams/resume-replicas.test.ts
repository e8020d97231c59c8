import { randomBytes } from "node:crypto"
import { connect } from "nats"
import pg from "pg"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { NatsTaskStore } from "../../lib/stores/nats/store.js"
import { PostgresTaskStore } from "../../lib/stores/postgres/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { serve } from "../../plugins/serve.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { callRpc, joinedChunks, NATS_URL, openStream, PG_URL, resumeRpc, rpc, scriptedModel, sendStreamingRpc, tmpDir, userMessage, waitFor } from "../fixtures/helpers.js"
import { resumeAfterTheEnd, resumeMidAnswer } from "../fixtures/resume-scenarios.js"

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

const file: Medium = async (t) => {
  const dir = tmpDir(t)
  return [new FileTaskStore(dir), new FileTaskStore(dir)]
}

async function twoServers(t: Test, medium: Medium) {
  const [storeA, storeB] = await medium(t)
  const model = scriptedModel()
  // No save of the answer so far while the test runs: the stored Task lags the stream, and B must go by the log.
  const a = await serve("127.0.0.1:0", { client: model.client, a2a: { store: storeA, progressSaveMs: 600_000 }, logger: false })
  t.teardown(() => a.stop())
  // B never runs this Task: a model that would fail the test if it were asked.
  const b = await serve("127.0.0.1:0", { client: createLocalClient(() => "B must not run it"), a2a: { store: storeB }, logger: false })
  t.teardown(() => b.stop())
  return { model, a, b, storeB }
}

for (const [name, medium, watches] of [
  ["Postgres", postgres, true],
  ["NATS", nats, true],
  // Two servers on one directory: streams resume and follow across them, but a running server is not told of another's cancel (no watch).
  ["file store shared by two servers", file, false],
] as const) {
  t.test(`${name}: a stream cut on one server resumes on another with the rest exactly once`, async (t) => {
    const { model, a, b } = await twoServers(t, medium)
    await resumeMidAnswer(t, { model, streamUrl: a.url, resumeUrl: b.url })
  })

  t.test(`${name}: a Task that finished on one server replays to its end on another`, async (t) => {
    const { model, a, b } = await twoServers(t, medium)
    await resumeAfterTheEnd(t, { model, streamUrl: a.url, resumeUrl: b.url })
  })

  t.test(`${name}: a Task sent to one server without a stream is followed on another, chunks included`, async (t) => {
    const { model, a, b } = await twoServers(t, medium)
    const sent = await callRpc(a.url, rpc("SendMessage", { message: userMessage("x"), configuration: { returnImmediately: true } }), { "a2a-version": "1.0" })
    const taskId = sent.result.task.id
    model.say("seen ")
    const follow = await openStream(b.url, resumeRpc(taskId))
    await waitFor(() => follow.messages.length >= 1, 10_000, "B's first frame")
    model.say("afar")
    model.end()
    const results = (await follow.done).map((m) => m.result)
    t.equal(results.at(-1).statusUpdate.status.state, "TASK_STATE_COMPLETED")
    // B's first frame is the Task as stored (the answer so far, if a save of it landed), then every chunk after it.
    const stored: string = results[0].task.artifacts?.[0]?.parts?.[0]?.text ?? ""
    t.equal(stored + joinedChunks(results), "seen afar", "the first frame and the chunks after it make the answer")
  })

  if (watches) t.test(`${name}: a cancel on another server ends the stream with its status, once, under a new id, and the log has it`, async (t) => {
    const { model, a, b, storeB } = await twoServers(t, medium)
    const stream = await openStream(a.url, sendStreamingRpc("hi"))
    model.say("one ")
    await waitFor(() => stream.messages.length >= 3, 10_000, "a chunk")
    const taskId = stream.messages[0].result.task.id
    const canceled = await callRpc(b.url, rpc("CancelTask", { id: taskId }), { "a2a-version": "1.0" })
    t.equal(canceled.result?.status.state, "TASK_STATE_CANCELED")
    const results = (await stream.done).map((m) => m.result)
    t.equal(results.at(-1).statusUpdate?.status.state, "TASK_STATE_CANCELED", "A's stream ends canceled")
    t.equal(new Set(stream.ids).size, stream.ids.length, "no id twice")
    const lastId = stream.ids.at(-1)!
    await waitFor(async () => (await storeB.events!.lastPosition(taskId)) >= lastId, 10_000, "A's log to hold the end it logged on seeing the cancel")
    const again = await openStream(b.url, resumeRpc(taskId), { "last-event-id": String(lastId - 1) })
    const replayed = (await again.done).map((m) => m.result)
    t.equal(replayed.at(-1).statusUpdate?.status.state, "TASK_STATE_CANCELED", "a resume on B replays the canceled status from the log")
    model.end()
  })
}
