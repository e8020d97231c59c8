import { randomUUID } from "node:crypto"
import { connect as connectTcp, createServer, type Socket } from "node:net"
import { inspect } from "node:util"
import { setImmediate as setImmediatePromise, setTimeout as sleep } from "node:timers/promises"
import { connect, headers, type KV, type NatsConnection } from "nats"
import t, { type Test } from "tap"
import type { StoreErrorContext } from "../../../lib/stores/background-errors.js"
import { NatsTaskStore, type NatsTaskStoreOptions } from "../../../lib/stores/nats/store.js"
import { idFromNatsKey, natsKey } from "../../../lib/stores/nats/keys.js"
import { TaskConflictError } from "../../../lib/stores/task-store.js"
import { closedPort, NATS_URL, sampleTask, waitFor } from "../../fixtures/helpers.js"
import { storeContract } from "../../fixtures/store-contract.js"
import { pushStoreContract } from "../../fixtures/push-store-contract.js"
import { eventLogContract } from "../../fixtures/event-log-contract.js"

// Runs against a NATS server with JetStream: `nats-server -js` on the default port, or NATS_URL.

const task = sampleTask

/** A plain client connection for looking at the buckets from outside the store; closed when the test ends. */
async function rawConnection(t: Test): Promise<NatsConnection> {
  const nc = await connect({ servers: NATS_URL })
  t.teardown(() => nc.drain())
  return nc
}

/** The bucket as the server holds it, without creating it. */
async function rawBucket(t: Test, bucket: string): Promise<KV> {
  return (await rawConnection(t)).jetstream().views.kv(bucket, { bindOnly: true })
}

/**
 * `count` stores, each with its own connection, on one pair of new buckets;
 * when the test ends they are closed and the buckets' streams deleted.
 */
async function storesOnNewBuckets(t: Test, count: number, url = NATS_URL, options: NatsTaskStoreOptions = {}): Promise<NatsTaskStore[]> {
  const suffix = randomUUID().replaceAll("-", "")
  const opts = { bucket: `tn_test_${suffix}`, leaseBucket: `tn_test_leases_${suffix}`, ...options }
  const stores = Array.from({ length: count }, () => new NatsTaskStore(url, opts))
  t.teardown(async () => {
    await Promise.all(stores.map((store) => store.close()))
    const nc = await connect({ servers: NATS_URL })
    const jsm = await nc.jetstreamManager()
    for (const bucket of [opts.bucket, opts.leaseBucket, `${opts.bucket}_push`]) await jsm.streams.delete(`KV_${bucket}`).catch(() => {})
    await jsm.streams.delete(opts.eventStream ?? `${opts.bucket}_events`).catch(() => {})
    await nc.drain()
  })
  return stores
}

/** Every id a store's watch reports, and a way to wait for one. */
async function watchIds(store: NatsTaskStore) {
  const seen: string[] = []
  const unwatch = await store.watch((id) => seen.push(id))
  return { seen, unwatch, until: (id: string) => waitFor(() => seen.includes(id), 15_000, `a watch notification for ${JSON.stringify(id)}`) }
}

storeContract("NatsTaskStore", {
  make: async (t, options) => (await storesOnNewBuckets(t, 1, NATS_URL, options))[0],
  corrupt: async (t, store, id) => {
    await (await rawBucket(t, (store as NatsTaskStore).bucket)).put(natsKey(id), '{"id":')
  },
  watches: true,
  retention: true,
  // A stream that takes no rollups: the sweep's purges are refused, plain puts are not.
  failSweeps: async (t, store) => {
    const jsm = await (await rawConnection(t)).jetstreamManager()
    const stream = `KV_${(store as NatsTaskStore).bucket}`
    const allowRollups = async (allow: boolean) => {
      const { config } = await jsm.streams.info(stream)
      await jsm.streams.update(stream, { ...config, allow_rollup_hdrs: allow })
    }
    await allowRollups(false)
    return () => allowRollups(true)
  },
})

pushStoreContract("NatsTaskStore", {
  make: async (t) => {
    const [store, other, restarted] = await storesOnNewBuckets(t, 3)
    let next = 0
    return { store, another: () => [other, restarted][next++] }
  },
  refusesTerminal: true,
  watchesOutbox: true,
  tellsOldestPending: true,
})

eventLogContract("NatsTaskStore", {
  make: async (t, options) => {
    const [store, other] = await storesOnNewBuckets(t, 2, NATS_URL, options)
    return { store, another: () => other }
  },
})

t.test("NatsTaskStore keys: plain ids as they are, others reversibly encoded, very long ones hashed", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  t.same(await store.list({}), { tasks: [], nextPageToken: "", totalSize: 0, pageSize: 50 }, "a new bucket lists nothing")
  const long = "é".repeat(2000)
  const nearlyLong = "é".repeat(1999) + "e"
  const ids = ["abc-123", "ABC-123", "a/b", "a_b", "a.b", "a b", "日本", "=YS9i", long, nearlyLong]
  for (const [i, id] of ids.entries()) await store.save(task(id, "working", { metadata: { i } }))
  for (const [i, id] of ids.entries()) t.same((await store.get(id))?.metadata, { i }, `${JSON.stringify(id.slice(0, 20))} keeps its own task`)

  const keys: string[] = []
  for await (const key of await (await rawBucket(t, store.bucket)).keys()) keys.push(key)
  t.equal(keys.length, ids.length, "one key per id")
  t.ok(keys.includes("abc-123") && keys.includes("ABC-123") && keys.includes("a_b"), "plain ids are their own key")
  t.ok(keys.includes("=YS9i"), '"a/b" is "=" and its base64url')
  t.ok(keys.every((key) => /^[-/_=.a-zA-Z0-9]{1,1024}$/.test(key)), "every key is in the KV alphabet and at most 1024 characters")
  t.equal(keys.filter((key) => /^==[0-9a-f]{64}$/.test(key)).length, 2, "the two very long ids are hashed, apart")

  for (const id of ids.slice(0, -2)) t.equal(idFromNatsKey(natsKey(id)), id, `${JSON.stringify(id)} comes back from its key`)
  t.equal(idFromNatsKey(natsKey(long)), undefined, "a hashed key names no id")
  t.equal(idFromNatsKey("=YWJj"), undefined, 'only the spelling natsKey makes counts ("abc" is its own key)')
  t.equal(idFromNatsKey("=YS9i="), undefined)
  t.throws(() => natsKey(""), /non-empty string/)
  t.throws(() => natsKey("a\ud800"), /well-formed Unicode/, "a lone surrogate would share the key of U+FFFD")
  t.same((await store.list({ pageSize: 100 })).tasks.map((task) => task.id).sort(), [...ids].sort(), "list reads every key back to its id")
  await store.delete("a b")
  await store.delete(long)
  t.equal((await store.list({})).totalSize, ids.length - 2, "deleted tasks are not listed")
  t.equal(await store.get(long), undefined)
  await t.rejects(store.get(""), /non-empty string/)
  await t.rejects(store.save(task("\udc00")), /well-formed Unicode/)
})

t.test("NatsTaskStore reports an entry that is corrupt or holds another task as an error", async (t) => {
  const reported: Array<{ err: Error; context: StoreErrorContext }> = []
  const [store] = await storesOnNewBuckets(t, 1, NATS_URL, { onError: (err, context) => reported.push({ err, context }) })
  await store.save(task("fine"))
  const kv = await rawBucket(t, store.bucket)
  await kv.put("other", JSON.stringify(task("someone-else")))
  await t.rejects(store.get("other"), /KV entry in bucket "tn_test_\w+" at key "other" that holds task "someone-else", not "other"/)
  t.same((await store.list({})).tasks.map((each) => each.id), ["fine"], "list checks each entry's key too, and leaves a wrong one out")
  t.match(reported, [{ err: { message: /holds task "someone-else", not "other"/ }, context: { store: "NatsTaskStore", operation: "list", taskId: "other" } }])
  await kv.delete("other")
  await kv.put("broken", '{"id":"broken","status":')
  await t.rejects(store.get("broken"), /corrupt KV entry in bucket "tn_test_\w+" at key "broken"/)
  t.same((await store.list({})).tasks.map((each) => each.id), ["fine"], "list leaves a corrupt one out")
  t.match(reported[1], { err: { message: /corrupt KV entry/ }, context: { operation: "list", taskId: "broken" } }, "and reports it")
  await t.rejects(store.save(task("broken", "working")), /corrupt KV entry/, "a save cannot tell whether it may replace it")
})

t.test("NatsTaskStore refuses to replace a terminal task", async (t) => {
  const [a, b] = await storesOnNewBuckets(t, 2)
  await a.save(task("done", "working"))
  await a.save(task("done", "completed", { metadata: { by: "a" } }))
  for (const store of [a, b]) {
    const err = await store.save(task("done", "working")).then(
      () => undefined,
      (err: unknown) => err,
    )
    t.type(err, TaskConflictError, "a later save is refused, from this server or another")
    t.equal((err as TaskConflictError).taskId, "done")
    t.same((err as TaskConflictError).stored.metadata, { by: "a" }, "the error carries what the store holds")
  }
  await t.rejects(a.save(task("done", "canceled")), TaskConflictError, "the first final word wins, even over another final word")
  t.equal((await b.get("done"))?.status.state, "completed", "the stored task stays completed")
  await a.delete("done")
  await a.save(task("done", "working"))
  t.equal((await b.get("done"))?.status.state, "working", "a deleted id can be used again")
})

t.test("NatsTaskStore: concurrent saves from two servers all land, each as its own revision", async (t) => {
  // Two connections open the same new bucket at once, then race on one key.
  const [a, b] = await storesOnNewBuckets(t, 2)
  const perStore = 20
  const saves = [a, b].flatMap((store, s) => Array.from({ length: perStore }, (_, i) => store.save(task("race", "working", { metadata: { s, i } }))))
  const results = await Promise.allSettled(saves)
  t.same(
    results.filter((r) => r.status === "rejected").map((r) => String(r.reason)),
    [],
    "no save failed",
  )
  const final = await a.get("race")
  t.ok(final?.metadata && [0, 1].includes(final.metadata.s as number) && (final.metadata.i as number) < perStore, "the task is one that was written")
  const entry = await (await rawBucket(t, a.bucket)).get("race")
  t.equal(entry?.revision, 2 * perStore, "the key's revision counts every save: none was lost or merged")
})

t.test("NatsTaskStore: a terminal save racing others is never overwritten", async (t) => {
  const [runner, canceler] = await storesOnNewBuckets(t, 2)
  for (let round = 0; round < 5; round++) {
    const id = `cancel-race-${round}`
    await runner.save(task(id, "working"))
    const progress = Array.from({ length: 10 }, (_, i) => runner.save(task(id, "working", { metadata: { i } })))
    const cancel = canceler.save(task(id, "canceled", { metadata: { by: "canceler" } }))
    const [progressResults, cancelResult] = await Promise.all([Promise.allSettled(progress), Promise.allSettled([cancel])])
    t.equal(cancelResult[0].status, "fulfilled", `round ${round}: the cancel landed`)
    const refused = progressResults.filter((r) => r.status === "rejected").map((r) => r.reason)
    t.ok(
      refused.every((err) => err instanceof TaskConflictError),
      `round ${round}: the progress saves after the cancel were refused as conflicts`,
    )
    t.same((await runner.get(id))?.metadata, { by: "canceler" }, `round ${round}: the cancel stays`)
  }
})

t.test("NatsTaskStore.watch reports other servers' saves and deletes until unwatched", async (t) => {
  const [a, b] = await storesOnNewBuckets(t, 2)
  await b.get("warm-up") // creates the bucket before anyone watches it
  const watchA = await watchIds(a)
  await b.save(task("w-1"))
  await watchA.until("w-1")
  await b.save(task("a/b", "working"))
  await watchA.until("a/b")
  const long = "ü".repeat(1500)
  await b.save(task(long))
  await watchA.until(long)
  const before = watchA.seen.length
  await b.delete("w-1")
  await waitFor(() => watchA.seen.length > before, 15_000, "the delete")
  t.equal(watchA.seen.at(-1), "w-1", "a delete is reported by id")
  t.notOk(watchA.seen.includes("warm-up"), "reads are not changes")

  await watchA.unwatch()
  await watchA.unwatch()
  // A new watch on the same store and connection: once it has the next change, the first would have it too.
  const witness = await watchIds(a)
  await b.save(task("after"))
  await witness.until("after")
  t.notOk(watchA.seen.includes("after"), "nothing is reported after unwatching")
  await witness.unwatch()
})

t.test("NatsTaskStore.watch reports only changes made after it started, and survives a throwing listener", async (t) => {
  const reported: StoreErrorContext[] = []
  const [a, b] = await storesOnNewBuckets(t, 2, NATS_URL, { onError: (_err, context) => reported.push(context) })
  await b.save(task("old"))
  const seen: string[] = []
  const unwatch = await a.watch((id) => {
    seen.push(id)
    throw new Error("a listener bug")
  })
  await b.save(task("new-1"))
  await b.save(task("new-2"))
  await waitFor(() => seen.includes("new-2"), 15_000, "the second change")
  t.same(seen, ["new-1", "new-2"], "no history, and the first throw did not stop the watch")
  await waitFor(() => reported.length === 2, 5000, "both throws reported")
  t.same(reported, [
    { store: "NatsTaskStore", operation: "watch", taskId: "new-1" },
    { store: "NatsTaskStore", operation: "watch", taskId: "new-2" },
  ])
  await unwatch()
})

t.test("NatsTaskStore.leases", async (t) => {
  const [a, b] = await storesOnNewBuckets(t, 2)
  await a.leases.renew("host-1/1234", 60_000)
  t.equal(await b.leases.isAlive("host-1/1234"), true, "another server sees a renewed lease")
  t.equal(await b.leases.isAlive("host-2/1"), false, "an instance that never renewed is not alive")

  await a.leases.renew("short", 1500) // long enough to read it back alive on a loaded machine
  t.equal(await b.leases.isAlive("short"), true)
  await waitFor(async () => !(await b.leases.isAlive("short")), 15_000, "the short lease to expire")
  t.equal(await b.leases.isAlive("host-1/1234"), true, "the long lease is still alive")
  await a.leases.renew("short", 60_000)
  t.equal(await b.leases.isAlive("short"), true, "renewing revives an expired lease")

  await a.leases.release("host-1/1234")
  t.equal(await b.leases.isAlive("host-1/1234"), false, "a released lease is gone")
  await a.leases.release("never-held")
  await t.rejects(a.leases.renew("x", 0), /ttlMs should be a number of milliseconds > 0/)
  await t.rejects(a.leases.renew("x", Number.NaN), /ttlMs/)
  await t.rejects(a.leases.renew("x", 2 * 24 * 60 * 60_000), /ttlMs/)
  await t.rejects(a.leases.renew("", 1000), /non-empty string/)
})

t.test("NatsTaskStore loads the nats driver on first use, and says what to install when it is missing", async (t) => {
  const message = 'NatsTaskStore needs the "toolnexus-no-such-driver" package: npm install toolnexus-no-such-driver'
  const store = new NatsTaskStore(NATS_URL, { bucket: "tn_never_created", driverModule: "toolnexus-no-such-driver" })
  await t.rejects(store.open(), { message })
  await t.rejects(store.get("x"), { message })
  await t.rejects(store.save(task("x")), { message }, "every call says so, none hangs")
  await t.rejects(store.watch(() => {}), { message })
  await t.rejects(store.leases.isAlive("x"), { message })
  await store.close()

  const wrong = new NatsTaskStore(NATS_URL, { bucket: "tn_never_created", driverModule: "node:path" })
  await t.rejects(wrong.get("x"), /NatsTaskStore: the "node:path" package has no connect\(\) and KvWatchInclude; it should be nats@2 or work like it/)
  await wrong.close()
  t.throws(() => new NatsTaskStore(NATS_URL, { driverModule: "" }), /opts\.driverModule should be a package name/)
})

t.test("NatsTaskStore reports an unreachable server, and tries again on the next call", async (t) => {
  const port = await closedPort()
  const [store] = await storesOnNewBuckets(t, 1, `nats://127.0.0.1:${port}`)
  await t.rejects(store.open(), new RegExp(`NatsTaskStore could not connect to nats://127\\.0\\.0\\.1:${port}`))
  await t.rejects(store.get("x"), new RegExp(`NatsTaskStore could not connect to nats://127\\.0\\.0\\.1:${port}`))
  await t.rejects(store.get("x"), /could not connect/, "still down: said again")
  // The server comes up on that port (a relay to the real one): the next call connects.
  const upstream = new URL(NATS_URL)
  const sockets = new Set<Socket>()
  const relay = createServer((socket) => {
    const server = connectTcp(Number(upstream.port || 4222), upstream.hostname)
    for (const end of [socket, server]) {
      sockets.add(end)
      end.on("error", () => {})
      end.on("close", () => (socket.destroy(), server.destroy()))
    }
    socket.pipe(server).pipe(socket)
  })
  await new Promise<void>((resolve) => relay.listen(port, "127.0.0.1", resolve))
  t.teardown(() => {
    for (const socket of sockets) socket.destroy()
    relay.close()
  })
  t.equal(await store.get("x"), undefined, "the next call connected and found nothing")
  await store.close()
  await t.rejects(store.get("x"), /NatsTaskStore is closed/)
})

t.test("NatsTaskStore takes user:pass@ in the URL and never shows it", async (t) => {
  // The test server has no accounts, so it accepts any credentials: this shows they do not break the URL.
  const [store] = await storesOnNewBuckets(t, 1, NATS_URL.replace("nats://", "nats://someone:s3cret@"))
  t.equal(store.server, NATS_URL, "the server, without credentials")
  await store.save(task("with-credentials"))
  t.equal((await store.get("with-credentials"))?.id, "with-credentials")
  t.notMatch(JSON.stringify(store), /s3cret/, "the store does not show them")
  t.notMatch(inspect(store), /s3cret/)
  const refused = (() => {
    try {
      return new NatsTaskStore("http://someone:s3cret@host:4222")
    } catch (err) {
      return err as Error
    }
  })()
  t.match(refused, { message: /got a http: URL/ }, "a refused URL is described")
  t.notMatch((refused as Error).message, /s3cret/, "but not shown")
})

t.test("NatsTaskStore.close waits for saves, is idempotent, and refuses calls after it", async (t) => {
  const [store, other] = await storesOnNewBuckets(t, 2)
  const watcher = await store.watch(() => {})
  const saves = Array.from({ length: 10 }, (_, i) => store.save(task(`c-${i}`)))
  await Promise.all([store.close(), store.close()])
  await Promise.all(saves)
  t.equal((await other.list({})).totalSize, 10, "every save called before close landed")
  await watcher()
  await t.rejects(store.get("c-1"), /NatsTaskStore is closed/)
  await t.rejects(store.save(task("late")), /NatsTaskStore is closed/)
  await t.rejects(store.watch(() => {}), /NatsTaskStore is closed/)
  await t.rejects(store.leases.isAlive("x"), /NatsTaskStore is closed/)
  t.equal(await other.get("late"), undefined)
  await new NatsTaskStore(NATS_URL).close() // never connected: nothing to drain
})

t.test("NatsTaskStore refuses bad options, naming the option", async (t) => {
  const bad: Array<[unknown, unknown, RegExp]> = [
    [42, undefined, /url should be "nats:\/\/\[user:pass@\]host\[:port\]".*got a number/],
    ["localhost:4222", undefined, /url should be .*got a localhost: URL/],
    ["not a url", undefined, /url should be .*not a URL/],
    ["nats://", undefined, /url should be .*got no host/],
    ["nats://host:4222/path", undefined, /url should be .*path, query or fragment/],
    ["nats://:secret@host", undefined, /url should be .*password without a user/],
    [NATS_URL, null, /opts should be an object/],
    [NATS_URL, { bucket: "has space" }, /opts\.bucket should be a KV bucket name .* got "has space"/],
    [NATS_URL, { bucket: "a.b" }, /opts\.bucket should be/],
    [NATS_URL, { bucket: "" }, /opts\.bucket should be/],
    [NATS_URL, { bucket: "x".repeat(65) }, /opts\.bucket should be/],
    [NATS_URL, { bucket: 7 }, /opts\.bucket should be .*got a number/],
    [NATS_URL, { leaseBucket: "a*" }, /opts\.leaseBucket should be a KV bucket name/],
    [NATS_URL, { bucket: "same", leaseBucket: "same" }, /opts\.leaseBucket should differ from opts\.bucket/],
  ]
  for (const [url, opts, message] of bad) {
    t.throws(() => new NatsTaskStore(url as string, opts as never), message, `${JSON.stringify(url)} ${JSON.stringify(opts)}`)
  }
  const store = new NatsTaskStore("nats://[::1]:4222", { bucket: "My-Tasks_1" })
  t.equal(store.server, "nats://[::1]:4222")
  t.equal(store.bucket, "My-Tasks_1")
  t.equal(store.leaseBucket, "toolnexus_leases")
  t.equal(new NatsTaskStore("nats://127.0.0.1").bucket, "toolnexus_tasks")
})

t.test("NatsTaskStore.delete purges: on a bucket made with history, no earlier value of the Task is left", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  // The bucket made by someone else first, keeping 5 values per key: the store binds to it as it is.
  const raw = await (await rawConnection(t)).jetstream().views.kv(store.bucket, { history: 5 })
  for (const state of ["submitted", "working", "completed"] as const) await store.save(task("h", state))
  const kept = []
  for await (const entry of await raw.history({ key: "h" })) kept.push(entry.operation)
  t.same(kept, ["PUT", "PUT", "PUT"], "the bucket keeps every value")
  await store.delete("h")
  const left = []
  for await (const entry of await raw.history({ key: "h" })) left.push(entry.operation)
  t.same(left, ["PURGE"], "only the marker that says it is gone")
})

t.test("NatsTaskStore retention: a swept Task leaves nothing in the bucket once its marker is a TTL old", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1, NATS_URL, { retention: { terminalTtl: "1s", sweepInterval: 10 } })
  const old = new Date(Date.now() - 2 * 86_400_000).toISOString()
  for (const id of ["gone-1", "gone-2", "a/b"]) await store.save(task(id, "completed", { status: { state: "completed", timestamp: old } }))
  await store.save(task("kept", "working", { status: { state: "working", timestamp: old } }))
  await store.save(task("deleted", "working"))
  await store.delete("deleted")
  const jsm = await (await rawConnection(t)).jetstreamManager()
  const messages = async () => (await jsm.streams.info(`KV_${store.bucket}`)).state.messages
  await waitFor(async () => (await messages()) === 1, 20_000, "only the kept Task's value left in the stream")
  t.same((await store.list({})).tasks.map((each) => each.id), ["kept"])
  await store.save(task("gone-1", "submitted"))
  t.equal((await store.get("gone-1"))?.status.state, "submitted", "a swept id can be saved again, its marker gone")
})

t.test("NatsTaskStore push: two stores saving one Task at the same moment each get their own notification, neither overwritten", async (t) => {
  const [a, b] = await storesOnNewBuckets(t, 2)
  await a.save(sampleTask("shared"))
  await a.push.putConfig({ taskId: "shared", id: "hook", version: "1.0", url: "https://hooks.example.com/a", createdAt: new Date().toISOString() })
  for (let round = 0; round < 5; round++) {
    const working = sampleTask("shared", "working", { metadata: { round, by: "a" } })
    const waiting = sampleTask("shared", "input-required", { metadata: { round, by: "b" } })
    // Both read the same revision, so one compare-and-set loses and saves again after the other.
    await Promise.all([a.push.saveWithEvent(working, { kind: "status", task: working }), b.push.saveWithEvent(waiting, { kind: "status", task: waiting })])
    const sent: string[] = []
    for (;;) {
      const [claim] = await a.push.claim("i-1", 1, 60_000, Date.now())
      if (claim === undefined) break
      sent.push(`${String(claim.item.event.task.metadata?.by)}:${claim.item.event.task.status.state}`)
      await a.push.ack(claim)
    }
    t.same(sent.sort(), ["a:working", "b:input-required"], `round ${round}: each save's own notification, once`)
  }
})

t.test("NatsTaskStore push: oldestPendingAt skips notifications whose save never landed and stale retry marks, and every store sharing the bucket tells the same", async (t) => {
  const [store, other] = await storesOnNewBuckets(t, 2)
  const outbox = await rawBucket(t, `${store.bucket}_push`)
  const hourAgo = Date.now() - 3_600_000
  await store.save(sampleTask("t-1"))
  await store.push.putConfig({ taskId: "t-1", id: "a", version: "1.0", url: "https://hooks.example.com/a", createdAt: new Date().toISOString() })
  // Ahead of anything pending in the stream: a notification an hour old whose save never landed (seq 7, the Task's pushSeq is 0), as a save cut short leaves it.
  const unsaved = { key: "k-unsaved", taskId: "t-1", configId: "a", seq: 7, event: { kind: "status", task: sampleTask("t-1") }, attempts: 0, notBefore: hourAgo, enqueuedAt: hourAgo }
  await outbox.put(`o.t-1.a.${"7".padStart(16, "0")}.cutshort`, JSON.stringify(unsaved))
  // And the retry mark of a notification an hour old that is gone (its settle stopped between the two removals).
  const staleMark = `r.t-1.a.${String(hourAgo).padStart(16, "0")}.${"3".padStart(16, "0")}.gone`
  await outbox.put(staleMark, "")
  t.equal(await store.push.oldestPendingAt!(), undefined, "nothing pending: neither counts")
  const working = sampleTask("t-1", "working")
  await store.push.saveWithEvent(working, { kind: "status", task: working })
  const [claim] = await store.push.claim("i-1", 10, 60_000, Date.now())
  t.ok(claim.item.enqueuedAt > hourAgo, "the landed notification is this run's")
  t.equal(await store.push.oldestPendingAt!(), claim.item.enqueuedAt, "the landed notification's time")
  t.equal(await other.push.oldestPendingAt!(), claim.item.enqueuedAt, "the same from another store on the bucket")
  const marks: string[] = []
  for await (const key of await outbox.keys("r.>")) marks.push(key)
  t.same(marks, [], "the stale mark is removed")
  await store.push.ack(claim)
  t.equal(await store.push.oldestPendingAt!(), undefined, "delivered: none pending")
})

t.test("NatsTaskStore push: past its bound of outbox messages not pending, oldestPendingAt answers with a time no later than any pending one's", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  const outbox = await rawBucket(t, `${store.bucket}_push`)
  const hourAgo = Date.now() - 3_600_000
  await store.save(sampleTask("t-1"))
  await store.push.putConfig({ taskId: "t-1", id: "a", version: "1.0", url: "https://hooks.example.com/a", createdAt: new Date().toISOString() })
  const before = Date.now()
  // More saves cut short than oldestPendingAt reads past (8), each an hour old by its own account.
  for (let seq = 11; seq <= 20; seq++) {
    const item = { key: `k-${seq}`, taskId: "t-1", configId: "a", seq, event: { kind: "status", task: sampleTask("t-1") }, attempts: 0, notBefore: hourAgo, enqueuedAt: hourAgo }
    await outbox.put(`o.t-1.a.${String(seq).padStart(16, "0")}.cutshort`, JSON.stringify(item))
  }
  const working = sampleTask("t-1", "working")
  await store.push.saveWithEvent(working, { kind: "status", task: working })
  const [claim] = await store.push.claim("i-1", 10, 60_000, Date.now())
  const oldest = await store.push.oldestPendingAt!()
  // The 8th message's time, on our clock as the store measured the server's against it (the same machine here: within a second).
  t.ok(oldest !== undefined && oldest > hourAgo, "not the unsaved notifications' own times")
  t.ok(oldest! >= before - 1000 && oldest! <= claim.item.enqueuedAt + 1000, "no later than the pending one's, within the clocks' measure")
})

t.test("NatsTaskStore: list() ends though a delete marker it counted is purged under it, as another server's retention sweep does", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  const tasks = await rawBucket(t, store.bucket)
  const { streams } = await (await rawConnection(t)).jetstreamManager()
  // Large Tasks, so the listing is still being delivered when the purge lands.
  const pad = "x".repeat(50_000)
  const kept = Array.from({ length: 100 }, (_, i) => `kept-${String(i).padStart(3, "0")}`)
  for (const id of kept) await store.save(task(id, "working", { metadata: { pad } }))
  for (let round = 0; round < 5; round++) {
    const id = `gone-${round}`
    await store.save(task(id))
    await store.delete(id)
    const marker = await tasks.get(id)
    t.equal(marker?.operation, "PURGE", "the delete left its marker, the stream's last message")
    const consumersBefore = (await streams.info(`KV_${store.bucket}`)).state.consumer_count
    let listed = false
    const listing = store.list({ pageSize: 100 }).finally(() => (listed = true))
    // The listing's consumer counts what it has to deliver when it is made: purge once it exists (or once the
    // listing is over, should it have come and gone between two looks).
    while (!listed && (await streams.info(`KV_${store.bucket}`)).state.consumer_count === consumersBefore) await setImmediatePromise()
    await streams.purge(`KV_${store.bucket}`, { filter: `$KV.${store.bucket}.${id}`, seq: marker!.revision + 1 })
    // A listing still unsettled 20 s on counts as hung (a bound on the failure, not a timing target).
    const page = await Promise.race([listing, sleep(20_000, undefined, { ref: false })])
    t.ok(page !== undefined, `round ${round}: the listing ended`)
    if (page === undefined) break
    t.same(page.tasks.map((each) => each.id).sort(), kept, `round ${round}: every Task, and not the deleted one`)
  }
})

t.test("NatsTaskStore push: claims, oldestPendingAt and listDeadLetters finish while the keys they list are purged under them", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  const bucket = `${store.bucket}_push`
  const outbox = await rawBucket(t, bucket)
  const { streams } = await (await rawConnection(t)).jetstreamManager()
  await store.push.oldestPendingAt!() // the bucket exists
  const hourAgo = Date.now() - 3_600_000
  // The KV's own keys() waited forever for a key counted when it started and purged before it came: these listings must not.
  // A listing still unsettled 20 s on counts as hung (a bound on the failure, not a timing target).
  const settles = (call: Promise<unknown>) =>
    Promise.race([call.then(() => true, () => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 20_000).unref())])
  let unsettled = 0
  for (let round = 0; round < 200; round++) {
    const seq = String(round).padStart(16, "0")
    const keys = [`o.t-1.a.${seq}.w`, `r.t-1.a.${String(hourAgo).padStart(16, "0")}.${seq}.w`, `d.t-1.${String(hourAgo).padStart(16, "0")}.x${round}`]
    const item = { key: `k-${round}`, taskId: "t-1", configId: "a", seq: round, event: { kind: "status", task: sampleTask("t-1") }, attempts: 1, notBefore: hourAgo, enqueuedAt: hourAgo }
    for (const key of keys) await outbox.put(key, JSON.stringify(key.startsWith("o.") ? item : {}))
    const calls = [store.push.claim("i-1", 10, 60_000, Date.now()), store.push.oldestPendingAt!(), store.push.listDeadLetters(10)].map(settles)
    // Purged a little after the listings started, at a different moment each round: the purges land before, during and after them.
    await new Promise((resolve) => setTimeout(resolve, round % 6))
    for (const key of keys) await streams.purge(`KV_${bucket}`, { filter: `$KV.${bucket}.${key}` })
    unsettled += (await Promise.all(calls)).filter((done) => !done).length
    if (unsettled > 0) break
  }
  t.equal(unsettled, 0, "every listing settled")
})

t.test("NatsTaskStore push: a marker at the head of a channel (an older version's purge) is removed, and the notification behind it claimed", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  const outbox = await rawBucket(t, `${store.bucket}_push`)
  await store.save(sampleTask("t-1"))
  await store.push.putConfig({ taskId: "t-1", id: "a", version: "1.0", url: "https://hooks.example.com/a", createdAt: new Date().toISOString() })
  const working = sampleTask("t-1", "working")
  await store.push.saveWithEvent(working, { kind: "status", task: working })
  // A purge marker on a key of seq 0, below the landed notification's seq 1, as kv.purge left them.
  const marker = `o.t-1.a.${"0".padStart(16, "0")}.old`
  await outbox.put(marker, "{}")
  await outbox.purge(marker)
  t.equal((await outbox.get(marker))?.operation, "PURGE", "the marker is there")
  const claimed = [...(await store.push.claim("i-1", 10, 60_000, Date.now())), ...(await store.push.claim("i-1", 10, 60_000, Date.now()))]
  t.equal(claimed.length, 1, "the notification behind the marker is claimed by the second claim at the latest")
  t.equal(claimed[0]?.item.event.task.status.state, "working")
  t.equal(await outbox.get(marker), null, "the marker is gone from the stream")
})

/** Events from position `from` on, each its text tagged. */
const logged = (from: number, count: number, tag = "a") =>
  Array.from({ length: count }, (_, i) => ({ position: from + i, event: { kind: "artifact-update", text: `${tag}${from + i}` } }))
const textsOf = (events: Array<{ event: Record<string, unknown> }>) => events.map((e) => e.event.text)

/** The event stream's subjects that hold messages, and how many each, as the server counts them. */
async function eventSubjects(t: Test, store: NatsTaskStore): Promise<Record<string, number>> {
  const jsm = await (await rawConnection(t)).jetstreamManager()
  const { state } = await jsm.streams.info(store.eventStream, { subjects_filter: `${store.eventStream}.>` })
  const subjects = { ...state.subjects }
  delete subjects[`${store.eventStream}.clock`]
  return subjects
}

t.test("NatsTaskStore event log: delete and the Task retention sweep purge the Task's events and its end", async (t) => {
  // A Task is swept a TTL after its last save, whatever its status time says (see NatsTaskStore).
  const [store] = await storesOnNewBuckets(t, 1, NATS_URL, { retention: { terminalTtl: "1s", sweepInterval: 10 } })
  const old = new Date(Date.now() - 2 * 86_400_000).toISOString()
  // The logs first: the sweep may run as soon as an expired Task is saved.
  for (const id of ["deleted", "expired", "kept"]) {
    await store.events.append(id, logged(1, 3))
    await store.events.append(id, logged(4, 1))
    await store.events.ended(id)
  }
  const e = (id: string) => `${store.eventStream}.e.${natsKey(id)}`
  const x = (id: string) => `${store.eventStream}.x.${natsKey(id)}`
  t.same(await eventSubjects(t, store), { [e("deleted")]: 2, [x("deleted")]: 1, [e("expired")]: 2, [x("expired")]: 1, [e("kept")]: 2, [x("kept")]: 1 }, "two messages and an end per log")
  await store.save(task("deleted", "working"))
  await store.save(task("kept", "working", { status: { state: "working", timestamp: old } }))
  await store.delete("deleted")
  await store.save(task("expired", "completed", { status: { state: "completed", timestamp: old } }))
  await waitFor(async () => (await store.get("expired")) === undefined, 20_000, "the expired Task swept")
  t.same(await eventSubjects(t, store), { [e("kept")]: 2, [x("kept")]: 1 }, "only the kept Task's log and end are left")
  t.equal(await store.events.lastPosition("deleted"), 0)
  t.same(await store.events.read("expired", 0, 10), [])
})

t.test("NatsTaskStore event log: a restarted store reads the log, goes on from it, and removes an ended one when the store that ended it said", async (t) => {
  const [first, restarted] = await storesOnNewBuckets(t, 2, NATS_URL, { eventRetentionMs: 3_600_000 })
  await first.events.append("running", logged(1, 3))
  await first.events.append("long", logged(1, 2))
  await first.events.ended("long")
  await first.close()
  t.same(textsOf(await restarted.events.read("running", 0, 10)), ["a1", "a2", "a3"], "the log outlived the store")
  t.equal(await restarted.events.lastPosition("running"), 3)
  t.same(await restarted.events.append("running", logged(3, 2, "b")), [3], "and appends go on from it")
  t.same(textsOf(await restarted.events.read("running", 0, 10)), ["a1", "a2", "a3", "b4"])
  // A third store with a short retention: the end it writes goes soon, the one the first wrote keeps its hour.
  const short = new NatsTaskStore(NATS_URL, { bucket: restarted.bucket, leaseBucket: restarted.leaseBucket, eventRetentionMs: 50 })
  t.teardown(() => short.close())
  await short.events.append("short", logged(1, 2))
  await short.events.ended("short")
  await waitFor(async () => (await short.events.read("short", 0, 10)).length === 0, 15_000, "the log ended by the short store to go")
  t.same(textsOf(await short.events.read("long", 0, 10)), ["a1", "a2"], "the log the first store ended stays")
})

t.test("NatsTaskStore event log: a writer whose knowledge of a log is old is told what others appended, whenever they did", async (t) => {
  const [a, b] = await storesOnNewBuckets(t, 2)
  await a.events.append("t-1", logged(1, 3, "a"))
  await b.events.append("t-1", logged(4, 2, "b"))
  t.same(await a.events.append("t-1", logged(4, 3, "a")), [4, 5], "a's next append learns of b's, and takes only position 6")
  t.same(textsOf(await b.events.read("t-1", 0, 10)), ["a1", "a2", "a3", "b4", "b5", "a6"])
  t.same(await a.events.append("t-1", logged(2, 2, "a")), [2, 3], "positions it knows are held are told held")
  await b.save(task("t-1", "working"))
  await b.delete("t-1")
  t.same(await a.events.append("t-1", logged(1, 1, "again")), [], "after another store deleted the log, what a remembered is read again, not trusted")
  t.same(textsOf(await b.events.read("t-1", 0, 10)), ["again1"])
})

t.test("NatsTaskStore event log: a resume from anywhere in a long log interleaved with others reads the right events", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  // One event per append, interleaved with another Task's, so the log's messages are spread over the stream.
  for (let position = 1; position <= 120; position++) {
    await store.events.append("long", logged(position, 1))
    if (position % 3 !== 0) await store.events.append("other", logged(position, 1, "o"))
  }
  await store.events.append("long", logged(121, 5))
  const all = Array.from({ length: 125 }, (_, i) => `a${i + 1}`)
  for (const after of [0, 1, 2, 59, 60, 61, 119, 120, 121, 124, 125]) {
    t.same(textsOf(await store.events.read("long", after, 1000)), all.slice(after), `after ${after}`)
    t.same(textsOf(await store.events.read("long", after, 3)), all.slice(after, after + 3), `after ${after}, 3 of them`)
  }
})

t.test("NatsTaskStore event log: an append bigger than a message goes in parts; an event bigger than one is refused", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  const big = (position: number, char: string) => ({ position, event: { kind: "artifact-update", text: char.repeat(400_000) } })
  t.same(await store.events.append("big", [big(1, "a"), big(2, "b"), big(3, "c")]), [])
  t.same(
    (await store.events.read("big", 0, 10)).map((e) => [e.position, (e.event.text as string)[0], (e.event.text as string).length]),
    [
      [1, "a", 400_000],
      [2, "b", 400_000],
      [3, "c", 400_000],
    ],
  )
  t.ok((await eventSubjects(t, store))[`${store.eventStream}.e.big`] >= 2, "in more than one message")
  await t.rejects(store.events.append("big", [{ position: 4, event: { text: "d".repeat(1024 * 1024) } }]), /event log takes events of up to \d+ bytes .* the one at position 4 has/)
  t.equal(await store.events.lastPosition("big"), 3, "nothing of it was written")
})

t.test("NatsTaskStore event log: an end is written once; what is not the log's is an error that says so", async (t) => {
  const [store] = await storesOnNewBuckets(t, 1)
  await store.events.append("t-1", logged(1, 1))
  await store.events.ended("t-1")
  await store.events.ended("t-1")
  t.equal((await eventSubjects(t, store))[`${store.eventStream}.x.t-1`], 1, "a later end adds nothing")
  const js = (await rawConnection(t)).jetstream()
  await js.publish(`${store.eventStream}.e.foreign`, "not ours")
  await t.rejects(store.events.lastPosition("foreign"), /found a message on .*\.e\.foreign that is not an event log's/)
  await t.rejects(store.events.read("foreign", 0, 10), /not an event log's/)
  const header = headers()
  header.set("Toolnexus-Last-Position", "1")
  await js.publish(`${store.eventStream}.e.odd`, "{}", { headers: header })
  await t.rejects(store.events.read("odd", 0, 10), /found a message on .*\.e\.odd that is not an event log's \(not a list of events\)/)
  t.same(await store.events.read("t-1", 0, 0), [], "a limit of 0 reads nothing")
  t.same(await store.events.append("t-1", []), [], "an empty append takes nothing")

  // A stream of that name made by someone else, for other subjects.
  const [other] = await storesOnNewBuckets(t, 1)
  const jsm = await (await rawConnection(t)).jetstreamManager()
  await jsm.streams.add({ name: other.eventStream, subjects: [`elsewhere.${other.eventStream}`] })
  await t.rejects(other.events.append("t-1", logged(1, 1)), new RegExp(`the stream "${other.eventStream}" exists with other subjects`))

  // Another stream already takes the subjects: the stream cannot be made, and the error says why.
  const [blocked] = await storesOnNewBuckets(t, 1)
  const blocker = `${blocked.bucket}_blocker`
  await jsm.streams.add({ name: blocker, subjects: [`${blocked.eventStream}.>`] })
  t.teardown(() => jsm.streams.delete(blocker).catch(() => {}))
  await t.rejects(blocked.events.lastPosition("t-1"), new RegExp(`NatsTaskStore could not open the stream "${blocked.eventStream}": .*overlap`))
})

t.test("NatsTaskStore event log: sweeps with no ended log remove nothing and report nothing", async (t) => {
  const reported: Error[] = []
  const [store] = await storesOnNewBuckets(t, 1, NATS_URL, { eventRetentionMs: 0, onError: (err) => reported.push(err) })
  await store.events.append("running", logged(1, 2))
  // Sweeps run every 100 ms at a retention of 0: a few of them find no end.
  await new Promise((resolve) => setTimeout(resolve, 450))
  t.same(textsOf(await store.events.read("running", 0, 10)), ["a1", "a2"])
  t.same(reported, [])
})

t.test("NatsTaskStore event log: stores starting at once share one stream; bad options are refused, naming the option", async (t) => {
  const stores = await storesOnNewBuckets(t, 4)
  const appended = await Promise.all(stores.map((store, i) => store.events.append(`s-${i}`, logged(1, 2))))
  t.same(appended, [[], [], [], []])
  t.same(textsOf(await stores[0].events.read("s-3", 0, 10)), ["a1", "a2"], "each reads what the others wrote")
  t.equal(stores[0].eventStream, `${stores[0].bucket}_events`, "named after the bucket")
  t.throws(() => new NatsTaskStore(NATS_URL, { eventStream: "a.b" }), /opts\.eventStream should be a KV bucket name/)
  t.throws(() => new NatsTaskStore(NATS_URL, { eventRetentionMs: -5 }), /NatsTaskStore options\.eventRetentionMs should be a whole number of milliseconds >= 0/)
  const closed = stores[3]
  await closed.close()
  await t.rejects(closed.events.append("s-3", logged(3, 1)), /NatsTaskStore is closed/)
  await t.rejects(closed.events.read("s-3", 0, 10), /NatsTaskStore is closed/)
  await t.rejects(closed.events.lastPosition("s-3"), /NatsTaskStore is closed/)
  await t.rejects(closed.events.ended("s-3"), /NatsTaskStore is closed/)
})
