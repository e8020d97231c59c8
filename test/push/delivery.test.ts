import { createHook } from "node:async_hooks"
import { createHash, generateKeyPairSync, randomUUID } from "node:crypto"
import Fastify, { type FastifyReply } from "fastify"
import { createLocalJWKSet, jwtVerify } from "jose"
import t, { type Test } from "tap"
import { transitionSaver } from "../../lib/a2a/transitions.js"
import { allowList } from "../../lib/push/guard.js"
import { PushSender, type PushSenderOptions } from "../../lib/push/sender.js"
import { createPushSigner, SIGNATURE_HEADER } from "../../lib/push/signer.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { PushConfigRecord } from "../../lib/stores/push-store.js"
import type { A2AArtifact, A2ATask, TaskState } from "../../lib/types.js"
import { createLocalClient } from "../../lib/client/client.js"
import { a2aApp, deferred, injectRpc, memoryLogger, RecordingStore, rpc, sampleTask, tmpDir, userMessage, waitFor } from "../fixtures/helpers.js"

/** A request the webhook got. */
interface Received {
  path: string
  headers: Record<string, string | string[] | undefined>
  body: string
  json: any
  /** What the receiver answered it with. */
  status: number
}

type Answer = { status: number; headers?: Record<string, string> } | Promise<{ status: number; headers?: Record<string, string> }>

/** A webhook receiver on 127.0.0.1: records every request and answers as `answer` says (default 200). */
async function receiver(t: Test, answer: (request: Omit<Received, "status">, index: number) => Answer = () => ({ status: 200 })) {
  const app = Fastify()
  const received: Received[] = []
  app.removeAllContentTypeParsers()
  app.addContentTypeParser("*", { parseAs: "string" }, (_request, body, done) => done(null, body))
  app.post("/*", async (request, reply: FastifyReply) => {
    const body = request.body as string
    const seen = { path: request.url, headers: request.headers, body, json: JSON.parse(body) }
    const { status, headers } = await answer(seen, received.length)
    received.push({ ...seen, status })
    reply.code(status).headers(headers ?? {})
    return ""
  })
  await app.listen({ port: 0, host: "127.0.0.1" })
  t.teardown(() => app.close())
  const { port } = app.server.address() as { port: number }
  return { received, url: (path = "/hook") => `http://127.0.0.1:${port}${path}`, host: `127.0.0.1:${port}` }
}

/** A memory store with push, a sender on it allowed to reach `hosts`, and a save that goes through the outbox. */
function delivery(t: Test, hosts: string[], opts: Partial<PushSenderOptions> = {}) {
  const store = new InMemoryTaskStore()
  const log = memoryLogger()
  const sender = new PushSender({ store: store.push, log, instance: randomUUID(), allow: allowList(hosts), backoff: { baseMs: 5, maxMs: 20 }, ...opts })
  t.teardown(() => sender.stop())
  const save = transitionSaver(store, { store: store.push, enqueued: () => sender.wake() })
  return { store, log, sender, save }
}

const hookConfig = (taskId: string, url: string, extra: Partial<PushConfigRecord> = {}): PushConfigRecord => ({
  taskId,
  id: "c1",
  version: "1.0",
  url,
  createdAt: "2026-01-01T00:00:00.000Z",
  ...extra,
})

const withState = (task: A2ATask, state: TaskState): A2ATask => ({ ...task, status: { state, timestamp: new Date().toISOString() } })

/** Saves a Task through submitted → working → completed with an answer, as the runner does. */
async function runThrough(save: (task: A2ATask, artifact?: A2AArtifact) => Promise<void>, task: A2ATask): Promise<A2ATask> {
  await save(task)
  await save(withState(task, "working"))
  const artifact: A2AArtifact = { artifactId: "a1", name: "answer", parts: [{ kind: "text", text: "the answer" }] }
  const done = { ...withState(task, "completed"), artifacts: [artifact] }
  await save(done, artifact)
  return done
}

t.test("1.0: one notification per transition, in order, as StreamResponses with the config's headers", async (t) => {
  const hook = await receiver(t)
  const { store, sender, save } = delivery(t, [hook.host])
  await sender.start()
  const task = sampleTask("t-10")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url("/hook?x=1"), { token: "tok-1", authentication: { scheme: "Basic", credentials: "dXNlcjpwYXNz" } }))
  await runThrough(save, withState(task, "submitted"))
  await waitFor(() => hook.received.length === 4, 5000, "four notifications")
  t.same(
    hook.received.map((r) => Object.keys(r.json)[0]),
    ["statusUpdate", "statusUpdate", "artifactUpdate", "statusUpdate"],
    "status, status, then the completion's artifact before its status",
  )
  t.same(
    hook.received.filter((r) => r.json.statusUpdate).map((r) => r.json.statusUpdate.status.state),
    ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
  )
  const artifact = hook.received[2].json.artifactUpdate
  t.same(artifact.artifact, { artifactId: "a1", name: "answer", parts: [{ text: "the answer" }] }, "the artifact in 1.0 form")
  t.equal(artifact.taskId, task.id)
  for (const request of hook.received) {
    t.equal(request.path, "/hook?x=1", "posted to the config's URL, query included")
    t.equal(request.headers["content-type"], "application/a2a+json")
    t.equal(request.headers.authorization, "Basic dXNlcjpwYXNz", "Authorization: <scheme> <credentials>")
    t.equal(request.headers["x-a2a-notification-token"], "tok-1")
    t.match(request.headers["user-agent"], /^toolnexus/)
    t.match(request.headers["idempotency-key"], /^[\w-]{8,}$/)
  }
  t.equal(new Set(hook.received.map((r) => r.headers["idempotency-key"])).size, 4, "a different Idempotency-Key per notification")
})

t.test("0.3: the whole Task in 0.3 form, as application/json; no Authorization without authentication", async (t) => {
  const hook = await receiver(t)
  const { store, sender, save } = delivery(t, [hook.host])
  await sender.start()
  const task = sampleTask("t-03")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url(), { version: "0.3", token: "tok" }))
  await runThrough(save, task)
  await waitFor(() => hook.received.length === 3, 5000, "three notifications")
  t.same(
    hook.received.map((r) => r.json.status.state),
    ["submitted", "working", "completed"],
    "one POST per change: the final save's artifact and status arrive as one Task",
  )
  for (const request of hook.received) {
    t.equal(request.json.kind, "task")
    t.equal(request.json.id, task.id)
    t.equal(request.headers["content-type"], "application/json")
    t.equal(request.headers.authorization, undefined)
    t.equal(request.headers["x-a2a-notification-token"], "tok")
  }
  t.same(hook.received[2].json.artifacts[0].parts, [{ kind: "text", text: "the answer" }])
})

t.test("a receiver that refuses (503) for a while: every notification arrives, in order, a duplicate only with the same Idempotency-Key", async (t) => {
  // Refuses the first 7 requests, and every third one after that.
  const hook = await receiver(t, (_request, index) => ({ status: index < 7 || index % 3 === 0 ? 503 : 200 }))
  const { store, sender, save, log } = delivery(t, [hook.host])
  await sender.start()
  const tasks = ["ta", "tb", "tc"].map((id) => sampleTask(id))
  for (const task of tasks) {
    await store.save(task)
    await store.push.putConfig(hookConfig(task.id, hook.url(`/${task.id}`)))
  }
  await Promise.all(tasks.map((task) => runThrough(save, task)))
  const delivered = () => hook.received.filter((r) => r.status === 200)
  await waitFor(() => delivered().length === 12, 10_000, "twelve notifications delivered")
  for (const task of tasks) {
    const mine = hook.received.filter((r) => r.path === `/${task.id}`)
    const ok = mine.filter((r) => r.status === 200)
    t.same(
      ok.map((r) => r.json.statusUpdate?.status.state ?? "artifact"),
      ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "artifact", "TASK_STATE_COMPLETED"],
      `${task.id}: all four delivered, in order`,
    )
    // In arrival order, the keys form runs: a refused request is followed by its retry, never by the next notification.
    const keys = mine.map((r) => r.headers["idempotency-key"])
    const runs = keys.filter((key, i) => i === 0 || key !== keys[i - 1])
    t.same(runs, ok.map((r) => r.headers["idempotency-key"]), `${task.id}: each notification's attempts come together, with one key, before the next one's`)
    for (const request of mine.filter((r) => r.status === 503)) {
      t.ok(ok.some((r) => r.headers["idempotency-key"] === request.headers["idempotency-key"] && r.body === request.body), "a refused attempt is retried with the same key and body")
    }
  }
  t.ok(hook.received.length > 12, `some were refused first (${hook.received.length} requests for 12 notifications)`)
  t.ok(log.lines.some((line) => line.msg === "push notification not delivered; retrying" && line.error === "HTTP 503"), "retries are logged")
  t.same(await store.push.listDeadLetters(10), [], "nothing dead-lettered")
})

t.test("Retry-After is honoured: the retry waits for it, even where the backoff would not", async (t) => {
  const refusedAt: number[] = []
  const hook = await receiver(t, (_request, index) => {
    if (index > 0) return { status: 200 }
    refusedAt.push(Date.now())
    return { status: 429, headers: { "retry-after": "1" } }
  })
  // A backoff of at most 1 ms: only Retry-After can make the retry wait a second.
  const { store, sender, save } = delivery(t, [hook.host], { backoff: { baseMs: 1, maxMs: 1 } })
  await sender.start()
  const task = sampleTask("t-ra")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  const retriedAt = deferred<number>()
  await save(withState(task, "working"))
  await waitFor(() => hook.received.length === 2, 10_000, "the retry")
  retriedAt.resolve(Date.now())
  t.same(hook.received.map((r) => r.status), [429, 200], "refused with 429, then delivered")
  t.equal(hook.received[0].headers["idempotency-key"], hook.received[1].headers["idempotency-key"], "the same notification")
  // A lower bound only: a loaded machine can make the retry later, never earlier.
  t.ok((await retriedAt.promise) - refusedAt[0] >= 990, "not retried before the second Retry-After asked for")
})

t.test("Retry-After: 0 waits at least the backoff's floor: a receiver cannot make a tight retry loop", async (t) => {
  const answeredAt: number[] = []
  const hook = await receiver(t, (_request, index) => {
    answeredAt.push(Date.now())
    return index < 3 ? { status: 503, headers: { "retry-after": "0" } } : { status: 200 }
  })
  const { store, sender, save } = delivery(t, [hook.host], { backoff: { baseMs: 300, maxMs: 300 } })
  await sender.start()
  const task = sampleTask("t-ra0")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  await save(withState(task, "working"))
  await waitFor(() => hook.received.some((r) => r.status === 200), 10_000, "the delivery")
  t.same(hook.received.map((r) => r.status), [503, 503, 503, 200])
  // Lower bounds only: a loaded machine makes retries later, never earlier.
  for (let i = 1; i < answeredAt.length; i++) t.ok(answeredAt[i] - answeredAt[i - 1] >= 290, `retry ${i} waited the floor (${answeredAt[i] - answeredAt[i - 1]} ms)`)
})

t.test("more than ten requests under way at once print no MaxListenersExceededWarning", async (t) => {
  const warnings: string[] = []
  const onWarning = (warning: Error) => void warnings.push(warning.name)
  process.on("warning", onWarning)
  t.teardown(() => void process.off("warning", onWarning))
  const release = deferred()
  let waiting = 0
  const hook = await receiver(t, async () => {
    waiting++
    await release.promise
    return { status: 200 }
  })
  const { store, sender, save } = delivery(t, [hook.host], { maxInFlightPerOrigin: 16 })
  await sender.start()
  const tasks = Array.from({ length: 12 }, (_, i) => sampleTask(`wide-${i}`))
  for (const task of tasks) {
    await store.save(task)
    await store.push.putConfig(hookConfig(task.id, hook.url(`/${task.id}`)))
  }
  // Twelve Tasks to twelve webhook paths of one origin: allow them all at once.
  await Promise.all(tasks.map((task) => save(withState(task, "working"))))
  await waitFor(() => waiting === 12, 10_000, "twelve requests under way at once")
  release.resolve()
  await waitFor(() => hook.received.length === 12, 10_000, "every notification")
  await new Promise((resolve) => setImmediate(resolve)) // a warning is emitted on the next tick
  t.notOk(warnings.includes("MaxListenersExceededWarning"), "no listener warning")
})

t.test("a stored notification that cannot be rendered goes to the dead letters at once, not retried for a day", async (t) => {
  const hook = await receiver(t)
  const { store, sender } = delivery(t, [hook.host])
  await sender.start()
  const task = sampleTask("t-broken")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  // What a damaged store could hold: an event whose Task has no status.
  await store.push.saveWithEvent(task, { kind: "status", task: { ...task, status: undefined } as unknown as A2ATask })
  sender.wake()
  await waitFor(async () => (await store.push.listDeadLetters(10)).length === 1, 5000, "the dead letter")
  t.match((await store.push.listDeadLetters(10))[0], { taskId: "t-broken", reason: /cannot be rendered/ })
  t.equal(hook.received.length, 0, "nothing was posted")
})

t.test("a 400 is final: the notification goes to the dead letters at once, logged without credentials, and the next one follows", async (t) => {
  const hook = await receiver(t, (_request, index) => ({ status: index === 0 ? 400 : 200 }))
  const { store, sender, save, log } = delivery(t, [hook.host])
  await sender.start()
  const task = sampleTask("t-400")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url("/secret-path?key=hidden"), { authentication: { scheme: "Bearer", credentials: "s3cr3t" }, token: "tok-secret" }))
  await save(withState(task, "working"))
  await save(withState(task, "completed"))
  await waitFor(() => hook.received.length === 2, 5000, "both notifications tried")
  const dead = await store.push.listDeadLetters(10)
  t.equal(dead.length, 1)
  t.match(dead[0].reason, /HTTP 400/)
  t.equal(dead[0].event.task.status.state, "working")
  t.equal(dead[0].attempts, 1, "its one attempt, the one answered 400, is counted")
  t.equal(hook.received[1].json.statusUpdate.status.state, "TASK_STATE_COMPLETED", "the next notification went on")
  const line = log.lines.find((l) => l.msg === "push notification dead-lettered")
  t.ok(line, "the dead letter is logged")
  t.match(line, { level: "warn", taskId: task.id, configId: "c1", origin: new URL(hook.url()).origin })
  t.match(line!.reason, /HTTP 400/)
  const text = JSON.stringify(log.lines)
  for (const secret of ["s3cr3t", "tok-secret", "secret-path", "hidden"]) t.notOk(text.includes(secret), `the logs never carry ${secret}`)
})

t.test("maxAttempts: a receiver that always fails gets exactly that many attempts, then the dead letters", async (t) => {
  const hook = await receiver(t, () => ({ status: 500 }))
  const { store, sender, save, log } = delivery(t, [hook.host], { maxAttempts: 3 })
  await sender.start()
  const task = sampleTask("t-max")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  await save(withState(task, "working"))
  await waitFor(async () => (await store.push.listDeadLetters(1)).length === 1, 5000, "the dead letter")
  t.equal(hook.received.length, 3, "three attempts")
  const [dead] = await store.push.listDeadLetters(1)
  t.match(dead.reason, /failed 3 times \(maxAttempts\); the last: HTTP 500/)
  t.equal(dead.attempts, 3, "the letter counts every attempt, the last included")
  t.ok(log.lines.some((l) => l.msg === "push notification dead-lettered"))
})

t.test("connection errors are retried; a webhook the guard refuses is dead-lettered", async (t) => {
  const { store, sender, save } = delivery(t, [], { maxAttempts: 2 })
  await sender.start()
  const task = sampleTask("t-guard")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, "http://127.0.0.1:9/hook"))
  await save(withState(task, "working"))
  await waitFor(async () => (await store.push.listDeadLetters(1)).length === 1, 5000, "the dead letter")
  const [dead] = await store.push.listDeadLetters(1)
  t.match(dead.reason, /refused.*loopback/, "a loopback address not on the allow list is refused")

  const closed = delivery(t, ["127.0.0.1:9"], { maxAttempts: 2 })
  await closed.sender.start()
  await closed.store.save(task)
  await closed.store.push.putConfig(hookConfig(task.id, "http://127.0.0.1:9/hook"))
  await closed.save(withState(task, "working"))
  await waitFor(async () => (await closed.store.push.listDeadLetters(1)).length === 1, 5000, "the dead letter")
  t.match((await closed.store.push.listDeadLetters(1))[0].reason, /failed 2 times.*connection failed: ECONNREFUSED/)
})

t.test("signed: a JWT a receiver verifies with the JWKS (aud, jti, taskId, body hash); beside the config's own Authorization when it has one", async (t) => {
  const hook = await receiver(t)
  const { privateKey } = generateKeyPairSync("ed25519")
  const signer = await createPushSigner(privateKey.export({ type: "pkcs8", format: "pem" }) as string, "https://agent.example/")
  const { store, sender, save } = delivery(t, [hook.host], { signer })
  await sender.start()
  const plain = sampleTask("t-sig")
  const authed = sampleTask("t-sig-auth")
  for (const task of [plain, authed]) await store.save(task)
  await store.push.putConfig(hookConfig(plain.id, hook.url("/plain")))
  await store.push.putConfig(hookConfig(authed.id, hook.url("/authed"), { authentication: { scheme: "Bearer", credentials: "own" } }))
  await save(withState(plain, "working"))
  await save(withState(authed, "working"))
  await waitFor(() => hook.received.length === 2, 5000, "two notifications")
  const jwks = createLocalJWKSet(signer.jwks)
  for (const request of hook.received) {
    const own = request.path === "/authed"
    const header = own ? request.headers[SIGNATURE_HEADER.toLowerCase()] : request.headers.authorization
    if (own) t.equal(request.headers.authorization, "Bearer own", "the config's Authorization is kept")
    const jwt = own ? (header as string) : (header as string).replace(/^Bearer /, "")
    const { payload, protectedHeader } = await jwtVerify(jwt, jwks, { audience: hook.url(request.path), issuer: "https://agent.example/" })
    t.equal(protectedHeader.alg, "EdDSA")
    t.equal(payload.jti, request.headers["idempotency-key"], "jti is the Idempotency-Key")
    t.equal(payload.taskId, own ? authed.id : plain.id)
    t.equal(payload.body_sha256, createHash("sha256").update(request.body).digest("base64url"), "the hash of the exact body")
    t.ok(payload.exp! - payload.iat! <= 300, "short-lived")
  }
})

t.test("a slow webhook holds up only its own channels", async (t) => {
  const release = deferred()
  const slow = await receiver(t, async () => {
    await release.promise
    return { status: 200 }
  })
  const fast = await receiver(t)
  const { store, sender, save } = delivery(t, [slow.host, fast.host], { maxInFlightPerOrigin: 2, maxInFlight: 4 })
  await sender.start()
  const slowTasks = ["s1", "s2", "s3", "s4", "s5"].map((id) => sampleTask(id))
  const fastTasks = ["f1", "f2", "f3"].map((id) => sampleTask(id))
  for (const task of slowTasks) {
    await store.save(task)
    await store.push.putConfig(hookConfig(task.id, slow.url(`/${task.id}`)))
  }
  for (const task of fastTasks) {
    await store.save(task)
    await store.push.putConfig(hookConfig(task.id, fast.url(`/${task.id}`)))
  }
  for (const task of slowTasks) await save(withState(task, "working"))
  for (const task of fastTasks) {
    await save(withState(task, "working"))
    await save(withState(task, "completed"))
  }
  await waitFor(() => fast.received.length === 6, 5000, "the fast webhook's six notifications, while the slow one holds its requests")
  t.equal(slow.received.length, 0, "the slow webhook has answered nothing yet")
  release.resolve()
  await waitFor(() => slow.received.length === 5, 10_000, "the slow webhook's five")
  t.same(fast.received.filter((r) => r.path === "/f1").map((r) => r.json.statusUpdate.status.state), ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"])
})

t.test("a store slow to record a delivery does not hold up the webhook's next requests", async (t) => {
  const hook = await receiver(t)
  const store = new InMemoryTaskStore()
  const acks = deferred()
  let acking = 0
  // The store's ack waits until released: the outcome of the first POST is not recorded meanwhile.
  const push = new Proxy(store.push, {
    get(target, prop) {
      if (prop === "ack") {
        return async (claim: Parameters<typeof target.ack>[0]) => {
          acking++
          await acks.promise
          return target.ack(claim)
        }
      }
      const value = Reflect.get(target, prop)
      return typeof value === "function" ? value.bind(target) : value
    },
  })
  const sender = new PushSender({ store: push, log: memoryLogger(), instance: randomUUID(), allow: allowList([hook.host]), maxInFlightPerOrigin: 1 })
  t.teardown(() => {
    acks.resolve()
    return sender.stop()
  })
  const save = transitionSaver(store, { store: push, enqueued: () => sender.wake() })
  await sender.start()
  for (const id of ["a1", "a2"]) {
    await store.save(sampleTask(id))
    await store.push.putConfig(hookConfig(id, hook.url(`/${id}`)))
  }
  await save(withState(sampleTask("a1"), "working"))
  await save(withState(sampleTask("a2"), "working"))
  // The first ack cannot finish before the release: a second POST through the origin's one slot proves the slot was freed without it.
  await waitFor(() => hook.received.length === 2, 5000, "both Tasks' notifications, through the origin's one slot, while the first is not yet recorded")
  await waitFor(() => acking === 2, 5000, "both acks under way")
  t.equal((await store.push.claim("another", 10, 60_000, Date.now())).length, 0, "both are still held, by their claims")
  acks.resolve()
  await waitFor(async () => (await store.push.oldestPendingAt()) === undefined, 5000, "the outbox empty once the acks land")
  t.same(hook.received.map((r) => r.path).sort(), ["/a1", "/a2"])
})

t.test("stop(): nothing of the sender is left (no timer, no socket), and a request cut short is due again", async (t) => {
  const arrived = deferred()
  const hook = await receiver(t, async () => {
    arrived.resolve()
    await new Promise(() => {})
    return { status: 200 }
  })
  // Every timer set from lib/push while the sender lives, by async id, until it is destroyed.
  const pending = new Map<number, string>()
  const hook_ = createHook({
    init(asyncId, type) {
      if (type === "Timeout" && /lib\/push\//.test(new Error().stack ?? "")) pending.set(asyncId, type)
    },
    destroy: (asyncId) => void pending.delete(asyncId),
  }).enable()
  t.teardown(() => void hook_.disable())
  const { store, sender, save } = delivery(t, [hook.host], { timeoutMs: 30_000 })
  await sender.start()
  const task = sampleTask("t-stop")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  await save(withState(task, "working"))
  await arrived.promise
  t.ok(pending.size >= 2, `the poll and the request's timeout are pending (${pending.size})`)
  await sender.stop()
  for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve))
  t.equal(pending.size, 0, "no timer of the sender is left")
  const claims = await store.push.claim("another", 10, 1000, Date.now())
  t.equal(claims.length, 1, "the notification under way at stop is due again, for whoever claims next")
  t.equal(claims[0].item.lastError, "interrupted: the server stopped")
})

t.test("through the plugin: the runner's transitions reach the webhook, signed, verified with the JWKS the server serves", async (t) => {
  const hook = await receiver(t)
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" })
  const store = new InMemoryTaskStore()
  const answer = deferred<string>()
  const app = await a2aApp(t, {
    client: createLocalClient(() => answer.promise),
    store,
    prefix: "/agents/desk",
    url: "https://agents.example/desk/",
    push: { allow: [hook.host], signingKey: privateKey.export({ format: "jwk" }) },
  })
  const sent = await injectRpc(app, rpc("SendMessage", { message: userMessage("hi"), configuration: { returnImmediately: true } }), { "a2a-version": "1.0" }, "/agents/desk/")
  const taskId = sent.json().result.task.id as string
  await store.push.putConfig(hookConfig(taskId, hook.url(), { token: "t" }))
  answer.resolve("the answer")
  await waitFor(() => hook.received.length === 2, 5000, "the completion's two notifications")
  t.same(hook.received.map((r) => Object.keys(r.json)[0]), ["artifactUpdate", "statusUpdate"])
  t.equal(hook.received[1].json.statusUpdate.status.state, "TASK_STATE_COMPLETED")
  t.same(hook.received[0].json.artifactUpdate.artifact.parts, [{ text: "the answer" }])
  const served = await app.inject({ method: "GET", url: "/agents/desk/.well-known/jwks.json" })
  t.equal(served.statusCode, 200)
  t.match(served.headers["content-type"], /^application\/jwk-set\+json/)
  const jwks = served.json()
  t.equal(jwks.keys.length, 1)
  t.notOk("d" in jwks.keys[0], "the public half only")
  for (const request of hook.received) {
    const jwt = (request.headers.authorization as string).replace(/^Bearer /, "")
    const { payload } = await jwtVerify(jwt, createLocalJWKSet(jwks), { audience: hook.url(), issuer: "https://agents.example/desk/" })
    t.equal(payload.taskId, taskId)
  }
  t.equal((await app.inject({ method: "GET", url: "/agents/desk/.well-known/agent-card.json" })).statusCode, 200)
})

t.test("a save wakes the sender only when it enqueued something (or its store cannot say)", async (t) => {
  const store = new InMemoryTaskStore()
  let wakes = 0
  const save = transitionSaver(store, { store: store.push, enqueued: () => wakes++ })
  await save(sampleTask("quiet", "working"))
  t.equal(wakes, 0, "no webhook: no wake")
  await store.push.putConfig(hookConfig("loud", "https://hooks.example.com/a"))
  await save(sampleTask("loud", "working"))
  t.equal(wakes, 1, "a webhook: woken once for the save")
  const done = { ...sampleTask("loud", "completed"), artifacts: [{ artifactId: "a-1", parts: [{ kind: "text", text: "x" }] }] } as A2ATask
  await save(done, done.artifacts![0])
  t.equal(wakes, 2, "one wake for a save that enqueued two")

  // A host store whose saveWithEvent resolves with nothing: every save wakes the sender.
  const vague = Object.assign(Object.create(store.push) as typeof store.push, { saveWithEvent: async (task: A2ATask) => void (await store.save(task)) })
  let vagueWakes = 0
  await transitionSaver(store, { store: vague, enqueued: () => vagueWakes++ })(sampleTask("quiet", "completed"))
  t.equal(vagueWakes, 1)
})

t.test("through the plugin: no JWKS route without a key; push: false saves as before and sends nothing", async (t) => {
  const hook = await receiver(t)
  const store = new RecordingStore()
  const enqueued: string[] = []
  const saveWithEvent = store.push.saveWithEvent.bind(store.push)
  store.push.saveWithEvent = async (task, ...events) => {
    enqueued.push(task.status.state)
    return saveWithEvent(task, ...events)
  }
  const app = await a2aApp(t, { client: createLocalClient(() => "done"), store, push: false })
  t.equal((await app.inject({ method: "GET", url: "/.well-known/jwks.json" })).statusCode, 404)
  const sent = await injectRpc(app, rpc("SendMessage", { message: userMessage("hi") }), { "a2a-version": "1.0" })
  const taskId = sent.json().result.task.id as string
  t.same(store.statesOf(taskId), ["submitted", "working", "completed"], "one save per transition")
  t.same(enqueued, [], "push off: nothing goes through the outbox")
  t.equal(hook.received.length, 0)

  const on = new RecordingStore()
  const app2 = await a2aApp(t, { client: createLocalClient(() => "done"), store: on })
  const sent2 = await injectRpc(app2, rpc("SendMessage", { message: userMessage("hi") }), { "a2a-version": "1.0" })
  t.same(on.statesOf(sent2.json().result.task.id), ["submitted", "working", "completed"], "push on: still exactly one save per transition")
})

t.test("a webhook that does not answer within timeoutMs: the attempt fails as a timeout and is retried", async (t) => {
  const hook = await receiver(t, async (_request, index) => {
    if (index === 0) await new Promise((resolve) => setTimeout(resolve, 1500))
    return { status: 200 }
  })
  const { store, sender, save, log } = delivery(t, [hook.host], { timeoutMs: 200 })
  await sender.start()
  const task = sampleTask("t-timeout")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  await save(withState(task, "working"))
  await waitFor(() => log.lines.some((l) => l.msg === "push notification not delivered; retrying"), 5000, "the retry")
  t.match(log.lines.find((l) => l.msg === "push notification not delivered; retrying"), { error: /^timed out: no answer within 200 ms/ })
  await waitFor(() => hook.received.some((r, i) => i > 0 && r.status === 200), 5000, "the retry delivered")
})

t.test("redirects are final, never followed; an invalid URL and a notification past maxAge go to the dead letters", async (t) => {
  const hook = await receiver(t, () => ({ status: 302, headers: { location: "http://169.254.169.254/" } }))
  const { store, sender, save } = delivery(t, [hook.host])
  await sender.start()
  const task = sampleTask("t-302")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  await save(withState(task, "working"))
  await waitFor(async () => (await store.push.listDeadLetters(1)).length === 1, 5000, "the dead letter")
  t.match((await store.push.listDeadLetters(1))[0].reason, /HTTP 302 \(a redirect, which is not followed\)/)
  t.equal(hook.received.length, 1, "one request, to the webhook only")

  const invalid = delivery(t, [])
  await invalid.sender.start()
  await invalid.store.save(task)
  await invalid.store.push.putConfig(hookConfig(task.id, "not a url"))
  await invalid.save(withState(task, "working"))
  await waitFor(async () => (await invalid.store.push.listDeadLetters(1)).length === 1, 5000, "the dead letter")
  t.match((await invalid.store.push.listDeadLetters(1))[0].reason, /not a valid URL/)

  const old = delivery(t, [hook.host], { maxAgeMs: 1 })
  await old.store.save(task)
  await old.store.push.putConfig(hookConfig(task.id, hook.url()))
  await old.store.push.saveWithEvent(withState(task, "working"), { kind: "status", task: withState(task, "working") })
  await new Promise((resolve) => setTimeout(resolve, 5)) // older than maxAgeMs (1 ms) before the sender first looks
  await old.sender.start()
  await waitFor(async () => (await old.store.push.listDeadLetters(1)).length === 1, 5000, "the dead letter")
  t.match((await old.store.push.listDeadLetters(1))[0].reason, /not delivered within maxAge \(1 ms\)/)
  t.equal(hook.received.length, 1, "never sent")
})

t.test("woken by the store's watchOutbox (another process enqueued), and stops watching on stop()", async (t) => {
  const hook = await receiver(t)
  const store = new InMemoryTaskStore()
  let onDue: (() => void) | undefined
  let unwatched = false
  const watching = Object.assign(Object.create(store.push) as typeof store.push, {
    watchOutbox: async (callback: () => void) => {
      onDue = callback
      return async () => void (unwatched = true)
    },
  })
  // A poll too slow to matter: only the watch can bring the notification out in time.
  const sender = new PushSender({ store: watching, log: memoryLogger(), instance: "w", allow: allowList([hook.host]), pollMs: 3_600_000 })
  t.teardown(() => sender.stop())
  await sender.start()
  const task = sampleTask("t-watch")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  await store.push.saveWithEvent(withState(task, "working"), { kind: "status", task: withState(task, "working") })
  t.equal(hook.received.length, 0, "not sent before anyone says it is due")
  onDue!()
  await waitFor(() => hook.received.length === 1, 5000, "the notification")
  await sender.stop()
  t.ok(unwatched, "the watch stopped")
})

t.test("a store that fails to record a delivery: logged, and the notification is sent again once its claim runs out", async (t) => {
  const hook = await receiver(t)
  const store = new InMemoryTaskStore()
  let failures = 1
  const failing = Object.assign(Object.create(store.push) as typeof store.push, {
    ack: async (claim: Parameters<typeof store.push.ack>[0]) => {
      if (failures-- > 0) throw new Error("the outbox is unreachable")
      return store.push.ack(claim)
    },
  })
  const log = memoryLogger()
  // A lease of 2 * 10 ms + 10 s would be long to wait: the test takes the claim over after it instead.
  const sender = new PushSender({ store: failing, log, instance: "f", allow: allowList([hook.host]), timeoutMs: 10 })
  t.teardown(() => sender.stop())
  await sender.start()
  const task = sampleTask("t-ackfail")
  await store.save(task)
  await store.push.putConfig(hookConfig(task.id, hook.url()))
  const working = withState(task, "working")
  await store.push.saveWithEvent(working, { kind: "status", task: working })
  sender.wake()
  await waitFor(() => log.lines.some((l) => l.msg.startsWith("push outbox update failed")), 5000, "the failure logged")
  t.match(log.lines.find((l) => l.msg.startsWith("push outbox update failed")), { step: "ack", taskId: task.id, err: { message: "the outbox is unreachable" } })
  const later = await store.push.claim("other", 10, 1000, Date.now() + 60_000)
  t.equal(later.length, 1, "still in the outbox: due again once the claim has run out")
  t.equal(later[0].item.key, hook.received[0].headers["idempotency-key"], "the same notification, with its key")
})

for (const [storeName, makeStore] of [
  ["memory", () => new InMemoryTaskStore()],
  ["file", (t: Test) => new FileTaskStore(tmpDir(t))],
] as const) t.test(`end to end (${storeName} store): an inline config of each version gets every transition of its Task, in that version's shape, with its own headers`, async (t) => {
  const hook = await receiver(t)
  const store = makeStore(t)
  const app = await a2aApp(t, { client: createLocalClient(() => "the answer"), store, push: { allow: [hook.host] } })
  const v10 = await injectRpc(
    app,
    rpc("SendMessage", { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] }, configuration: { taskPushNotificationConfig: { url: hook.url("/v10"), token: "tok-10", authentication: { scheme: "Bearer", credentials: "cred-10" } } } }),
    { "a2a-version": "1.0" },
  )
  const v03 = await injectRpc(app, rpc("SendMessage", { message: userMessage("hi"), configuration: { blocking: true, pushNotificationConfig: { url: hook.url("/v03"), token: "tok-03", authentication: { schemes: ["Basic", "Bearer"], credentials: "dTpw" } } } }))
  const id10 = v10.json().result.task.id
  const id03 = v03.json().result.id
  await waitFor(() => hook.received.length === 7, 5000, "four notifications in 1.0, three (one per change) in 0.3")
  const at = (path: string) => hook.received.filter((r) => r.path === path)
  t.same(
    at("/v10").map((r) => r.json.statusUpdate?.status.state ?? (r.json.artifactUpdate ? "artifact" : "?")),
    ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "artifact", "TASK_STATE_COMPLETED"],
  )
  for (const r of at("/v10")) {
    t.equal(r.json.statusUpdate?.taskId ?? r.json.artifactUpdate.taskId, id10)
    t.match(r.headers, { "content-type": "application/a2a+json", authorization: "Bearer cred-10", "x-a2a-notification-token": "tok-10" })
  }
  t.same(at("/v03").map((r) => r.json.status.state), ["submitted", "working", "completed"], "0.3: the final save's artifact comes inside its completed Task")
  t.same(at("/v03")[2].json.artifacts[0].parts, [{ kind: "text", text: "the answer" }])
  for (const r of at("/v03")) {
    t.equal(r.json.id, id03)
    t.match(r.headers, { "content-type": "application/json", authorization: "Basic dTpw", "x-a2a-notification-token": "tok-03" })
  }
  t.equal(new Set(hook.received.map((r) => r.headers["idempotency-key"])).size, 7, "seven notifications, seven keys")
  t.equal(new Set(at("/v03").map((r) => r.body)).size, 3, "no two 0.3 bodies alike")
})
