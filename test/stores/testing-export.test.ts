import { execFile } from "node:child_process"
import { randomBytes } from "node:crypto"
import fs from "node:fs"
import path from "node:path"
import { promisify } from "node:util"
import { connect } from "nats"
import pg from "pg"
import t from "tap"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { NatsTaskStore } from "../../lib/stores/nats/store.js"
import { PostgresTaskStore } from "../../lib/stores/postgres/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { runEventLogContract, runPushStoreContract, runStoreContract, storeContractChecks } from "../../lib/testing/index.js"
import type { A2ATask } from "../../lib/types.js"
import { NATS_URL, PG_URL, ROOT, tmpDir } from "../fixtures/helpers.js"

/** A host's own store: Tasks in a Map, copied in and out; counts how often it was closed. */
class MapTaskStore implements TaskStore {
  readonly tasks = new Map<string, A2ATask>()
  closed = 0
  async get(id: string) {
    const task = this.tasks.get(id)
    return task === undefined ? undefined : structuredClone(task)
  }
  async save(task: A2ATask) {
    this.tasks.set(task.id, structuredClone(task))
  }
  async close() {
    this.closed++
  }
}

const suffix = () => randomBytes(6).toString("hex")

t.test("the four stores keep the TaskStore contract: runStoreContract gives no failures", async (t) => {
  t.same(await runStoreContract(() => new InMemoryTaskStore()), [], "InMemoryTaskStore")
  t.same(await runStoreContract(() => new FileTaskStore(tmpDir(t))), [], "FileTaskStore")

  const tables: string[] = []
  const admin = new pg.Pool({ connectionString: PG_URL, max: 1 })
  t.teardown(async () => {
    for (const table of tables) {
      const names = [table, `${table}_leases`, `${table}_pushcfg`, `${table}_outbox`, `${table}_dead`, `${table}_events`, `${table}_events_ends`]
      await admin.query(`DROP TABLE IF EXISTS ${names.map((name) => `"${name}"`).join(", ")}`)
    }
    await admin.end()
  })
  const postgres = () => {
    const table = `tn_testing_${suffix()}`
    tables.push(table)
    return new PostgresTaskStore(PG_URL, { table, leaseTable: `${table}_leases` })
  }
  t.same(await runStoreContract(postgres), [], "PostgresTaskStore")

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
    const bucket = `tn_testing_${suffix()}`
    buckets.push(bucket)
    return new NatsTaskStore(NATS_URL, { bucket, leaseBucket: `${bucket}_leases` })
  }
  t.same(await runStoreContract(nats), [], "NatsTaskStore")
})

t.test("a Map-backed custom store keeps the contract; every check makes its own store and closes it", async (t) => {
  const made: MapTaskStore[] = []
  const failures = await runStoreContract(() => {
    const store = new MapTaskStore()
    made.push(store)
    return store
  })
  t.same(failures, [])
  t.equal(made.length, storeContractChecks.length, "one store per check")
  t.ok(made.every((store) => store.closed === 1), "each closed once")
  t.same(await runPushStoreContract(() => new MapTaskStore()), [], "without push, the push contract has nothing to refuse")
  t.same(await runEventLogContract(() => new MapTaskStore()), [], "without events, neither has the event-log contract")
})

t.test("a store that drops every second save fails the checks that see it, by name", async (t) => {
  class Forgetful extends MapTaskStore {
    saves = 0
    override async save(task: A2ATask) {
      if (++this.saves % 2 === 0) return
      await super.save(task)
    }
  }
  const failures = await runStoreContract(() => new Forgetful())
  t.same(failures.map((each) => each.check).sort(), ["a later save replaces the earlier one", "each id keeps its own Task"], "the two checks that save one Task twice or many Tasks")
  t.match(failures.find((each) => each.check === "a later save replaces the earlier one")?.message, /expected "completed", got "submitted"/, "the message says what was read")
  t.match(failures.find((each) => each.check === "each id keeps its own Task")?.message, /the Task of id "a_b": expected \{"i":1\}, got undefined/)
})

t.test("a store whose get never resolves fails each check as timed out instead of hanging", async (t) => {
  class Stuck extends MapTaskStore {
    override get(): Promise<A2ATask | undefined> {
      return new Promise(() => {})
    }
  }
  const started = Date.now()
  const failures = await runStoreContract(() => new Stuck(), { timeoutMs: 50 })
  t.ok(Date.now() - started < 10_000, "the run ends")
  t.same(
    failures.map((each) => each.check),
    storeContractChecks.filter((name) => !name.startsWith("list:") && !/^(getText|delete|a save and a delete)/.test(name)),
    "every check that reads, in order",
  )
  t.ok(failures.every((each) => /^timed out after 50 ms/.test(each.message)), "each says it timed out")
  const only = await runStoreContract(() => new Stuck(), { timeoutMs: 50, only: ["get of a missing id resolves to undefined"] })
  t.same(only, [{ check: "get of a missing id resolves to undefined", message: "timed out after 50 ms: a store call never settled" }], "options.only runs the named check")
  await t.rejects(runStoreContract(() => new Stuck(), { only: ["no such check"] }), /options\.only names no check of this contract: "no such check"/)
  await t.rejects(runStoreContract(() => new Stuck(), { timeoutMs: 0 }), /options\.timeoutMs should be a positive number/)
})

t.test("a store whose save throws fails with what it threw; a close that never settles is a failure too", async (t) => {
  class Refusing extends MapTaskStore {
    override async save(): Promise<void> {
      throw new Error("disk full")
    }
  }
  const [failure] = await runStoreContract(() => new Refusing(), { only: ["a saved Task is read back"] })
  t.same(failure, { check: "a saved Task is read back", message: "threw Error: disk full" })
  class Unclosable extends MapTaskStore {
    override close(): Promise<void> {
      return new Promise(() => {})
    }
  }
  t.same(await runStoreContract(() => new Unclosable(), { timeoutMs: 50, only: ["get of a missing id resolves to undefined"] }), [
    { check: "get of a missing id resolves to undefined", message: "close() did not settle" },
  ])
})

const run = promisify(execFile)

t.test('"toolnexus/testing" resolves through the package\'s exports to the build (npm run build first)', async (t) => {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { exports: Record<string, { types: string; default: string }> }
  t.same(manifest.exports["./testing"], { types: "./dist/lib/testing/index.d.ts", default: "./dist/lib/testing/index.js" })
  const testing = (await import("toolnexus/testing")) as Record<string, unknown>
  t.same(Object.keys(testing).sort(), ["DEFAULT_CHECK_TIMEOUT_MS", "eventLogContractChecks", "pushStoreContractChecks", "runEventLogContract", "runPushStoreContract", "runStoreContract", "storeContractChecks"])
  t.same(testing.storeContractChecks, storeContractChecks, "the build holds the same checks as the source")
  t.ok(fs.existsSync(path.join(ROOT, "dist", "lib", "testing", "index.d.ts")), "with its declarations")
  t.match(fs.readFileSync(path.join(ROOT, "dist", "lib", "testing", "index.d.ts"), "utf8"), /@module toolnexus\/testing/, "the module's TSDoc survives the build")
  const { stdout } = await run(process.execPath, [path.join(ROOT, "dist", "examples", "custom-store.js")], { cwd: ROOT, timeout: 30_000 })
  t.match(stdout, /^ok: MapTaskStore keeps the TaskStore contract$/m, "examples/custom-store.ts, compiled, runs against the package's own exports")
})
