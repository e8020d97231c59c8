import { randomBytes, randomUUID } from "node:crypto"
import { connect } from "nats"
import pg from "pg"
import t, { type Test } from "tap"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { NatsTaskStore } from "../../lib/stores/nats/store.js"
import { PostgresTaskStore } from "../../lib/stores/postgres/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { dispatcherFor, NATS_URL, PG_URL, rpc, tmpDir } from "../fixtures/helpers.js"

// Tenants: a Task created under one tenant is "not found" under any other, and one created under none only
// under none, on every store, for every operation that names a Task, and in ListTasks' pages and counts.

const unique = () => randomBytes(6).toString("hex")

const stores: Record<string, (t: Test) => Promise<TaskStore>> = {
  InMemoryTaskStore: async () => new InMemoryTaskStore(),
  FileTaskStore: async (t) => new FileTaskStore(tmpDir(t)),
  PostgresTaskStore: async (t) => {
    const table = `tn_tenant_${unique()}`
    const store = new PostgresTaskStore(PG_URL, { table, leaseTable: `${table}_leases` })
    t.teardown(async () => {
      await store.close()
      const admin = new pg.Pool({ connectionString: PG_URL, max: 1 })
      const names = [table, `${table}_leases`, `${table}_pushcfg`, `${table}_outbox`, `${table}_dead`, `${table}_events`, `${table}_events_ends`]
      await admin.query(`DROP TABLE IF EXISTS ${names.map((name) => `"${name}"`).join(", ")}`)
      await admin.end()
    })
    return store
  },
  NatsTaskStore: async (t) => {
    const suffix = randomUUID().replaceAll("-", "")
    const opts = { bucket: `tn_tenant_${suffix}`, leaseBucket: `tn_tenant_leases_${suffix}` }
    const store = new NatsTaskStore(NATS_URL, opts)
    t.teardown(async () => {
      await store.close()
      const nc = await connect({ servers: NATS_URL })
      const jsm = await nc.jetstreamManager()
      for (const bucket of [opts.bucket, opts.leaseBucket, `${opts.bucket}_push`]) await jsm.streams.delete(`KV_${bucket}`).catch(() => {})
      await jsm.streams.delete(`${opts.bucket}_events`).catch(() => {})
      await nc.drain()
    })
    return store
  },
}

const message = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra })
const tenantOf = (tenant: string | undefined) => (tenant === undefined ? {} : { tenant })

for (const [name, make] of Object.entries(stores)) {
  t.test(`${name}: a Task is reached only under the tenant it was created under`, async (t) => {
    const store = await make(t)
    // The model answers "what next?" first, so the Task waits for input: it can be continued, canceled and subscribed to.
    const { call, runner } = dispatcherFor(({ messages }) => (messages.at(-1)?.content === "hello" ? { text: "What next?", inputRequired: true } : "DONE"), store)
    t.teardown(() => runner.stop(1000))
    const send = async (tenant: string | undefined, extra: Record<string, unknown> = {}) =>
      (await call(rpc("SendMessage", { ...tenantOf(tenant), message: message("hello", extra) }), "1.0")).result?.task

    const inA = await send("acme")
    const inB = await send("globex")
    const inNone = await send(undefined)
    t.ok(inA?.id && inB?.id && inNone?.id, "a Task was created under each")

    const get = async (id: string, tenant: string | undefined) => call(rpc("GetTask", { id, ...tenantOf(tenant) }), "1.0")
    t.equal((await get(inA.id, "acme")).result?.id, inA.id, "its own tenant reads it")
    for (const [id, tenant] of [[inA.id, "globex"], [inA.id, undefined], [inNone.id, "acme"], [inB.id, ""]] as const) {
      t.equal((await get(id, tenant)).error?.code, -32001, `GetTask of a Task not of tenant ${JSON.stringify(tenant)}: not found`)
    }
    t.equal((await get(inNone.id, undefined)).result?.id, inNone.id, "no tenant reads the Task of no tenant")
    t.equal((await get(inNone.id, "")).result?.id, inNone.id, 'an empty tenant (ProtoJSON\'s unset) is no tenant')
    t.equal((await call(rpc("tasks/get", { id: inNone.id }), "0.3")).result?.id, inNone.id, "a 0.3 request is of no tenant")
    t.equal((await call(rpc("tasks/get", { id: inA.id }), "0.3")).error?.code, -32001, "and reaches no tenant's Task")

    const list = async (tenant: string | undefined) => (await call(rpc("ListTasks", { ...tenantOf(tenant) }), "1.0")).result
    const listed = { acme: await list("acme"), globex: await list("globex"), none: await list(undefined), other: await list("initech") }
    t.same(listed.acme.tasks.map((task: { id: string }) => task.id), [inA.id], "ListTasks lists the tenant's own")
    t.equal(listed.acme.totalSize, 1, "and counts only them")
    t.same(listed.globex.tasks.map((task: { id: string }) => task.id), [inB.id])
    t.same(listed.none.tasks.map((task: { id: string }) => task.id), [inNone.id], "no tenant lists only the Tasks of no tenant")
    t.equal(listed.none.totalSize, 1)
    t.equal(listed.other.totalSize, 0, "a tenant with no Tasks lists none")

    t.equal(inA.status.state, "TASK_STATE_INPUT_REQUIRED", "a blocking send answered when the Task waits for input")
    const wrong = "globex"
    t.equal((await call(rpc("CancelTask", { id: inA.id, tenant: wrong }), "1.0")).error?.code, -32001, "CancelTask under another tenant: not found")
    t.equal((await call(rpc("SubscribeToTask", { id: inA.id, tenant: wrong }), "1.0")).error?.code, -32001, "SubscribeToTask too")
    const follow = await call(rpc("SendMessage", { tenant: wrong, message: message("more", { taskId: inA.id }) }), "1.0")
    t.equal(follow.error?.code, -32001, "continuing it under another tenant: not found")
    t.equal((await get(inA.id, "acme")).result?.status?.state, "TASK_STATE_INPUT_REQUIRED", "none of that changed it")

    const continued = await call(rpc("SendMessage", { tenant: "acme", message: message("more", { taskId: inA.id }) }), "1.0")
    t.equal(continued.result?.task?.id, inA.id, "its own tenant continues it")
    const canceled = await call(rpc("CancelTask", { id: inB.id, tenant: "globex" }), "1.0")
    t.equal(canceled.result?.status?.state, "TASK_STATE_CANCELED", "and cancels its own")
    t.equal((await list("acme")).totalSize, 1, "a continued Task stays in its tenant")
  })
}

t.test("a tenant that is not a string, or too long, is refused naming the field", async (t) => {
  const { call, store } = dispatcherFor()
  for (const tenant of [42, { name: "x" }, "t".repeat(1025)]) {
    const answer = await call(rpc("GetTask", { id: "x", tenant }), "1.0")
    t.equal(answer.error?.code, -32602, `tenant ${JSON.stringify(tenant).slice(0, 20)}`)
    t.match(answer.error?.message, /params\.tenant/)
  }
  const sent = await call(rpc("SendMessage", { tenant: 7, message: message("hi") }), "1.0")
  t.equal(sent.error?.code, -32602, "a send with a bad tenant starts nothing")
  t.equal((await store.list!({})).totalSize, 0)
})

t.test("the model's history of a context holds only the Tasks of the Task's own tenant", async (t) => {
  const prompts: string[][] = []
  const { call, runner } = dispatcherFor(({ messages }) => {
    prompts.push(messages.map((m) => (typeof m.content === "string" ? m.content : "")))
    return "DONE"
  }, new InMemoryTaskStore())
  t.teardown(() => runner.stop(1000))
  const contextId = "shared-context"
  const send = async (text: string, tenant?: string) =>
    (await call(rpc("SendMessage", { ...tenantOf(tenant), message: message(text, { contextId }) }), "1.0")).result?.task
  await send("secret of acme", "acme")
  await send("hello from globex", "globex")
  const seen = prompts.at(-1)!.join("\n")
  t.notMatch(seen, /secret of acme/, "another tenant's Task of the same context id does not reach the model")
  await send("again from acme", "acme")
  t.match(prompts.at(-1)!.join("\n"), /secret of acme/, "the tenant's own earlier Task does")
})

t.test("PostgresTaskStore: a tasks table made before tenants gains the column on open, its rows of no tenant", async (t) => {
  const table = `tn_tenant_old_${unique()}`
  const admin = new pg.Pool({ connectionString: PG_URL, max: 1 })
  const store = new PostgresTaskStore(PG_URL, { table, leaseTable: `${table}_leases` })
  t.teardown(async () => {
    await store.close()
    const names = [table, `${table}_leases`, `${table}_pushcfg`, `${table}_outbox`, `${table}_dead`, `${table}_events`, `${table}_events_ends`]
    await admin.query(`DROP TABLE IF EXISTS ${names.map((name) => `"${name}"`).join(", ")}`)
    await admin.end()
  })
  // The whole schema as it was: every table, the tasks table without its tenant column, and a row saved then.
  const before = PostgresTaskStore.schemaSql({ table, leaseTable: `${table}_leases` })
    .split("\n")
    .filter((line) => !line.includes("ADD COLUMN IF NOT EXISTS tenant"))
    .join("\n")
  await admin.query(before)
  const old = { id: "old", contextId: "c", kind: "task", status: { state: "completed", timestamp: "2026-01-01T00:00:00.000Z" } }
  await admin.query(`INSERT INTO "${table}" (id, task, state, status_ts, context_id) VALUES ('old', $1::jsonb, 'completed', $2, 'c')`, [JSON.stringify(old), old.status.timestamp])

  const { call } = dispatcherFor(() => "DONE", store)
  const sent = await call(rpc("SendMessage", { tenant: "acme", message: message("hi") }), "1.0")
  t.equal(sent.result?.task?.status?.state, "TASK_STATE_COMPLETED", "a Task is saved under a tenant")
  const columns = await admin.query(`SELECT 1 FROM information_schema.columns WHERE table_name = $1 AND column_name = 'tenant'`, [table])
  t.equal(columns.rowCount, 1, "the column was added")
  const none = (await call(rpc("ListTasks", {}), "1.0")).result
  t.same(none.tasks.map((task: { id: string }) => task.id), ["old"], "the row saved before tenants is of no tenant")
  const acme = (await call(rpc("ListTasks", { tenant: "acme" }), "1.0")).result
  t.same(acme.tasks.map((task: { id: string }) => task.id), [sent.result.task.id])
})
