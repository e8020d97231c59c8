import { once } from "node:events"
import net from "node:net"
import Fastify from "fastify"
import underPressure from "@fastify/under-pressure"
import { pino } from "pino"
import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { Readiness, PROBE_TASK_ID } from "../../lib/readiness.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { toolnexusA2A } from "../../plugins/a2a.js"
import { serve } from "../../plugins/serve.js"
import { callRpc, deferred, rpc, userMessage, waitFor } from "../fixtures/helpers.js"

/** /healthz and /readyz in each phase of a server's life, and the drain serve()'s stop({ drainMs }) starts. */

const client = createLocalClient(({ messages }) => `echo: ${messages.at(-1)?.content ?? ""}`)

/** A store whose get the test controls: it counts the calls, and answers as `answer` says at the time. */
function probedStore(answer: { mode: "ok" | "reject" | "hang" }) {
  const inner = new InMemoryTaskStore()
  const calls: string[] = []
  const hung = deferred<undefined>()
  const store: TaskStore = {
    get: (id) => {
      calls.push(id)
      if (id !== PROBE_TASK_ID || answer.mode === "ok") return inner.get(id)
      if (answer.mode === "hang") return hung.promise
      return Promise.reject(new Error("connect ECONNREFUSED 10.1.2.3:5432 (secret-host)"))
    },
    save: (task) => inner.save(task),
  }
  return { store, calls, release: () => hung.resolve(undefined) }
}

t.test("starting: before the app listens readiness is 503 \"starting\"; liveness is 200", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(toolnexusA2A, { client })
  await app.ready()
  const ready = await app.inject({ url: "/readyz" })
  t.equal(ready.statusCode, 503)
  t.same(ready.json(), { status: "unavailable", reason: "starting" })
  t.equal(ready.headers["retry-after"], "1")
  t.equal(ready.headers["cache-control"], "no-store")
  const live = await app.inject({ url: "/healthz" })
  t.equal(live.statusCode, 200)
  t.same(live.json(), { status: "ok" })
  t.equal(app.toolnexusReadiness.phase, "starting")
})

t.test("ready: once listening, 200 on both; without credentials though auth is on; no Task data", async (t) => {
  const agent = await serve("127.0.0.1:0", { client, logger: false, a2a: { auth: { tokens: { "health-secret-0123456789": "ops" } } } })
  t.teardown(() => agent.stop())
  t.equal(agent.app.toolnexusReadiness.phase, "ready")
  const ready = await fetch(`${agent.url}/readyz`)
  t.equal(ready.status, 200)
  t.same(await ready.json(), { status: "ready" })
  t.equal(ready.headers.get("connection"), "keep-alive", "a ready server keeps connections")
  const live = await fetch(`${agent.url}/healthz`)
  t.equal(live.status, 200)
  const refused = await fetch(`${agent.url}/tasks`)
  t.equal(refused.status, 401, "the A2A routes still need the token")
})

t.test("the store failing: 503 with a reason that names no host; the error goes to the log", async (t) => {
  const answer = { mode: "reject" as "ok" | "reject" | "hang" }
  const { store } = probedStore(answer)
  const lines: string[] = []
  const app = Fastify({ loggerInstance: pino({}, { write: (line: string) => void lines.push(line) }) })
  t.teardown(() => app.close())
  await app.register(toolnexusA2A, { client, store })
  await app.listen({ host: "127.0.0.1", port: 0 })
  const res = await app.inject({ url: "/readyz" })
  t.equal(res.statusCode, 503)
  t.match(res.json(), { status: "unavailable", reason: /task store failed to answer/ })
  t.notMatch(res.body, /10\.1\.2\.3|secret-host|ECONNREFUSED/, "the driver's message stays in the log")
  t.ok(lines.some((line) => /readiness/.test(line) && /ECONNREFUSED/.test(line)), "the log has why")
  t.equal((await app.inject({ url: "/healthz" })).statusCode, 200, "liveness does not depend on the store")
})

t.test("the store hanging: 503 once the probe's time limit passes, and no second probe while the first hangs", async (t) => {
  const answer = { mode: "hang" as "ok" | "reject" | "hang" }
  const { store, calls, release } = probedStore(answer)
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(toolnexusA2A, { client, store, health: { storeTimeoutMs: 100 } })
  await app.listen({ host: "127.0.0.1", port: 0 })
  const res = await app.inject({ url: "/readyz" })
  t.equal(res.statusCode, 503)
  t.match(res.json(), { reason: "the task store did not answer within 100 ms" })
  const again = await app.inject({ url: "/readyz" })
  t.equal(again.statusCode, 503, "still not ready while the probe hangs")
  t.equal(calls.filter((id) => id === PROBE_TASK_ID).length, 1, "one probe in flight at most")
  answer.mode = "ok"
  release()
  // The hung probe ends well: its answer is the one kept, and the server is ready again.
  await waitFor(async () => (await app.inject({ url: "/readyz" })).statusCode === 200, 5000, "ready once the store answers")
  t.equal(calls.filter((id) => id === PROBE_TASK_ID).length, 1, "no other probe was sent meanwhile")
})

t.test("Readiness: one store read per cache period however often it is asked; a stop that began wins", async (t) => {
  let now = 0
  const { store, calls } = probedStore({ mode: "ok" })
  const readiness = new Readiness({ store, probeCacheMs: 1000, now: () => now })
  t.same(await readiness.check(), { ready: false, reason: "starting" })
  readiness.listening()
  const answers = await Promise.all(Array.from({ length: 20 }, () => readiness.check()))
  t.ok(answers.every((a) => a.ready))
  t.equal(calls.length, 1, "twenty checks at once: one read")
  now = 999
  await readiness.check()
  t.equal(calls.length, 1, "within the period: the answer kept")
  now = 1000
  await readiness.check()
  t.equal(calls.length, 2, "after it: read again")
  readiness.drain()
  t.same(await readiness.check(), { ready: false, reason: "draining" })
  readiness.listening()
  t.equal(readiness.phase, "draining", "listening again does not undo a drain")
  readiness.stopping()
  t.same(await readiness.check(), { ready: false, reason: "stopping" })
})

t.test("draining: stop({ drainMs }) turns readiness 503 at once, every route serves with connection: close, a second stop() skips the wait", async (t) => {
  const agent = await serve("127.0.0.1:0", { client, logger: false })
  t.teardown(() => agent.stop())
  const stopped = agent.stop({ drainMs: 600_000 })
  t.equal(agent.app.toolnexusReadiness.phase, "draining")
  const ready = await fetch(`${agent.url}/readyz`)
  t.equal(ready.status, 503)
  t.same(await ready.json(), { status: "unavailable", reason: "draining" })
  const sent = await fetch(`${agent.url}/`, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify(rpc("SendMessage", { message: { ...userMessage("during the drain"), role: "ROLE_USER", parts: [{ text: "during the drain" }] } })),
  })
  t.equal(sent.status, 200, "the A2A routes keep serving")
  t.equal(sent.headers.get("connection"), "close", "and tell the peer to open its next connection elsewhere")
  const body = (await sent.json()) as { result: { task: { id: string; status: { state: string } } } }
  t.equal(body.result.task.status.state, "TASK_STATE_COMPLETED")
  t.equal((await fetch(`${agent.url}/healthz`)).status, 200, "alive while draining")
  t.equal(agent.stop(), stopped, "the same stop")
  await stopped
  await t.rejects(fetch(`${agent.url}/healthz`), "no longer listening")
})

t.test("stop({ drainMs }) refuses a bad delay without stopping", async (t) => {
  const agent = await serve("127.0.0.1:0", { client, logger: false })
  t.teardown(() => agent.stop())
  await t.rejects(agent.stop({ drainMs: -1 }), /drainMs should be a number of milliseconds/)
  t.equal(agent.app.toolnexusReadiness.phase, "ready")
  t.equal((await callRpc(agent.url, rpc("tasks/get", { id: "x" }))).error.code, -32001, "still serving")
})

t.test("opts.health moves the routes, turns either off, or both; bad values are refused", async (t) => {
  const moved = Fastify()
  t.teardown(() => moved.close())
  await moved.register(toolnexusA2A, { client, prefix: "/agents/desk", health: { livenessPath: "/live", readinessPath: false } })
  await moved.ready()
  t.equal((await moved.inject({ url: "/agents/desk/live" })).statusCode, 200, "under the prefix, at its own path")
  t.equal((await moved.inject({ url: "/agents/desk/readyz" })).statusCode, 404, "readiness off")
  t.equal((await moved.inject({ url: "/healthz" })).statusCode, 404, "not at the root")

  const off = Fastify()
  t.teardown(() => off.close())
  await off.register(toolnexusA2A, { client, health: false })
  await off.ready()
  t.equal((await off.inject({ url: "/healthz" })).statusCode, 404)
  t.equal((await off.inject({ url: "/readyz" })).statusCode, 404)
  t.equal(off.toolnexusReadiness.phase, "starting", "the phase is kept without the routes")

  for (const [health, message] of [
    ["yes", /opts\.health should be false/],
    [{ livenessPath: "live" }, /opts\.health\.livenessPath should be a path starting with "\/"/],
    [{ readinessPath: 1 }, /opts\.health\.readinessPath should be a path/],
    [{ livenessPath: "/readyz" }, /should differ/],
    [{ storeTimeoutMs: 0 }, /storeTimeoutMs should be a positive whole number/],
  ] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    void app.register(toolnexusA2A, { client, health: health as never })
    await t.rejects(async () => void (await app.ready()), message)
  }
})

t.test("beside @fastify/under-pressure: an overloaded process sheds the A2A routes and readiness, never liveness", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  // Its health check failing is the one deterministic way to put it under pressure: every route it covers then answers 503.
  await app.register(underPressure, { healthCheck: async () => false, healthCheckInterval: 600_000, retryAfter: 7 })
  await app.register(toolnexusA2A, { client })
  await app.listen({ host: "127.0.0.1", port: 0 })
  const live = await app.inject({ url: "/healthz" })
  t.equal(live.statusCode, 200, "liveness is never shed: restarting an overloaded process only moves its load")
  const ready = await app.inject({ url: "/readyz" })
  t.equal(ready.statusCode, 503, "readiness is: the balancer moves traffic away")
  t.equal(ready.headers["retry-after"], "7")
  const rpcShed = await app.inject({ method: "POST", url: "/", payload: rpc("GetTask", { id: "x" }), headers: { "a2a-version": "1.0" } })
  t.equal(rpcShed.statusCode, 503, "JSON-RPC: shed with 503, not an internal error")
  t.equal(rpcShed.headers["retry-after"], "7")
  t.match(rpcShed.json(), { error: { code: -32603, message: /overloaded; retry after the Retry-After delay/ } })
  const restShed = await app.inject({ url: "/tasks/x", headers: { "a2a-version": "1.0" } })
  t.equal(restShed.statusCode, 503, "HTTP+JSON: the same")
  t.match(restShed.json(), { error: { message: /overloaded/ } })
})

t.test("stop() ends a connection a client opened and never used, instead of waiting for the client to drop it", async (t) => {
  // Headers may take a minute: only the stop itself can end the idle socket in time.
  const agent = await serve("127.0.0.1:0", { client, logger: false, timeouts: { headersMs: 60_000, requestMs: 60_000 } })
  t.teardown(() => agent.stop())
  const used = await fetch(`${agent.url}/healthz`)
  t.equal(used.status, 200)
  const { port } = new URL(agent.url)
  const socket = net.connect(Number(port), "127.0.0.1")
  t.teardown(() => socket.destroy())
  await once(socket, "connect")
  await waitFor(() => new Promise<boolean>((resolve) => agent.app.server.getConnections((_err, count) => resolve(count >= 1))), 5000, "the server seeing the connection")
  const closed = once(socket, "close")
  const started = performance.now()
  await agent.stop()
  await closed
  t.ok(performance.now() - started < 30_000, `stop() took ${Math.round(performance.now() - started)} ms, not the minute of the headers timeout`)
})
