import { randomBytes } from "node:crypto"
import { connect } from "nats"
import pg from "pg"
import t, { type Test } from "tap"
import { NATS_URL, PG_URL, waitFor } from "../fixtures/helpers.js"
import { allCompleted, checkDelivery, pushServer, receiver, sendWithHook } from "../fixtures/push-receiver.js"

/** Tasks of the first round (receiver accepting) and of the second (receiver refusing, then one replica killed). */
const TASKS = 20
const PENDING = 10
/** The push timeout of the replicas: a claim lasts 2 x this + 10 s (lib/push/sender.ts), so a dead replica's claims run out within ~14 s. */
const TIMEOUT_MS = 2000
/** push.maxInFlight and maxInFlightPerOrigin of test/fixtures/push-server.mjs: a replica claims at most twice as many. */
const PER_ORIGIN = 4

/**
 * Two server processes on one shared store, sent to in turn. Each Task's
 * notifications arrive in order, each delivered once; then, with the receiver
 * refusing, more requests held open than one replica sends at once to the
 * receiver's origin (so some by each), one replica is killed (SIGKILL) and
 * the other delivers everything,
 * its own at once and the dead one's after their lease.
 */
function replicas(backend: string, makeSelector: (t: Test) => Promise<string>): void {
  t.test(`${backend}: two replicas deliver every notification once, in order per Task; one killed, the other delivers what it held`, async (t) => {
    const selector = await makeSelector(t)
    const hook = await receiver(t)
    hook.setMode("accept")
    const servers = [await pushServer(t, selector, hook, TIMEOUT_MS), await pushServer(t, selector, hook, TIMEOUT_MS)]
    const lastDelivered = (ids: string[]) => ids.every((id) => hook.received.some((r) => r.taskId === id && r.status === 200 && r.event === "TASK_STATE_COMPLETED"))

    const round1: string[] = []
    for (let i = 0; i < TASKS; i++) round1.push(await sendWithHook(servers[i % 2].url, hook, hook.url(`/hook/${i}`)))
    await waitFor(() => lastDelivered(round1), 60_000, "every Task's last notification delivered")
    t.equal(checkDelivery(t, hook.received, round1), 0, "each notification answered 2xx once: no claim ran out")

    hook.setMode("refuse")
    const round2: string[] = []
    for (let i = 0; i < PENDING; i++) round2.push(await sendWithHook(servers[i % 2].url, hook, hook.url(`/pending/${i}`)))
    await waitFor(() => allCompleted(servers[0].url, round2), 30_000, "every Task to complete")
    hook.setMode("hold")
    // A replica sends at most PER_ORIGIN at once to the receiver: more held means each replica holds some. One
    // replica claims at most 2 x PER_ORIGIN of the PENDING channels, so the other's poll finds the rest.
    await waitFor(() => hook.holding() > PER_ORIGIN, 60_000, `more than ${PER_ORIGIN} requests held open at once`)
    const [dead, alive] = servers
    const heldAtKill = hook.holding()
    dead.child.kill("SIGKILL")
    await dead.exited
    hook.setMode("accept")
    await waitFor(() => lastDelivered(round2), 60_000, "every pending Task's last notification delivered")
    // A request the dead replica had under way may have been answered 2xx as it died (the receiver cannot tell its
    // socket closed first): then it comes again after the lease, with its key. checkDelivery holds duplicates to that.
    const redelivered = checkDelivery(t, hook.received, round2)
    t.ok(redelivered <= heldAtKill, `duplicates only of requests held open at the kill (${redelivered} of at most ${heldAtKill})`)
    const cut = hook.received.filter((r) => round2.includes(r.taskId) && r.status === 0)
    for (const r of cut) t.ok(hook.received.some((d) => d.status === 200 && d.key === r.key), "a cut request was sent again with its key")
    t.equal(alive.child.exitCode, null, "the other replica still runs")
  })
}

replicas("PostgresTaskStore", async (t) => {
  const table = `tn_push_${randomBytes(4).toString("hex")}`
  t.teardown(async () => {
    const admin = new pg.Client({ connectionString: PG_URL })
    await admin.connect()
    await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_pushcfg, ${table}_outbox, ${table}_dead`)
    await admin.end()
  })
  return `${PG_URL}?table=${table}`
})

replicas("NatsTaskStore", async (t) => {
  const bucket = `tn_push_${randomBytes(4).toString("hex")}`
  t.teardown(async () => {
    const nc = await connect({ servers: NATS_URL })
    const jsm = await nc.jetstreamManager()
    for (const name of [bucket, `${bucket}_push`]) await jsm.streams.delete(`KV_${name}`).catch(() => false)
    await nc.close()
  })
  return `${NATS_URL}?bucket=${bucket}`
})
