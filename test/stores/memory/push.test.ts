import t from "tap"
import { withInternals } from "../../../lib/internals.js"
import { InMemoryTaskStore } from "../../../lib/stores/memory/store.js"
import type { PushConfigRecord, PushEvent } from "../../../lib/stores/push-store.js"
import { StoreFullError } from "../../../lib/stores/store-full.js"
import type { A2ATask, TaskState } from "../../../lib/types.js"
import { RecordingStore, sampleTask } from "../../fixtures/helpers.js"

const config = (taskId: string, id: string, extra: Partial<PushConfigRecord> = {}): PushConfigRecord => ({
  taskId,
  id,
  version: "1.0",
  url: `https://hooks.example/${id}`,
  createdAt: "2026-01-01T00:00:00.000Z",
  ...extra,
})

const status = (task: A2ATask): PushEvent => ({ kind: "status", task })
const ownedBy = (task: A2ATask, principal: string) => withInternals(task, { principal })

t.test("configs: put, replace, get, list in id order, delete (a missing one is no error); copies in and out", async (t) => {
  const { push } = new InMemoryTaskStore()
  const b = config("t1", "b", { token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } })
  await push.putConfig(b)
  await push.putConfig(config("t1", "a"))
  await push.putConfig(config("t2", "a"))
  b.url = "https://changed.example/"
  t.same(await push.getConfig("t1", "b"), config("t1", "b", { token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } }))
  t.same((await push.listConfigs("t1")).map((c) => c.id), ["a", "b"])
  await push.putConfig(config("t1", "a", { url: "https://other.example/" }))
  t.equal((await push.getConfig("t1", "a"))?.url, "https://other.example/", "same id replaces")
  t.equal((await push.listConfigs("t1")).length, 2)
  const got = await push.getConfig("t1", "a")
  got!.url = "mutated"
  t.equal((await push.getConfig("t1", "a"))?.url, "https://other.example/", "a caller's change does not reach the store")
  await push.deleteConfig("t1", "a")
  await push.deleteConfig("t1", "a")
  await push.deleteConfig("nope", "a")
  t.same((await push.listConfigs("t1")).map((c) => c.id), ["b"])
  t.equal(await push.getConfig("t1", "a"), undefined)
  t.same(await push.listConfigs("none"), [])
})

t.test("saveWithEvent saves the Task and enqueues one notification per config, in the Task's order per config", async (t) => {
  const store = new InMemoryTaskStore()
  const { push } = store
  await push.saveWithEvent(sampleTask("quiet"), status(sampleTask("quiet")))
  t.equal((await store.get("quiet"))?.status.state, "submitted", "a Task without configs is saved")
  t.equal(push.usage.outbox, 0)

  await push.putConfig(config("t1", "x"))
  await push.putConfig(config("t1", "y"))
  const states: TaskState[] = ["submitted", "working", "completed"]
  for (const state of states) await push.saveWithEvent(sampleTask("t1", state), status(sampleTask("t1", state)))
  await push.saveWithEvent(sampleTask("t1", "completed"))
  t.equal((await store.get("t1"))?.status.state, "completed")
  t.equal(push.usage.outbox, 6, "no event, no notification")

  const seen: string[] = []
  for (let round = 0; round < 3; round++) {
    const claims = await push.claim("me", 10, 30_000, Date.now())
    t.equal(claims.length, 2, "the head of each config's queue, one at a time")
    for (const claim of claims) {
      seen.push(`${claim.item.configId}:${claim.item.seq}:${claim.item.event.task.status.state}`)
      t.equal(claim.config.id, claim.item.configId)
      t.equal(claim.item.attempts, 0)
    }
    t.same(await push.claim("other", 10, 30_000, Date.now()), [], "nothing more while the heads are held")
    for (const claim of claims) await push.ack(claim)
  }
  t.same(seen.sort(), ["x:1:submitted", "x:2:working", "x:3:completed", "y:1:submitted", "y:2:working", "y:3:completed"])
  t.equal(push.usage.outbox, 0)
  const keys = new Set<string>()
  await push.saveWithEvent(sampleTask("t1", "completed"), status(sampleTask("t1", "completed")))
  for (const claim of await push.claim("me", 10, 30_000, Date.now())) keys.add(claim.item.key)
  t.equal(keys.size, 2, "every notification has its own key")
})

t.test("a refused save enqueues nothing; a save through a subclass's save is recorded", async (t) => {
  const store = new InMemoryTaskStore({ maxTasks: 1 })
  await store.push.putConfig(config("t2", "x"))
  await store.save(sampleTask("t1"))
  await t.rejects(store.push.saveWithEvent(sampleTask("t2"), status(sampleTask("t2"))), StoreFullError)
  t.equal(await store.get("t2"), undefined)
  t.equal(store.push.usage.outbox, 0, "neither the save nor its notification landed")

  const recording = new RecordingStore()
  await recording.push.putConfig(config("r", "x"))
  await recording.push.saveWithEvent(sampleTask("r"), status(sampleTask("r")))
  t.same(recording.statesOf("r"), ["submitted"])
  t.equal(recording.push.usage.outbox, 1)
})

t.test("claims: a lease keeps others off until it ends; retryLater waits for notBefore; a stale claim settles nothing", async (t) => {
  const { push } = new InMemoryTaskStore()
  await push.putConfig(config("t", "c"))
  await push.saveWithEvent(sampleTask("t"), status(sampleTask("t")))
  await push.saveWithEvent(sampleTask("t", "working"), status(sampleTask("t", "working")))
  const now = Date.now()
  const [first] = await push.claim("a", 5, 1000, now)
  t.equal(first?.item.seq, 1)
  t.same(await push.claim("b", 5, 1000, now + 999), [], "held under the lease")
  const [taken] = await push.claim("b", 5, 1000, now + 1000)
  t.equal(taken?.item.key, first?.item.key, "after the lease, another instance takes the same notification")
  await push.retryLater(first, now + 50_000, "stale")
  await push.deadLetter(first, "stale")
  t.equal(push.usage.outbox, 2, "the stale claim changed nothing")
  await push.retryLater(taken, now + 5000, "HTTP 503")
  t.same(await push.claim("b", 5, 1000, now + 4999), [], "not before notBefore, and the next one waits behind it")
  const [again] = await push.claim("b", 5, 1000, now + 5000)
  t.equal(again?.item.key, first?.item.key)
  t.equal(again?.item.attempts, 1)
  t.equal(again?.item.lastError, "HTTP 503")
  await push.ack(first)
  t.equal(push.usage.outbox, 1, "delivered on a stale claim is still delivered")
  const [second] = await push.claim("b", 5, 1000, now + 5000)
  t.equal(second?.item.seq, 2)
})

t.test("dead letters: newest first, bounded by count and bytes", async (t) => {
  const { push } = new InMemoryTaskStore({ push: { maxDeadLetters: 3 } })
  await push.putConfig(config("t", "c"))
  for (let i = 0; i < 5; i++) {
    await push.saveWithEvent(sampleTask("t", "working", { metadata: { i } }), status(sampleTask("t", "working", { metadata: { i } })))
    const [claim] = await push.claim("me", 1, 1000, Date.now())
    await push.deadLetter(claim, `HTTP 404 (${i})`)
  }
  const dead = await push.listDeadLetters(10)
  t.same(dead.map((letter) => letter.reason), ["HTTP 404 (4)", "HTTP 404 (3)", "HTTP 404 (2)"])
  t.same(dead[0].event.task.metadata, { i: 4 })
  t.ok(dead[0].deadAt >= dead[0].enqueuedAt)
  t.same((await push.listDeadLetters(1)).map((letter) => letter.reason), ["HTTP 404 (4)"])
  t.same(await push.listDeadLetters(0), [])
  t.equal(push.usage.outbox, 0)
})

t.test("deleting a config drops its notifications; deleting, sweeping or dropping a Task drops its configs and notifications", async (t) => {
  const store = new InMemoryTaskStore({ maxTasks: 2, maxTasksPerOwner: 2 })
  const { push } = store
  for (const id of ["a", "b"]) {
    await push.putConfig(config(id, "c1"))
    await push.putConfig(config(id, "c2"))
    await push.saveWithEvent(sampleTask(id), status(sampleTask(id)))
  }
  t.equal(push.usage.outbox, 4)
  await push.deleteConfig("a", "c1")
  t.equal(push.usage.outbox, 3)
  await store.delete("a")
  t.same(await push.listConfigs("a"), [])
  t.equal(push.usage.outbox, 2)

  await push.saveWithEvent(sampleTask("b", "completed"), status(sampleTask("b", "completed")))
  t.equal(push.usage.outbox, 4)
  await store.save(sampleTask("c"))
  await store.save(sampleTask("d"))
  t.equal(await store.get("b"), undefined, "the finished Task was dropped for room")
  t.same(await push.listConfigs("b"), [])
  t.same(push.usage, { configs: 0, configBytes: 0, outbox: 0, outboxBytes: 0, deadLetters: 0, deadLetterBytes: 0 })

  const swept = new InMemoryTaskStore()
  await swept.push.putConfig(config("old", "c"))
  await swept.push.saveWithEvent(sampleTask("old", "completed"), status(sampleTask("old", "completed")))
  t.equal(await swept.deleteFinishedBefore("2999-01-01T00:00:00.000Z"), 1)
  t.equal(swept.push.usage.configs, 0)
  t.equal(swept.push.usage.outbox, 0)
})

t.test("bounds: configs past maxConfigBytes are refused; the outbox past maxOutboxBytes sends its oldest to the dead letters, the heavier owner's first", async (t) => {
  const small = new InMemoryTaskStore({ push: { maxConfigBytes: 2000 } })
  await small.push.putConfig(config("t", "a"))
  await t.rejects(small.push.putConfig(config("t", "b", { token: "x".repeat(1000) })), { message: /push\.maxConfigBytes \(2000 bytes\).*raise opts\.push\.maxConfigBytes/ })
  await small.push.putConfig(config("t", "a", { token: "y" }))
  t.equal(small.push.usage.configs, 1)
  t.ok(small.push.usage.configBytes <= 2000)

  // Each notification here counts about 9 KB (heavy's 10 KB): an owner's half holds 2 of them, the total 4.
  const maxOutboxBytes = 40_000
  const store = new InMemoryTaskStore({ push: { maxOutboxBytes, maxDeadLetterBytes: 200_000 } })
  const { push } = store
  const saveAs = async (owner: string, i: number) => {
    const big = "z".repeat(owner === "heavy" ? 4400 : 4000)
    const task = ownedBy(sampleTask(owner, "working", { metadata: { big, i } }), owner)
    await push.saveWithEvent(task, status(task))
  }
  for (const owner of ["heavy", "light", "third"]) await push.putConfig(config(owner, "c"))
  for (let i = 0; i < 6; i++) await saveAs("heavy", i)
  t.same(
    (await push.listDeadLetters(10)).map((letter) => letter.seq),
    [4, 3, 2, 1],
    "past its half, the saving owner's oldest went",
  )
  await saveAs("light", 0)
  await saveAs("third", 0)
  await saveAs("third", 1)
  t.ok(push.usage.outboxBytes <= maxOutboxBytes, `outbox ${push.usage.outboxBytes} <= ${maxOutboxBytes}`)
  const dead = await push.listDeadLetters(10)
  t.same(
    dead.map((letter) => `${letter.taskId}:${letter.seq}`),
    ["heavy:5", "heavy:4", "heavy:3", "heavy:2", "heavy:1"],
    "past the total, the heaviest owner's oldest went",
  )
  t.ok(dead.every((letter) => /^outbox full: undelivered notifications passed push\.maxOutboxBytes \(40000 bytes\)/.test(letter.reason)))
  const [lightClaim] = (await push.claim("me", 10, 1000, Date.now())).filter((claim) => claim.item.taskId === "light")
  t.ok(lightClaim, "the light owner's notification is still there")
})

t.test("outbox full: a notification being sent is never the one dropped, so its channel's next waits for it", async (t) => {
  // Each notification counts about 9 KB: the owner's half of 40 KB holds two.
  const store = new InMemoryTaskStore({ push: { maxOutboxBytes: 40_000, maxDeadLetterBytes: 200_000 } })
  const { push } = store
  await push.putConfig(config("t", "c"))
  const saveNth = async (i: number) => {
    const task = sampleTask("t", "working", { metadata: { big: "z".repeat(4000), i } })
    await push.saveWithEvent(task, status(task))
  }
  await saveNth(0)
  const [sending] = await push.claim("me", 10, 60_000, Date.now())
  t.equal(sending.item.seq, 1)
  await saveNth(1)
  await saveNth(2)
  t.same(
    (await push.listDeadLetters(10)).map((letter) => letter.seq),
    [2],
    "the owner's oldest not being sent went, not the one under way",
  )
  t.same(await push.claim("me", 10, 60_000, Date.now()), [], "the channel is still held by the one under way")
  await push.ack(sending)
  t.same(
    (await push.claim("me", 10, 60_000, Date.now())).map((claim) => claim.item.seq),
    [3],
    "after it, the channel's next",
  )
})

t.test("options are checked", async (t) => {
  t.throws(() => new InMemoryTaskStore({ push: { maxDeadLetters: 0 } }), { message: "InMemoryTaskStore: opts.push.maxDeadLetters should be a positive integer" })
  const store = new InMemoryTaskStore({ maxBytes: 8_000_000 })
  t.same(store.push.bounds, { maxConfigBytes: 1_000_000, maxOutboxBytes: 2_000_000, maxDeadLetters: 1000, maxDeadLetterBytes: 500_000 })
})
