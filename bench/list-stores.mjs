// Child: ListTasks on one store holding many Tasks (issue 17), as the server calls list(): filtered by context and
// paged, and unfiltered. argv: <memory|file|postgres|nats> <dir, table or bucket> <count> <rounds>
// The Tasks are completed ones (fixtures.mjs), PER_CONTEXT to a context, each with its own status time. They go in
// the fastest way that gives the store's own form: the memory and NATS stores' save (in parallel batches), files
// written straight into the directory as the file store names them, rows inserted in bulk into the Postgres table as
// the store writes them (its columns from the Task as rowOf makes them: no owner, no tenant).
import fsp from "node:fs/promises"
import pg from "pg"
import { FileTaskStore, InMemoryTaskStore, NatsTaskStore, PostgresTaskStore } from "../dist/index.js"
import { errorText } from "./child.mjs"
import { completedTask } from "./fixtures.mjs"
import { NATS_URL, POSTGRES_URL } from "./shared.mjs"
import { median } from "./stats.mjs"

const [kind, where, countArg = "100000", roundsArg = "10"] = process.argv.slice(2)
const count = Number(countArg)
const rounds = Number(roundsArg)
/** Tasks per context: enough for a few pages of PAGE. */
const PER_CONTEXT = 100
const PAGE = 20
const BASE = Date.parse("2026-01-01T00:00:00Z")

/** @param {number} i */
const contextOf = (i) => `ctx-${Math.floor(i / PER_CONTEXT)}`
/**
 * @param {number} i
 * @returns {import("../dist/lib/stores/index.js").A2ATask}
 */
const taskOf = (i) => ({ ...completedTask(`t-${i}`), contextId: contextOf(i), status: { state: "completed", timestamp: new Date(BASE + i * 1000).toISOString() } })

/**
 * `work(i)` for every i below n, `width` at a time.
 * @param {number} n
 * @param {(i: number) => Promise<unknown>} work
 */
async function parallel(n, work, width = 256) {
  let next = 0
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await work(next++)
    }),
  )
}

async function seed() {
  if (kind === "memory") {
    const store = new InMemoryTaskStore({ maxTasks: count, maxTasksPerOwner: count })
    for (let i = 0; i < count; i++) await store.save(taskOf(i))
    return store
  }
  if (kind === "file") {
    await fsp.mkdir(where, { recursive: true })
    const namer = new FileTaskStore(where)
    await parallel(count, (i) => fsp.writeFile(namer.fileFor(`t-${i}`), JSON.stringify(taskOf(i))), 64)
    await namer.close()
    return new FileTaskStore(where)
  }
  if (kind === "postgres") {
    const store = new PostgresTaskStore(POSTGRES_URL, { table: where })
    await store.open()
    const client = new pg.Client({ connectionString: POSTGRES_URL })
    await client.connect()
    try {
      for (let from = 0; from < count; from += 5000) {
        const tasks = Array.from({ length: Math.min(5000, count - from) }, (_, k) => taskOf(from + k))
        await client.query(
          `INSERT INTO "${where}" (id, task, state, status_ts, context_id, principal, tenant, version)
           SELECT id, task::jsonb, 'completed', ts, ctx, NULL, NULL, 1 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS given(id, task, ts, ctx)`,
          [tasks.map((t) => t.id), tasks.map((t) => JSON.stringify(t)), tasks.map((t) => t.status.timestamp), tasks.map((t) => t.contextId)],
        )
      }
      await client.query(`ANALYZE "${where}"`)
    } finally {
      await client.end()
    }
    return store
  }
  if (kind === "nats") {
    const store = new NatsTaskStore(NATS_URL, { bucket: where })
    await parallel(count, (i) => store.save(taskOf(i)))
    return store
  }
  throw new Error(`list-stores.mjs: unknown store ${kind}`)
}

/**
 * Milliseconds of each call, median over the rounds (`prepare` runs untimed before each, and gives the call its input).
 * @template Q
 * @param {(input: Q) => Promise<unknown>} run
 * @param {(round: number) => Promise<Q>} [prepare]
 */
async function medianMs(run, prepare = async () => /** @type {Q} */ (undefined)) {
  /** @type {number[]} */
  const samples = []
  for (let round = 0; round < rounds; round++) {
    const input = await prepare(round)
    const t0 = performance.now()
    await run(input)
    samples.push(performance.now() - t0)
  }
  return median(samples)
}

try {
  const t0 = performance.now()
  const store = await seed()
  const seedSeconds = (performance.now() - t0) / 1000
  const pick = () => contextOf(Math.floor(Math.random() * count))
  // The first call may build what the store keeps for listing (the file store's index): timed apart.
  const t1 = performance.now()
  const first = await store.list({ contextId: pick(), pageSize: PAGE, owners: [null] })
  const firstListMs = performance.now() - t1
  if (first.tasks.length !== PAGE || first.totalSize !== PER_CONTEXT) throw new Error(`a context's first page had ${first.tasks.length} of ${first.totalSize} Tasks, not ${PAGE} of ${PER_CONTEXT}`)
  const contextPage1Ms = await medianMs(() => store.list({ contextId: pick(), pageSize: PAGE, owners: [null] }))
  // A later page of a context: the token of the page before it, fetched untimed.
  const contextPage3Ms = await medianMs(
    (query) => store.list(query),
    async () => {
      const contextId = pick()
      let token = ""
      for (let page = 1; page < 3; page++) token = (await store.list({ contextId, pageSize: PAGE, owners: [null], pageToken: token || undefined })).nextPageToken
      return { contextId, pageSize: PAGE, owners: [null], pageToken: token }
    },
  )
  const allPage1Ms = await medianMs(() => store.list({ pageSize: 50, owners: [null] }))
  const allPage2Ms = await medianMs(
    (query) => store.list(query),
    async () => ({ pageSize: 50, owners: [null], pageToken: (await store.list({ pageSize: 50, owners: [null] })).nextPageToken }),
  )
  await store.close?.()
  process.send?.({ ready: true, kind, count, perContext: PER_CONTEXT, pageSize: PAGE, rounds, seedSeconds, firstListMs, contextPage1Ms, contextPage3Ms, allPage1Ms, allPage2Ms })
} catch (err) {
  process.send?.({ error: errorText(err) })
}
