import { randomBytes } from "node:crypto"
import fs from "node:fs"
import pg from "pg"
import t, { type Test } from "tap"
import { pageOfTasks, type TaskQuery } from "../../../lib/stores/list.js"
import { PostgresTaskStore, type PostgresTaskStoreOptions } from "../../../lib/stores/postgres/store.js"
import { TaskConflictError } from "../../../lib/stores/task-store.js"
import type { A2ATask } from "../../../lib/types.js"
import { createLocalClient } from "../../../lib/client/client.js"
import { serve } from "../../../plugins/serve.js"
import { PG_URL, sampleTask, waitFor } from "../../fixtures/helpers.js"
import { storeContract } from "../../fixtures/store-contract.js"
import { pushStoreContract } from "../../fixtures/push-store-contract.js"
import { eventLogContract } from "../../fixtures/event-log-contract.js"

/**
 * Runs against a real PostgreSQL (TOOLNEXUS_TEST_PG_URL, default the local
 * test database). Every test works on tables of its own, dropped after it.
 */
const admin = new pg.Pool({ connectionString: PG_URL, max: 2 })
t.teardown(() => admin.end())

const task = sampleTask

const uniqueName = (prefix: string) => `${prefix}_${randomBytes(6).toString("hex")}`

/** Fresh table names for one test, and stores on them; after the test the stores are closed and the tables dropped. */
function tablesFor(t: Test) {
  const table = uniqueName("tn_test")
  const leaseTable = `${table}_leases`
  const stores: PostgresTaskStore[] = []
  t.teardown(async () => {
    await Promise.all(stores.map((store) => store.close()))
    await admin.query(`DROP TABLE IF EXISTS "${table}", "${leaseTable}", "${table}_pushcfg", "${table}_outbox", "${table}_dead", "${table}_events", "${table}_events_ends"`)
  })
  const open = (opts: PostgresTaskStoreOptions = {}, url = PG_URL) => {
    const store = new PostgresTaskStore(url, { table, leaseTable, ...opts })
    stores.push(store)
    return store
  }
  return { table, leaseTable, open }
}

const versionOf = async (table: string, id: string) =>
  Number((await admin.query<{ version: string }>(`SELECT version FROM "${table}" WHERE id = $1`, [id])).rows[0]?.version)

storeContract("PostgresTaskStore", {
  make: async (t, options) => tablesFor(t).open(options),
  // A jsonb string that is not JSON text: what an operator's hand-made row could hold.
  corrupt: async (_t, store, id) => {
    await admin.query(`UPDATE "${(store as PostgresTaskStore).table}" SET task = to_jsonb($1::text) WHERE id = $2`, ['{"id":', id])
  },
  watches: true,
  retention: true,
  // A trigger refusing deletes: the sweep's statement fails, saves and reads do not.
  failSweeps: async (t, store) => {
    const table = (store as PostgresTaskStore).table
    const refuse = `"${table}_refuse_delete"`
    const undo = async () => {
      await admin.query(`DROP TRIGGER IF EXISTS ${refuse} ON "${table}"`)
      await admin.query(`DROP FUNCTION IF EXISTS ${refuse}()`)
    }
    await admin.query(`CREATE FUNCTION ${refuse}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'deletes are refused here'; END $$`)
    await admin.query(`CREATE TRIGGER ${refuse} BEFORE DELETE ON "${table}" FOR EACH ROW EXECUTE FUNCTION ${refuse}()`)
    t.teardown(() => admin.query(`DROP FUNCTION IF EXISTS ${refuse}() CASCADE`))
    return undo
  },
})

pushStoreContract("PostgresTaskStore", {
  make: async (t) => {
    const { open } = tablesFor(t)
    return { store: open(), another: () => open() }
  },
  refusesTerminal: true,
  watchesOutbox: true,
  tellsOldestPending: true,
})

eventLogContract("PostgresTaskStore", {
  make: async (t, options) => {
    const { open } = tablesFor(t)
    return { store: open(options), another: () => open(options) }
  },
})

t.test("a terminal Task is never overwritten: the save is refused with what the store holds", async (t) => {
  const { open, table } = tablesFor(t)
  const store = open()
  await store.save(task("done", "working"))
  await store.save(task("done", "completed", { metadata: { by: "first" } }))
  const err = await store.save(task("done", "working")).then(
    () => undefined,
    (err: unknown) => err,
  )
  t.type(err, TaskConflictError)
  t.equal((err as TaskConflictError).taskId, "done")
  t.equal((err as TaskConflictError).stored.status.state, "completed")
  t.same((err as TaskConflictError).stored.metadata, { by: "first" })
  await t.rejects(store.save(task("done", "canceled")), TaskConflictError, "terminal over terminal is refused too")
  t.equal((await store.get("done"))?.status.state, "completed", "the row is still completed")
  t.equal(await versionOf(table, "done"), 2, "refused saves write nothing")

  await store.delete("done")
  await store.save(task("done", "working"))
  t.equal((await store.get("done"))?.status.state, "working", "after a delete the id is free again")
})

/** Every statement the pools send from here to the test's end, as its text (the pools' query put back at teardown). */
function poolStatements(t: Test): string[] {
  const statements: string[] = []
  // eslint-disable-next-line @typescript-eslint/unbound-method -- put back as it was, and called with its pool as `this`
  const query = pg.Pool.prototype.query
  pg.Pool.prototype.query = function (this: pg.Pool, ...args: unknown[]) {
    const sent = args[0] as string | { text: string }
    statements.push(typeof sent === "string" ? sent : sent.text)
    return (query as (...a: unknown[]) => unknown).apply(this, args)
  } as typeof query
  t.teardown(() => {
    pg.Pool.prototype.query = query
  })
  return statements
}

t.test("group commit: saves of many Tasks called at once share a few statements, each resolving with its row committed; a refused save fails alone", async (t) => {
  const { open, table } = tablesFor(t)
  const store = open()
  await store.save(task("gc-done", "completed"))
  const statements = poolStatements(t)
  const ids = Array.from({ length: 60 }, (_, i) => `gc-${i}`)
  // Another connection reads each row as its save resolves: an acknowledged save is committed.
  const seen = ids.map((id) => store.save(task(id, "working")).then(async () => (await admin.query(`SELECT 1 FROM "${table}" WHERE id = $1`, [id])).rowCount))
  const refused = store.save(task("gc-done", "working")).then(
    () => undefined,
    (err: unknown) => err,
  )
  t.same(await Promise.all(seen), ids.map(() => 1), "every acknowledged save is visible to another connection")
  t.type(await refused, TaskConflictError, "the terminal Task's save in the batch is refused")
  const batches = statements.filter((text) => text.includes("unnest($1::text[]")).length
  t.ok(batches >= 1 && batches <= 4, `the ${ids.length + 1} saves went in ${batches} statements`)
  t.equal(Number((await admin.query(`SELECT count(*) FROM "${table}" WHERE state = 'working'`)).rows[0].count), ids.length, "every row is stored")
  t.equal((await store.get("gc-done"))?.status.state, "completed", "the refused save wrote nothing")
})

t.test("two servers saving one Task at once", async (t) => {
  const { open, table } = tablesFor(t)
  const a = open()
  const b = open()
  await a.save(task("shared", "submitted"))
  const writes = 20
  await Promise.all(
    Array.from({ length: writes }, (_, i) => (i % 2 === 0 ? a : b).save(task("shared", i % 3 === 0 ? "input-required" : "working", { metadata: { i } }))),
  )
  t.equal(await versionOf(table, "shared"), writes + 1, "every write counted, none lost")
  const row = (await admin.query<{ state: string; task: A2ATask }>(`SELECT state, task FROM "${table}" WHERE id = 'shared'`)).rows[0]
  t.equal(row.state, row.task.status.state, "the state column agrees with the stored Task")
  t.same(await a.get("shared"), await b.get("shared"), "both servers read the same Task")

  // Both finish it at once (a cancel on one, the result on the other): exactly one wins.
  const results = await Promise.allSettled([a.save(task("shared", "completed")), b.save(task("shared", "canceled"))])
  const won = results.findIndex((result) => result.status === "fulfilled")
  const lost = results.find((result): result is PromiseRejectedResult => result.status === "rejected")
  t.not(won, -1, "one save wins")
  t.type(lost?.reason, TaskConflictError, "the other is refused")
  const winner = won === 0 ? "completed" : "canceled"
  t.equal((lost?.reason as TaskConflictError).stored.status.state, winner, "the loser learns who won")
  t.equal((await a.get("shared"))?.status.state, winner)
  t.equal(await versionOf(table, "shared"), writes + 2)
})

t.test("several servers starting at once create the tables once, without errors", async (t) => {
  const { open, table, leaseTable } = tablesFor(t)
  const stores = Array.from({ length: 4 }, () => open())
  await Promise.all(stores.map((store, i) => store.save(task(`first-${i}`))))
  for (const store of stores) t.equal((await store.list({})).totalSize, 4)
  const indexes = await admin.query<{ indexname: string }>(`SELECT indexname FROM pg_indexes WHERE tablename = $1 ORDER BY indexname`, [table])
  t.same(
    indexes.rows.map((row) => row.indexname),
    [`${table}_context`, `${table}_pkey`, `${table}_ts_id`],
  )
  t.equal((await admin.query(`SELECT 1 FROM pg_tables WHERE tablename = $1`, [leaseTable])).rowCount, 1, "the lease table too")
  const later = open()
  await later.save(task("later"))
  t.equal((await later.list({})).totalSize, 5, "a server starting later uses the tables as they are")
})

t.test("the schema an operator creates by hand, with no CREATE privilege", async (t) => {
  const source = fs.readFileSync(new URL("../../../lib/stores/postgres/schema.ts", import.meta.url), "utf8")
  const documented = source
    .split("\n")
    .filter((line) => line.startsWith(" *     "))
    .map((line) => line.slice(" *     ".length))
    .join("\n")
  t.equal(documented, PostgresTaskStore.schemaSql(), "the doc comment shows what schemaSql() gives")

  const schema = uniqueName("tn_schema")
  const role = uniqueName("tn_role")
  const table = "tasks"
  const leaseTable = "leases"
  const url = new globalThis.URL(PG_URL)
  url.username = role
  url.searchParams.set("options", `-c search_path=${schema}`)
  // The store connects on first use, so it can be made before the role it logs in as exists.
  const store = new PostgresTaskStore(url.href, { table, leaseTable })
  await admin.query(`CREATE SCHEMA "${schema}"`)
  await admin.query(`CREATE ROLE "${role}" LOGIN`)
  t.teardown(async () => {
    await store.close()
    await admin.query(`DROP SCHEMA "${schema}" CASCADE`)
    await admin.query(`DROP OWNED BY "${role}"`)
    await admin.query(`DROP ROLE "${role}"`)
  })
  await admin.query(`SET search_path TO "${schema}"; ${PostgresTaskStore.schemaSql({ table, leaseTable })}; RESET search_path`)
  await admin.query(`GRANT USAGE ON SCHEMA "${schema}" TO "${role}"`)
  await admin.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON "${schema}".tasks, "${schema}".leases TO "${role}"`)

  await store.save(task("by-hand", "working"))
  t.equal((await store.get("by-hand"))?.status.state, "working")
  t.equal((await store.list({})).totalSize, 1)
  await store.leases.renew("me", 60_000)
  t.ok(await store.leases.isAlive("me"))
  const inSchema = await admin.query(`SELECT id FROM "${schema}".tasks`)
  t.same(inSchema.rows, [{ id: "by-hand" }], "the store used the operator's tables")
})

t.test("list() gives what pageOfTasks gives over the same Tasks", async (t) => {
  const { open } = tablesFor(t)
  const store = open()
  const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()
  // Ordinary Unicode ids: one with NUL or a lone surrogate sorts by its escaped key, not as JavaScript sorts it.
  const ids = ["Abc", "abc", "a_b", "a-b", "a.b", "é", "日本", "😀x", "z", "Z", "a b", "ü", "0", "tail"]
  const owners: Array<unknown> = [undefined, "alice", "bob", null, 5, "alice"]
  const tasks: A2ATask[] = []
  for (const [i, id] of ids.entries()) {
    const owner = owners[i % owners.length]
    const internals = owner === undefined ? (i % 4 === 0 ? { toolnexus: "not an object" } : {}) : { toolnexus: { principal: owner } }
    tasks.push({
      id,
      contextId: ["ctx-1", "ctx-2", "ctx-\u0000"][i % 3],
      kind: "task",
      // Several share a timestamp, so the id decides; one has none.
      status: { state: (["completed", "working", "failed"] as const)[i % 3], ...(i === 5 ? {} : { timestamp: at(Math.floor(i / 3)) }) },
      artifacts: [{ parts: [{ kind: "text", text: `answer ${id}` }] }],
      metadata: { i, ...internals },
    })
  }
  await Promise.all(tasks.map((each) => store.save(each)))

  let queries = 0
  for (const owners of [undefined, ["alice", null], ["bob"], [null], ["mallory", null], ["alice", "bob"], []]) {
    for (const contextId of [undefined, "ctx-1", "ctx-\u0000"]) {
      for (const status of [undefined, "completed"] as const) {
        for (const statusTimestampAfter of [undefined, at(2)]) {
          for (const pageSize of [2, 50]) {
            const includeArtifacts = pageSize === 2
            const query: TaskQuery = { owners, contextId, status, statusTimestampAfter, pageSize, includeArtifacts }
            const got = []
            const want = []
            let pageToken: string | undefined
            do {
              const page = await store.list({ ...query, pageToken })
              got.push(page)
              want.push(pageOfTasks(tasks, { ...query, pageToken }))
              pageToken = page.nextPageToken || undefined
              queries++
            } while (pageToken && got.length < 20)
            t.same(got, want, JSON.stringify(query))
          }
        }
      }
    }
  }
  t.ok(queries > 168, `${queries} pages compared`)
})

t.test("strings Postgres text cannot hold are stored and found as they are", async (t) => {
  const { open } = tablesFor(t)
  const store = open()
  const nul = "a\u0000b"
  const lone = "x\ud800y"
  const weird = task(nul, "working", {
    contextId: lone,
    history: [{ kind: "message", messageId: "m\u0000", role: "user", parts: [{ kind: "text", text: `${nul} ${lone} \\u0000 😀` }] }],
    metadata: { toolnexus: { principal: nul } },
  })
  await store.save(weird)
  t.same(await store.get(nul), weird, "NUL and lone surrogates come back unchanged")
  t.equal(await store.get("a"), undefined, "the id is not cut at the NUL")
  t.equal(await store.get("a\ufffdb"), undefined, "nor mangled")
  // The escaped form another id would take: the two must never share a row.
  const lookalike = `\u0001${JSON.stringify(nul)}`
  await store.save(task(lookalike, "completed"))
  t.equal((await store.get(nul))?.status.state, "working")
  t.equal((await store.get(lookalike))?.status.state, "completed")
  await store.save(task("\ud800", "working"))
  await store.save(task("\udc00", "failed"))
  t.equal((await store.get("\ud800"))?.status.state, "working", "two lone surrogates are two ids")
  t.equal((await store.get("\udc00"))?.status.state, "failed")

  t.same((await store.list({ contextId: lone })).tasks.map((each) => each.id), [nul])
  t.same((await store.list({ contextId: "x\udbffy" })).tasks, [])
  t.same((await store.list({ owners: [nul], contextId: lone })).tasks.map((each) => each.id), [nul])
  t.same((await store.list({ owners: ["a", null], contextId: lone })).tasks, [], "another principal does not see it")
  t.same((await store.list({ owners: [nul], contextId: lone, includeArtifacts: false })).tasks[0].history, weird.history)
  const hostileToken = Buffer.from(JSON.stringify({ t: "\u0000", id: "\ud800" })).toString("base64url")
  t.equal((await store.list({ pageToken: hostileToken })).totalSize, 4, "a page token holding NUL is a cursor like any other")
  await store.delete(nul)
  t.equal(await store.get(nul), undefined)
  t.equal((await store.get(lookalike))?.status.state, "completed")
})

t.test("watch: another server's saves and deletes arrive, until unsubscribed", async (t) => {
  const { open } = tablesFor(t)
  const a = open()
  const b = open()
  const first: string[] = []
  const second: string[] = []
  const stopFirst = await a.watch((id) => first.push(id))
  const stopSecond = await a.watch((id) => second.push(id))

  await b.save(task("w-1"))
  await waitFor(() => first.includes("w-1"), 20_000, "the save's notification")
  await b.delete("w-1")
  await waitFor(() => first.filter((id) => id === "w-1").length === 2, 20_000, "the delete's notification")
  await b.delete("never-there")
  await b.save(task("a\u0000b"))
  await waitFor(() => first.includes("a\u0000b"), 20_000, "an id with a NUL, as it is")

  await stopFirst()
  await stopFirst()
  await b.save(task("w-2"))
  await waitFor(() => second.includes("w-2"), 20_000, "the still-subscribed watcher's notification")
  t.notOk(first.includes("w-2"), "an unsubscribed watcher hears nothing more")
  t.notOk(first.includes("never-there") || second.includes("never-there"), "deleting nothing announces nothing")
  t.same(second, ["w-1", "w-1", "a\u0000b", "w-2"])
  await stopSecond()

  const refused = await b.save(task("w-2", "completed")).then(() => b.save(task("w-2", "working"))).catch((err: unknown) => err)
  t.type(refused, TaskConflictError)
  const third: string[] = []
  const stopThird = await a.watch((id) => third.push(id))
  await b.save(task("w-3"))
  await waitFor(() => third.includes("w-3"), 20_000, "a new watcher after the last one left")
  t.notOk(third.includes("w-2"), "a refused save announces nothing")
  await stopThird()
})

t.test("watch comes back after its connection is killed", async (t) => {
  const { open } = tablesFor(t)
  const errors: Array<{ err: Error; operation: string }> = []
  const a = open({ onError: (err, { operation }) => errors.push({ err, operation }) })
  const b = open()
  const seen: string[] = []
  const stop = await a.watch((id) => seen.push(id))
  /** The backends that have finished running the watch's LISTEN. */
  const listening = async () =>
    (
      await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query = $1 AND state = 'idle'`, [
        `LISTEN "${a.channel}"`,
      ])
    ).rows.map((row) => row.pid)
  const killed = await admin.query<{ pid: number }>(
    `SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query = $1`,
    [`LISTEN "${a.channel}"`],
  )
  t.equal(killed.rowCount, 1, "the watch connection was found and killed")
  await waitFor(() => errors.length > 0, 20_000, "the drop reported to onError")
  t.equal(errors[0].operation, "watch")
  // Notifications sent while it was down are lost: save once it listens again, on a new connection.
  await waitFor(async () => (await listening()).some((pid) => pid !== killed.rows[0].pid), 20_000, "the watch to listen again")
  await b.save(task("after"))
  await waitFor(() => seen.includes("after"), 20_000, "a notification on the new connection")
  t.same(seen, ["after"])
  await stop()
})

t.test("a throwing watcher or onError does not break watching", async (t) => {
  const { open } = tablesFor(t)
  const a = open({
    onError: () => {
      throw new Error("onError itself fails")
    },
  })
  const b = open()
  const seen: string[] = []
  const stopBad = await a.watch(() => {
    throw new Error("watcher fails")
  })
  const stopGood = await a.watch((id) => seen.push(id))
  await b.save(task("x-1"))
  await b.save(task("x-2"))
  await waitFor(() => seen.includes("x-2"), 20_000, "both notifications")
  t.same(seen, ["x-1", "x-2"])
  await stopBad()
  await stopGood()
})

t.test("leases: renewed by the database clock, seen by every server, expiring, released", async (t) => {
  const { open, leaseTable } = tablesFor(t)
  const a = open()
  const b = open()
  t.notOk(await b.leases.isAlive("server-a"), "no lease before the first renew")
  await a.leases.renew("server-a", 60_000)
  t.ok(await a.leases.isAlive("server-a"))
  t.ok(await b.leases.isAlive("server-a"), "another server sees it")
  t.notOk(await b.leases.isAlive("server-b"))

  await a.leases.renew("short", 200)
  await waitFor(async () => !(await b.leases.isAlive("short")), 20_000, "the short lease to expire")
  await a.leases.renew("short", 60_000)
  t.ok(await b.leases.isAlive("short"), "renewing revives it")

  const expires = await admin.query<{ ahead: number }>(`SELECT extract(epoch FROM expires_at - now()) AS ahead FROM "${leaseTable}" WHERE instance = 'short'`)
  t.ok(expires.rows[0].ahead > 50 && expires.rows[0].ahead <= 60, "expires_at is the database's now() + ttl")

  await a.leases.release("server-a")
  t.notOk(await b.leases.isAlive("server-a"), "released")
  await a.leases.release("server-a")

  await admin.query(`INSERT INTO "${leaseTable}" VALUES ('long-gone', now() - interval '2 hours'), ('just-gone', now() - interval '1 minute')`)
  await b.leases.renew("server-b", 60_000)
  const left = await admin.query<{ instance: string }>(`SELECT instance FROM "${leaseTable}" ORDER BY instance`)
  t.same(left.rows.map((row) => row.instance), ["just-gone", "server-b", "short"], "leases expired long ago are pruned")

  await t.rejects(a.leases.renew("x", 0), /ttlMs should be a number of milliseconds > 0/)
  await t.rejects(a.leases.renew("x", Number.NaN), RangeError)
})

t.test("without the driver package, every operation says how to install it", async (t) => {
  const missing = new PostgresTaskStore(PG_URL, { driverModule: "toolnexus-no-such-driver" })
  const message = 'PostgresTaskStore needs the "toolnexus-no-such-driver" package: npm install toolnexus-no-such-driver'
  await t.rejects(missing.get("x"), { message })
  await t.rejects(missing.save(task("x")), { message }, "and the next call tries again")
  await t.rejects(missing.watch(() => {}), { message })
  await t.rejects(missing.leases.isAlive("x"), { message })
  await missing.close()

  const wrong = new PostgresTaskStore(PG_URL, { driverModule: "node:path" })
  await t.rejects(wrong.get("x"), /the "node:path" package has no Pool and Client classes/)
  await wrong.close()
})

t.test("bad options fail at construction, naming the option", async (t) => {
  const make = (url: unknown, opts?: unknown) => () => new PostgresTaskStore(url as string, opts as PostgresTaskStoreOptions)
  t.throws(make("mysql://u:secret@h/db"), { message: /url should be a connection string starting with postgres:\/\/ or postgresql:\/\// })
  t.throws(make("mysql://u:secret@h/db"), { message: /^(?!.*secret)/ }, "the url (and its password) is not echoed")
  t.throws(make(undefined), /url should be/)
  t.doesNotThrow(make("postgresql://h/db"))
  t.doesNotThrow(make("POSTGRES://h/db"))
  t.throws(make(PG_URL, null), /opts should be an object/)
  t.throws(make(PG_URL, { table: "Tasks" }), /opts\.table should be a lowercase SQL name .*, got "Tasks"/)
  t.throws(make(PG_URL, { table: 'x"; DROP TABLE y; --' }), /opts\.table should be/)
  t.throws(make(PG_URL, { table: "a".repeat(49) }), /opts\.table .*at most 48 characters/)
  t.throws(make(PG_URL, { table: "1st" }), /opts\.table/)
  t.throws(make(PG_URL, { leaseTable: "lease-table" }), /opts\.leaseTable should be/)
  t.throws(make(PG_URL, { leaseTable: 7 }), /opts\.leaseTable should be .*, got a number/)
  t.throws(make(PG_URL, { table: "same", leaseTable: "same" }), /opts\.leaseTable should differ from opts\.table/)
  t.throws(make(PG_URL, { channel: "my channel" }), /opts\.channel should be/)
  t.throws(make(PG_URL, { poolSize: 0 }), /opts\.poolSize should be a positive integer/)
  t.throws(make(PG_URL, { poolSize: 2.5 }), /opts\.poolSize/)
  t.throws(make(PG_URL, { onError: "log" }), /opts\.onError should be a function/)
  t.throws(make(PG_URL, { driverModule: "" }), /opts\.driverModule should be a package name/)
  t.throws(() => PostgresTaskStore.schemaSql({ table: "Bad" }), /opts\.table/)

  const store = new PostgresTaskStore(PG_URL, { table: "t_x" })
  t.equal(store.channel, "t_x_changes", "the channel is named after the table")
  t.equal(store.leaseTable, "toolnexus_leases")
  await store.close()
})

t.test("bad calls are refused before any SQL", async (t) => {
  const { open } = tablesFor(t)
  const store = open()
  await t.rejects(store.save(null as unknown as A2ATask), /needs a Task object/)
  await t.rejects(store.save(task("")), /non-empty string/)
  await t.rejects(store.save({ id: "no-status" } as A2ATask), /status\.state/)
  await t.rejects(store.save(task("x".repeat(2049))), /ids of up to 2048 bytes/)
  await t.rejects(store.save(task("ts", "working", { status: { state: "working", timestamp: "9".repeat(300) } })), /status\.timestamp/)
  await store.save(task("x".repeat(2048)))
  t.ok(await store.get("x".repeat(2048)), "an id at the limit is stored")
  t.equal(await store.get("x".repeat(5000)), undefined, "a longer id is simply not there")
  await t.rejects(store.list({ pageSize: 0 }), /pageSize should be a positive integer/)
  await t.rejects(store.watch("no" as unknown as () => void), /needs a function/)
})

t.test("an unreachable server is an error at first use, not in the constructor; close() is idempotent and final", async (t) => {
  const unreachable = new PostgresTaskStore("postgres://postgres@127.0.0.1:1/test", { table: uniqueName("tn_test") })
  await t.rejects(unreachable.open(), { code: "ECONNREFUSED" }, "an unreachable server is an error, not a hang")
  await t.rejects(unreachable.get("x"), { code: "ECONNREFUSED" }, "a failed attempt is forgotten: the next call tries again")
  await t.rejects(unreachable.watch(() => {}), { code: "ECONNREFUSED" })
  await unreachable.close()
  await unreachable.close()

  const { open } = tablesFor(t)
  const store = open()
  await store.save(task("c-1"))
  const stop = await store.watch(() => {})
  const closing = store.close()
  t.equal(store.close(), closing, "a second close() is the same close")
  await closing
  await stop()
  await t.rejects(store.get("c-1"), /PostgresTaskStore is closed/)
  await t.rejects(store.save(task("c-2")), /PostgresTaskStore is closed/)
  await t.rejects(store.open(), /PostgresTaskStore is closed/)
  await t.rejects(store.watch(() => {}), /PostgresTaskStore is closed/)
  t.equal((await open().get("c-1"))?.id, "c-1", "what was saved stays")

  const never = new PostgresTaskStore(PG_URL)
  await never.close()

  const racing = open()
  const watching = racing.watch(() => {})
  await racing.close()
  await t.rejects(watching, /closed while watch\(\) was starting/, "close() during watch() ends the new connection")
})

t.test("close() waits for the saves and deletes already called", async (t) => {
  const { open } = tablesFor(t)
  const store = open()
  await store.save(task("gone"))
  const writes = [...Array.from({ length: 20 }, (_, i) => store.save(task(`c-${i}`))), store.delete("gone")]
  await store.close()
  await Promise.all(writes)
  const other = open()
  t.equal((await other.list({})).totalSize, 20, "every save called before close landed")
  t.equal(await other.get("gone"), undefined, "and the delete")
})

t.test("an idle connection killed under the pool is reported, and the next query reconnects", async (t) => {
  const { open, table } = tablesFor(t)
  const errors: Array<{ err: Error; operation: string }> = []
  const store = open({ onError: (err, { operation }) => errors.push({ err, operation }), poolSize: 1 })
  await store.save(task("p-1"))
  await store.get("p-1")
  const killed = await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE $1`, [
    `%FROM "${table}" WHERE id = ANY%`,
  ])
  t.equal(killed.rowCount, 1)
  await waitFor(() => errors.length > 0, 20_000, "the error reported")
  t.equal(errors[0].operation, "connection")
  t.equal((await store.get("p-1"))?.id, "p-1")
})

t.test("retention: thousands of expired rows go in batches; a row another transaction holds is skipped, not waited for; two servers sweeping at once stay out of each other's way", async (t) => {
  const { open, table } = tablesFor(t)
  const seed = open()
  await seed.open()
  const old = new Date(Date.now() - 2 * 86_400_000).toISOString()
  // 2,500 expired rows: three batches, written by SQL to keep the test quick.
  await admin.query(
    `INSERT INTO "${table}" (id, task, state, status_ts)
     SELECT 'old-' || i, jsonb_build_object('id', 'old-' || i, 'kind', 'task', 'status', jsonb_build_object('state', 'completed', 'timestamp', $1::text)), 'completed', $1
       FROM generate_series(1, 2500) AS i`,
    [old],
  )
  await seed.save(task("held", "failed", { status: { state: "failed", timestamp: old } }))
  await seed.save(task("running", "working", { status: { state: "working", timestamp: old } }))
  const heard = new Set<string>()
  t.teardown(await seed.watch((id) => heard.add(id)))
  const holder = new pg.Client({ connectionString: PG_URL })
  await holder.connect()
  t.teardown(() => holder.end())
  await holder.query("BEGIN")
  await holder.query(`SELECT 1 FROM "${table}" WHERE id = 'held' FOR UPDATE`)

  const reported: Error[] = []
  const retention = { terminalTtl: "1d", sweepInterval: 10 }
  const sweepers = [open({ retention, onError: (err) => reported.push(err) }), open({ retention, onError: (err) => reported.push(err) })]
  await Promise.all(sweepers.map((store) => store.open()))
  const ids = async () => (await admin.query<{ id: string }>(`SELECT id FROM "${table}" ORDER BY id`)).rows.map((row) => row.id)
  await waitFor(async () => (await ids()).length === 2, 20_000, "every expired row but the held one deleted")
  t.same(await ids(), ["held", "running"], "the held row was skipped while the others went; the unfinished one stays")
  await holder.query("COMMIT")
  await waitFor(async () => (await ids()).length === 1, 20_000, "the held row deleted once it is free")
  t.same(await ids(), ["running"])
  await waitFor(() => heard.size === 2501, 20_000, "a notification for every deleted row")
  t.ok(heard.has("held") && heard.has("old-1") && heard.has("old-2500"), "NOTIFY names each deleted id")
  t.same(reported, [], "neither server's sweep failed")
})

t.test("serve()'s a2a.retention reaches the store the plugin builds from a postgres:// selector", async (t) => {
  const { open, table } = tablesFor(t)
  const other = open()
  const old = new Date(Date.now() - 2 * 86_400_000).toISOString()
  const served = await serve("127.0.0.1:0", {
    client: createLocalClient(() => "done"),
    logger: false,
    a2a: { store: `${PG_URL}?table=${table}`, retention: { terminalTtl: "1d", sweepInterval: 10 } },
  })
  t.teardown(() => served.close())
  await other.save(task("expired", "completed", { status: { state: "completed", timestamp: old } }))
  await other.save(task("recent", "completed", { status: { state: "completed", timestamp: new Date().toISOString() } }))
  await waitFor(async () => (await other.get("expired")) === undefined, 20_000, "the served store's sweep")
  t.equal((await other.get("recent"))?.status.state, "completed", "a recent finished Task stays")
})

/** Events from position `from` on, each its text tagged. */
const logged = (from: number, count: number, tag = "a") =>
  Array.from({ length: count }, (_, i) => ({ position: from + i, event: { kind: "artifact-update", text: `${tag}${from + i}` } }))
const textsOf = (events: Array<{ event: Record<string, unknown> }>) => events.map((e) => e.event.text)
const eventRows = async (table: string) =>
  (await admin.query<{ task_id: string; n: number }>(`SELECT task_id, count(*)::int AS n FROM "${table}_events" GROUP BY task_id ORDER BY task_id`)).rows
const endRows = async (table: string) => (await admin.query<{ task_id: string }>(`SELECT task_id FROM "${table}_events_ends" ORDER BY task_id`)).rows.map((row) => row.task_id)

t.test("event log: delete and the Task retention sweep take the Task's events and its end, in the statement that deletes the Task", async (t) => {
  const { open, table } = tablesFor(t)
  const store = open({ retention: { terminalTtl: "1d", sweepInterval: 10 } })
  const old = new Date(Date.now() - 2 * 86_400_000).toISOString()
  // The logs first: the sweep may run as soon as an expired Task is saved.
  for (const id of ["deleted", "expired", "kept"]) {
    await store.events.append(id, logged(1, 3))
    await store.events.ended(id)
  }
  await store.save(task("deleted", "working"))
  await store.save(task("kept", "completed", { status: { state: "completed", timestamp: new Date().toISOString() } }))
  t.same(await endRows(table), ["deleted", "expired", "kept"])

  // A delete that cannot take the events takes nothing: one statement.
  const refuse = `"${table}_refuse_event_delete"`
  await admin.query(`CREATE FUNCTION ${refuse}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'event deletes are refused here'; END $$`)
  await admin.query(`CREATE TRIGGER ${refuse} BEFORE DELETE ON "${table}_events" FOR EACH ROW EXECUTE FUNCTION ${refuse}()`)
  t.teardown(() => admin.query(`DROP FUNCTION IF EXISTS ${refuse}() CASCADE`))
  await t.rejects(store.delete("deleted"), /event deletes are refused here/)
  t.equal((await store.get("deleted"))?.id, "deleted", "the Task stays when its events cannot go")
  t.same(await endRows(table), ["deleted", "expired", "kept"], "and so does its end")
  await admin.query(`DROP FUNCTION ${refuse}() CASCADE`)

  await store.delete("deleted")
  await store.save(task("expired", "completed", { status: { state: "completed", timestamp: old } }))
  await waitFor(async () => (await store.get("expired")) === undefined, 20_000, "the expired Task swept")
  t.same(await eventRows(table), [{ task_id: "kept", n: 3 }], "only the kept Task's events are left")
  t.same(await endRows(table), ["kept"], "and only its end")
  t.same(await store.events.read("expired", 0, 10), [])
  t.equal(await store.events.lastPosition("deleted"), 0)
})

t.test("event log: a restarted store reads the log, goes on from it, and removes an ended one when the store that ended it said", async (t) => {
  const { open, table } = tablesFor(t)
  const first = open({ eventRetentionMs: 3_600_000 })
  await first.events.append("running", logged(1, 3))
  await first.events.append("long", logged(1, 2))
  await first.events.ended("long")
  await first.close()
  const restarted = open({ eventRetentionMs: 50 })
  t.same(textsOf(await restarted.events.read("running", 0, 10)), ["a1", "a2", "a3"], "the log outlived the store")
  t.equal(await restarted.events.lastPosition("running"), 3)
  t.same(await restarted.events.append("running", logged(3, 2, "b")), [3], "and appends go on from it")
  await restarted.events.append("short", logged(1, 2))
  await restarted.events.ended("short")
  await waitFor(async () => (await restarted.events.read("short", 0, 10)).length === 0, 15_000, "the log ended by this store to go")
  t.same(textsOf(await restarted.events.read("long", 0, 10)), ["a1", "a2"], "the log the first store ended keeps its hour")
  const { rows } = await admin.query<{ left: number }>(`SELECT extract(epoch FROM expires_at - now())::float8 AS left FROM "${table}_events_ends" WHERE task_id = 'long'`)
  t.ok(rows[0].left > 3500 && rows[0].left <= 3600, "its end is where the first store put it, by the database's clock")
})

t.test("event log: events and ids Postgres text cannot hold round-trip; the event is kept as the JSON text given; an id too long is refused", async (t) => {
  const { open, table } = tablesFor(t)
  const store = open()
  const odd = "a\u0000b\ud800"
  const event = { kind: "artifact-update", text: odd, nested: { order: [3, 1, 2], "b-key": 1, "a-key": 2 } }
  t.same(await store.events.append(odd, [{ position: 1, event }]), [])
  t.same(await store.events.read(odd, 0, 10), [{ position: 1, event }], "the id and the event as given")
  t.equal(await store.events.lastPosition(odd), 1)
  const { rows } = await admin.query<{ event: string }>(`SELECT event FROM "${table}_events"`)
  t.equal(rows[0].event, JSON.stringify(event), "stored as its JSON text, key order and escapes as written")
  await t.rejects(store.events.append("x".repeat(2049), logged(1, 1)), /ids of up to 2048 bytes/)
  await t.rejects(store.events.ended("x".repeat(2049)), /ids of up to 2048 bytes/)
  t.same(await store.events.read("x".repeat(5000), 0, 10), [], "a longer id simply has no log")
  t.same(await store.events.append("t", []), [], "an empty append takes nothing")
  t.same(await store.events.read(odd, 0, 0), [], "a limit of 0 reads nothing")
  t.same(await store.events.read(odd, Number.MAX_SAFE_INTEGER, 10), [])
  t.same(await store.events.read(odd, 0.5, 10), [{ position: 1, event }], "after a fractional position: the positions above it")
  t.same(await store.events.read(odd, -1, 10), [{ position: 1, event }])
})

t.test("event log: a later end does not extend the log; appends after the end go with it", async (t) => {
  const { open, table } = tablesFor(t)
  const store = open({ eventRetentionMs: 300 })
  await store.events.append("t-1", logged(1, 2))
  await store.events.ended("t-1")
  const expiry = async () => (await admin.query<{ at: Date }>(`SELECT expires_at AS at FROM "${table}_events_ends"`)).rows[0]?.at.getTime()
  const first = await expiry()
  await new Promise((resolve) => setTimeout(resolve, 50))
  await store.events.ended("t-1")
  t.equal(await expiry(), first, "the first end counts")
  t.same(await store.events.append("t-1", logged(3, 1)), [], "an append after the end is taken")
  await waitFor(async () => (await store.events.lastPosition("t-1")) === 0, 15_000, "the log to go")
  t.same(await eventRows(table), [], "with the event appended after its end")
  t.equal(await expiry(), undefined, "and its end")
})

t.test("event log: the appends and ends of many Tasks called at once share a few statements; a position two appends give is the first's", async (t) => {
  const { open, table } = tablesFor(t)
  const store = open()
  await store.open()
  const statements = poolStatements(t)
  const ids = Array.from({ length: 40 }, (_, i) => `b-${i}`)
  const held = await Promise.all([...ids.map((id) => store.events.append(id, logged(1, 2))), store.events.append("b-0", logged(2, 2))])
  t.same(held, [...ids.map(() => []), [2]], "each append is told only the position another took first")
  await Promise.all(ids.map((id) => store.events.ended(id)))
  const appends = statements.filter((text) => text.includes(`INSERT INTO "${table}_events" `)).length
  const ends = statements.filter((text) => text.includes(`INSERT INTO "${table}_events_ends" `)).length
  t.ok(appends >= 1 && appends <= 4, `the ${ids.length + 1} appends went in ${appends} statements`)
  t.ok(ends >= 1 && ends <= 4, `the ${ids.length} ends went in ${ends} statements`)
  t.equal(Number((await admin.query(`SELECT count(*) FROM "${table}_events"`)).rows[0].count), ids.length * 2 + 1, "every event is stored once")
  t.equal(Number((await admin.query(`SELECT count(*) FROM "${table}_events_ends"`)).rows[0].count), ids.length, "every end is stored")
})

t.test("event log: a sweep removes hundreds of ended logs in batches; two stores sweeping at once stay out of each other's way", async (t) => {
  const { open, table } = tablesFor(t)
  const seed = open()
  await seed.open()
  await admin.query(`INSERT INTO "${table}_events" (task_id, position, event) SELECT 'log-' || i, p, '{}' FROM generate_series(1, 250) AS i, generate_series(1, 4) AS p`)
  await admin.query(`INSERT INTO "${table}_events_ends" (task_id, expires_at) SELECT 'log-' || i, now() - interval '1 second' FROM generate_series(1, 250) AS i`)
  await seed.events.append("running", logged(1, 2))
  const reported: Error[] = []
  const sweepers = [open({ eventRetentionMs: 0, onError: (err) => reported.push(err) }), open({ eventRetentionMs: 0, onError: (err) => reported.push(err) })]
  await Promise.all(sweepers.map((store) => store.open()))
  await waitFor(async () => (await endRows(table)).length === 0, 15_000, "every ended log removed")
  t.same(await eventRows(table), [{ task_id: "running", n: 2 }], "the log that did not end stays")
  t.same(reported, [], "neither sweep failed")
})

t.test("event log: bad options fail at construction, naming the option; calls after close are refused", async (t) => {
  const make = (opts: unknown) => () => new PostgresTaskStore(PG_URL, opts as PostgresTaskStoreOptions)
  t.throws(make({ eventTable: "Events" }), /opts\.eventTable should be a lowercase SQL name .*, got "Events"/)
  t.throws(make({ table: "x", eventTable: "x_outbox" }), /opts\.eventTable should name tables of its own, but "x_outbox" is another table of the store/)
  t.throws(make({ eventTable: "toolnexus_leases" }), /opts\.eventTable should name tables of its own/)
  t.throws(make({ table: "x_ends", eventTable: "x" }), /"x_ends" is another table of the store/)
  t.throws(make({ eventRetentionMs: -1 }), /PostgresTaskStore options\.eventRetentionMs should be a whole number of milliseconds >= 0/)
  t.throws(make({ eventRetentionMs: "1h" }), /eventRetentionMs/)
  t.equal(new PostgresTaskStore(PG_URL, { table: "t_x" }).eventTable, "t_x_events", "named after the Tasks table")
  t.match(PostgresTaskStore.schemaSql({ eventTable: "ev" }), /CREATE TABLE IF NOT EXISTS "ev_ends"/)

  const { open } = tablesFor(t)
  const store = open()
  await store.events.append("t-1", logged(1, 1))
  await store.close()
  await t.rejects(store.events.append("t-1", logged(2, 1)), /PostgresTaskStore is closed/)
  await t.rejects(store.events.read("t-1", 0, 10), /PostgresTaskStore is closed/)
  await t.rejects(store.events.lastPosition("t-1"), /PostgresTaskStore is closed/)
  await t.rejects(store.events.ended("t-1"), /PostgresTaskStore is closed/)
})

t.test("push: outbox and dead-letter tables made before trace contexts were kept gain the column on open; their rows read without one", async (t) => {
  const { table, leaseTable, open } = tablesFor(t)
  // The whole schema as it was: the push tables without trace_context, and a notification enqueued then.
  const before = PostgresTaskStore.schemaSql({ table, leaseTable })
    .split("\n")
    .filter((line) => !line.includes("ADD COLUMN IF NOT EXISTS trace_context"))
    .join("\n")
  await admin.query(before)
  const traceColumns = async () =>
    (await admin.query<{ table_name: string }>(`SELECT table_name FROM information_schema.columns WHERE table_name = ANY ($1) AND column_name = 'trace_context' ORDER BY table_name`, [[`${table}_outbox`, `${table}_dead`]])).rows.map(
      (row) => row.table_name,
    )
  t.same(await traceColumns(), [], "the old tables have no trace_context")
  const old = task("old", "working")
  const config = { taskId: "old", id: "a", version: "1.0", url: "https://hooks.example.com/a", createdAt: "2026-01-01T00:00:00.000Z" }
  await admin.query(`INSERT INTO "${table}" (id, task, state) VALUES ('old', $1::jsonb, 'working')`, [JSON.stringify(old)])
  await admin.query(`INSERT INTO "${table}_pushcfg" (task_id, id, config) VALUES ('old', 'a', $1::jsonb)`, [JSON.stringify(config)])
  await admin.query(`INSERT INTO "${table}_outbox" (key, task_id, config_id, event, not_before, enqueued_at) VALUES ('k-old', 'old', 'a', $1::jsonb, 0, 0)`, [
    JSON.stringify({ kind: "status", task: old }),
  ])

  const store = open()
  const [claim] = await store.push.claim("i-1", 10, 60_000, Date.now())
  t.same(await traceColumns(), [`${table}_dead`, `${table}_outbox`], "opening the store added the column to both")
  t.match(claim.item, { key: "k-old", event: { task: { status: { state: "working" } } } }, "the old notification is claimed")
  t.notOk("traceContext" in claim.item, "without a trace context")
  await store.push.deadLetter(claim, "gone")
  const [dead] = await store.push.listDeadLetters(1)
  t.equal(dead.key, "k-old")
  t.notOk("traceContext" in dead, "and so is its dead letter")

  const traceContext = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", tracestate: "vendor=opaque" }
  const done = task("old", "completed")
  await store.push.saveWithEvent(done, { kind: "status", task: done, traceContext })
  const [next] = await store.push.claim("i-1", 10, 60_000, Date.now())
  t.same(next.item.traceContext, traceContext, "a notification enqueued now keeps its trace context")
})

t.test("push: a save written alone (its batch failed) keeps its notifications' trace context too", async (t) => {
  const { table, open } = tablesFor(t)
  const store = open()
  const traceOf = (i: number) => ({ traceparent: `00-${String(i).padStart(32, "0")}-00f067aa0ba902b7-01` })
  const ids = ["alone-1", "alone-2", "poison"]
  for (const id of ids) {
    await store.save(task(id))
    await store.push.putConfig({ taskId: id, id: "a", version: "1.0", url: "https://hooks.example.com/a", createdAt: "2026-01-01T00:00:00.000Z" })
  }
  // A trigger failing one row's write: the batch it is in fails, and each save is written again alone.
  const refuse = `"${table}_refuse_poison"`
  await admin.query(`CREATE FUNCTION ${refuse}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.id = 'poison' THEN RAISE EXCEPTION 'poison is refused'; END IF; RETURN NEW; END $$`)
  await admin.query(`CREATE TRIGGER ${refuse} BEFORE UPDATE ON "${table}" FOR EACH ROW EXECUTE FUNCTION ${refuse}()`)
  t.teardown(() => admin.query(`DROP FUNCTION IF EXISTS ${refuse}() CASCADE`))
  const statements = poolStatements(t)
  const saved = await Promise.allSettled(
    ids.map((id, i) => {
      const working = task(id, "working")
      return store.push.saveWithEvent(working, { kind: "status", task: working, traceContext: traceOf(i + 1) })
    }),
  )
  t.same(
    saved.map((result) => result.status),
    ["fulfilled", "fulfilled", "rejected"],
    "the refused row fails alone",
  )
  t.ok(
    statements.some((text) => text.includes("jsonb_array_elements($9::jsonb)")),
    "a save with its events was written alone",
  )
  const claims = await store.push.claim("i-1", 10, 60_000, Date.now())
  t.same(
    claims.map((claim) => [claim.item.taskId, claim.item.traceContext]).sort(),
    [
      ["alone-1", traceOf(1)],
      ["alone-2", traceOf(2)],
    ],
    "each written alone with its trace context",
  )
})
