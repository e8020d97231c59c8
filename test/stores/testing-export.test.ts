import { randomBytes } from "node:crypto"
import { connect } from "nats"
import pg from "pg"
import t from "tap"
import { pageOfTasks, type TaskQuery } from "../../lib/stores/list.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { NatsTaskStore } from "../../lib/stores/nats/store.js"
import { PostgresTaskStore } from "../../lib/stores/postgres/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { runStoreContract } from "../../lib/testing/index.js"
import type { A2ATask } from "../../lib/types.js"
import { NATS_URL, PG_URL, tmpDir } from "../fixtures/helpers.js"

/*
 * toolnexus/testing: the TaskStore contract with no test runner behind it. The four stores and a
 * Map-backed store of a user's pass it; a store that drops every second save, or one whose get never
 * answers, fails it with failures that say which check broke.
 */

/** A custom store as a user would write one: a Map of JSON texts, with the shared listing rules. */
class MapStore implements TaskStore {
  private readonly tasks = new Map<string, string>()
  async get(id: string): Promise<A2ATask | undefined> {
    check(id)
    const text = this.tasks.get(id)
    return text === undefined ? undefined : (JSON.parse(text) as A2ATask)
  }
  async save(task: A2ATask): Promise<void> {
    if (task === null || typeof task !== "object" || typeof task.status?.state !== "string") throw new TypeError("save needs a Task with a status")
    check(task.id)
    this.tasks.set(task.id, JSON.stringify(task))
  }
  async delete(id: string): Promise<void> {
    check(id)
    this.tasks.delete(id)
  }
  async list(query: TaskQuery) {
    return pageOfTasks([...this.tasks.values()].map((text) => JSON.parse(text) as A2ATask), query)
  }
}
function check(id: unknown): void {
  if (typeof id !== "string" || id === "") throw new TypeError("a Task id must be a non-empty string")
}

t.test("the four stores and a Map-backed custom store keep the contract", async (t) => {
  t.same(await runStoreContract(() => new InMemoryTaskStore()), [], "InMemoryTaskStore")
  t.same(await runStoreContract(() => new FileTaskStore(tmpDir(t))), [], "FileTaskStore")
  t.same(await runStoreContract(() => new MapStore()), [], "a Map-backed store of your own")
})

t.test("Postgres and NATS keep it too, each check on tables and buckets of its own", async (t) => {
  const admin = new pg.Pool({ connectionString: PG_URL, max: 1 })
  const tables: string[] = []
  t.teardown(async () => {
    for (const table of tables) await admin.query(`DROP TABLE IF EXISTS "${table}", "${table}_leases", "${table}_pushcfg", "${table}_outbox", "${table}_dead", "${table}_events", "${table}_events_ends"`)
    await admin.end()
  })
  const postgres = () => {
    const table = `tn_contract_${randomBytes(6).toString("hex")}`
    tables.push(table)
    return new PostgresTaskStore(PG_URL, { table, leaseTable: `${table}_leases` })
  }
  t.same(await runStoreContract(postgres, { timeoutMs: 60_000 }), [], "PostgresTaskStore")

  const buckets: string[] = []
  t.teardown(async () => {
    const nc = await connect({ servers: NATS_URL })
    const jsm = await nc.jetstreamManager()
    for (const bucket of buckets) {
      for (const stream of [`KV_${bucket}`, `KV_${bucket}_leases`, `KV_${bucket}_push`, `${bucket}_events`]) await jsm.streams.delete(stream).catch(() => {})
    }
    await nc.drain()
  })
  const nats = () => {
    const bucket = `tn_contract_${randomBytes(6).toString("hex")}`
    buckets.push(bucket)
    return new NatsTaskStore(NATS_URL, { bucket, leaseBucket: `${bucket}_leases` })
  }
  t.same(await runStoreContract(nats, { timeoutMs: 60_000 }), [], "NatsTaskStore")
})

t.test("a store that drops every second save fails, and the failures name the checks that broke", async (t) => {
  const forgetful = () => {
    const store = new MapStore()
    const save = store.save.bind(store)
    let saves = 0
    store.save = async (task) => {
      if (++saves % 2 === 0) return // acknowledged, never kept
      return save(task)
    }
    return store
  }
  const failures = await runStoreContract(forgetful)
  t.ok(failures.length >= 3, `${failures.length} checks failed`)
  t.match(failures, [{ check: /^get and save/, message: /get after a second save: expected "completed", got "submitted"/ }], "the first names what it expected and what came")
  t.ok(failures.every((failure) => typeof failure.check === "string" && failure.message.length > 0), "each has a check and a message")
  t.ok(failures.some((failure) => /^ids/.test(failure.check)), "the ids check too (three of its six Tasks are gone)")
})

t.test("a store whose get never answers fails each check as hanging, and the run still ends", async (t) => {
  const stuck = () => {
    const store = new MapStore()
    store.get = () => new Promise(() => {})
    return store
  }
  const failures = await runStoreContract(stuck, { timeoutMs: 200 })
  t.ok(failures.length >= 5, "every check that reads fails")
  t.match(failures[0], { check: /^get and save/, message: /did not finish within 200 ms/ })
  await t.rejects(runStoreContract(stuck, { timeoutMs: 0 }), /options\.timeoutMs should be a whole number of ms/)
})

t.test('"toolnexus/testing" resolves through the package exports to the built module', async (t) => {
  const exported = (await import("toolnexus/testing")) as { runStoreContract?: unknown }
  t.equal(typeof exported.runStoreContract, "function")
})
