import * as grpc from "@grpc/grpc-js"
import { randomUUID } from "node:crypto"
import { connect } from "nats"
import t, { type Test } from "tap"
import { createLocalClient, type ModelFunction } from "../../lib/client/client.js"
import { messageType } from "../../lib/grpc/proto.js"
import { A2AMetrics } from "../../lib/observe/metrics.js"
import { observedStore } from "../../lib/observe/observed-store.js"
import { Telemetry } from "../../lib/observe/telemetry.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { NatsTaskStore } from "../../lib/stores/nats/store.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import { serve, type ServeOptions } from "../../plugins/serve.js"
import { localServer, NATS_URL, rpc, sampleTask, tmpDir, waitFor } from "../fixtures/helpers.js"

/*
 * Metrics as a Prometheus scraper sees them: exact counts after a known set of requests, behind the A2A
 * routes' authentication, on an address of their own, and apart for two servers in one process.
 */

/** A scrape as a table: `name{label="value",...}` (labels sorted) → value. */
function parseMetrics(text: string): Map<string, number> {
  const samples = new Map<string, number>()
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const match = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!match) throw new Error(`not a sample line: ${line}`)
    const labels = [...(match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, key, value]) => `${key}="${value}"`).sort()
    samples.set(labels.length === 0 ? match[1] : `${match[1]}{${labels.join(",")}}`, Number(match[3]))
  }
  return samples
}

/** A sample's key, its labels sorted as parseMetrics sorts them. */
const sample = (name: string, labels: Record<string, string> = {}) => {
  const sorted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`).sort()
  return sorted.length === 0 ? name : `${name}{${sorted.join(",")}}`
}

async function scrape(url: string, headers: Record<string, string> = {}): Promise<Map<string, number>> {
  const response = await fetch(url, { headers })
  if (response.status !== 200) throw new Error(`scrape of ${url} answered ${response.status}: ${await response.text()}`)
  return parseMetrics(await response.text())
}

/** The model: asks for `add` once, then answers, with the token counts the endpoint would report. */
const addingModel: ModelFunction = ({ messages }) =>
  messages.at(-1)?.role === "tool"
    ? { text: `sum: ${messages.at(-1)!.content}`, usage: { inputTokens: 20, outputTokens: 4 } }
    : { toolCalls: [{ name: "add", args: { a: 2, b: 3 } }], usage: { inputTokens: 10, outputTokens: 2 } }

async function meteredAgent(t: Test, a2a: ServeOptions["a2a"] = {}) {
  const toolkit = await createToolkit({
    builtins: false,
    extraTools: [{ name: "add", description: "adds", inputSchema: { type: "object" }, execute: ({ a, b }) => String(Number(a) + Number(b)) }],
  })
  const agent = await serve("127.0.0.1:0", { client: createLocalClient(addingModel, { model: "adder" }), toolkit, a2a: { store: "memory", metrics: true, ...a2a }, logger: false })
  t.teardown(() => agent.stop())
  return agent
}

const send10 = (text: string) => rpc("SendMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] } })

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<any> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", "a2a-version": "1.0", ...headers }, body: JSON.stringify(body) })
  return response.json()
}

t.test("after a known set of requests, /metrics counts each by method, binding and outcome, with the Tasks, model, tool and store behind them", async (t) => {
  const agent = await meteredAgent(t)
  const first = await post(agent.url, send10("add"))
  await post(agent.url, send10("add again"))
  const taskId: string = first.result.task.id
  await post(agent.url, rpc("GetTask", { id: taskId }))
  await post(agent.url, rpc("GetTask", { id: "no-such-task" }))
  const rest = await fetch(`${agent.url}/tasks/${taskId}`, { headers: { "a2a-version": "1.0" } })
  t.equal(rest.status, 200)

  const metrics = await scrape(`${agent.url}/metrics`)
  const requests = "toolnexus_a2a_requests_total"
  t.equal(metrics.get(sample(requests, { method: "SendMessage", binding: "jsonrpc", outcome: "ok" })), 2)
  t.equal(metrics.get(sample(requests, { method: "GetTask", binding: "jsonrpc", outcome: "ok" })), 1)
  t.equal(metrics.get(sample(requests, { method: "GetTask", binding: "jsonrpc", outcome: "TASK_NOT_FOUND" })), 1)
  t.equal(metrics.get(sample(requests, { method: "GetTask", binding: "rest", outcome: "ok" })), 1)
  t.equal([...metrics.keys()].filter((key) => key.startsWith(`${requests}{`)).length, 4, "no other request series")
  t.equal(metrics.get(sample("toolnexus_a2a_request_duration_seconds_count", { method: "SendMessage", binding: "jsonrpc" })), 2)
  t.equal(metrics.get(sample("toolnexus_a2a_request_duration_seconds_count", { method: "GetTask", binding: "jsonrpc" })), 2)

  for (const state of ["submitted", "working", "completed"]) t.equal(metrics.get(sample("toolnexus_task_transitions_total", { state })), 2, `two Tasks ${state}`)
  t.equal(metrics.get("toolnexus_tasks_running"), 0)
  t.equal(metrics.get("toolnexus_tasks_queued"), 0)
  t.equal(metrics.get("toolnexus_a2a_open_streams"), 0)

  t.equal(metrics.get(sample("toolnexus_model_call_duration_seconds_count", { model: "adder", outcome: "ok" })), 4, "two turns per Task")
  t.equal(metrics.get(sample("toolnexus_model_tokens_total", { model: "adder", type: "input" })), 60)
  t.equal(metrics.get(sample("toolnexus_model_tokens_total", { model: "adder", type: "output" })), 12)
  t.equal(metrics.get(sample("toolnexus_tool_calls_total", { tool: "add", outcome: "ok" })), 2)
  t.equal(metrics.get(sample("toolnexus_tool_call_duration_seconds_count", { tool: "add" })), 2)

  // Each Task: submitted, working and completed saved once; the GetTasks read it.
  t.equal(metrics.get(sample("toolnexus_store_operation_duration_seconds_count", { store: "memory", operation: "save", outcome: "ok" })), 6)
  t.ok((metrics.get(sample("toolnexus_store_operation_duration_seconds_count", { store: "memory", operation: "get", outcome: "ok" })) ?? 0) >= 3, "the reads are timed")
  t.notOk([...metrics.keys()].some((key) => key.includes(taskId)), "no Task id in any label")
})

t.test("a streamed answer in flight shows as an open stream and a running Task", async (t) => {
  let release!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  const client = createLocalClient(({ messages }) => {
    if (messages.at(-1)?.role === "tool") return "done"
    return (async function* () {
      yield "thinking"
      await held
    })()
  })
  const agent = await serve("127.0.0.1:0", { client, a2a: { store: "memory", metrics: true }, logger: false })
  t.teardown(() => agent.stop())
  const response = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify(rpc("SendStreamingMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "go" }] } })),
  })
  const reader = response.body!.getReader()
  await reader.read()
  await waitFor(async () => (await scrape(`${agent.url}/metrics`)).get("toolnexus_tasks_running") === 1, 5000, "the Task to run")
  const during = await scrape(`${agent.url}/metrics`)
  t.equal(during.get("toolnexus_a2a_open_streams"), 1)
  t.equal(during.get(sample("toolnexus_a2a_requests_total", { method: "SendStreamingMessage", binding: "jsonrpc", outcome: "ok" })), 1, "a stream is counted once it answers")
  t.equal(during.get(sample("toolnexus_model_time_to_first_token_seconds_count", { model: "local" })), 1, "its first token came")
  release()
  while (!(await reader.read()).done);
  await waitFor(async () => (await scrape(`${agent.url}/metrics`)).get("toolnexus_a2a_open_streams") === 0, 5000, "the stream to close")
  t.equal((await scrape(`${agent.url}/metrics`)).get("toolnexus_tasks_running"), 0)
})

t.test("a tool the toolkit lacks is counted as unknown: a model cannot make label values up", async (t) => {
  const toolkit = await createToolkit({ builtins: false })
  const client = createLocalClient(({ messages }) => (messages.at(-1)?.role === "tool" ? "gave up" : { toolCalls: [{ name: `invented-${randomUUID()}`, args: {} }] }))
  const agent = await serve("127.0.0.1:0", { client, toolkit, a2a: { store: "memory", metrics: true }, logger: false })
  t.teardown(() => agent.stop())
  await post(agent.url, send10("call something"))
  const metrics = await scrape(`${agent.url}/metrics`)
  t.equal(metrics.get(sample("toolnexus_tool_calls_total", { tool: "unknown", outcome: "error" })), 1)
  t.notOk([...metrics.keys()].some((key) => key.includes("invented-")), "the invented name is in no label")
})

t.test("behind auth, /metrics needs the token the A2A routes need", async (t) => {
  const agent = await meteredAgent(t, { auth: { tokens: { "ops-secret-0123456789": "ops" } } })
  const refused = await fetch(`${agent.url}/metrics`)
  t.equal(refused.status, 401)
  t.notMatch(await refused.text(), /toolnexus_/, "no metric leaks in the refusal")
  const metrics = await scrape(`${agent.url}/metrics`, { authorization: "Bearer ops-secret-0123456789" })
  t.ok(metrics.has("toolnexus_tasks_running"))
})

t.test("metrics: { listen } serves them on an address of their own, and not on the agent's", async (t) => {
  const agent = await meteredAgent(t, { metrics: { listen: "127.0.0.1:0" } })
  const address = agent.app.toolnexusMetrics.address
  t.match(address, /^127\.0\.0\.1:\d+$/)
  await post(agent.url, send10("add"))
  const metrics = await scrape(`http://${address}/metrics`)
  t.equal(metrics.get(sample("toolnexus_a2a_requests_total", { method: "SendMessage", binding: "jsonrpc", outcome: "ok" })), 1)
  t.equal((await fetch(`${agent.url}/metrics`)).status, 404, "the agent's address has no metrics route")
  const elsewhere = await fetch(`http://${address}/other`)
  t.equal(elsewhere.status, 404)
  t.match(await elsewhere.text(), /metrics are at GET \/metrics/)
  t.equal(agent.app.toolnexusMetrics.registry.constructor.name, "Registry")
  await agent.stop()
  await t.rejects(fetch(`http://${address}/metrics`), "closed with the agent")
})

t.test("two servers in one process count apart, each in its own registry", async (t) => {
  const one = await meteredAgent(t)
  const two = await meteredAgent(t)
  await post(one.url, send10("add"))
  const ofOne = await scrape(`${one.url}/metrics`)
  const ofTwo = await scrape(`${two.url}/metrics`)
  const sends = sample("toolnexus_a2a_requests_total", { method: "SendMessage", binding: "jsonrpc", outcome: "ok" })
  t.equal(ofOne.get(sends), 1)
  t.equal(ofTwo.get(sends), undefined, "the other server saw no send")
})

/** One unary gRPC call of `method` with these bytes and metadata, as a raw peer sends it: its status code (0: OK). */
async function grpcStatus(address: string, method: string, bytes: Uint8Array, metadata: Record<string, string> = {}): Promise<number> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure())
  const md = new grpc.Metadata()
  for (const [key, value] of Object.entries(metadata)) md.set(key, value)
  try {
    return await new Promise((resolve) => {
      const asIs = (buffer: Buffer) => buffer
      client.makeUnaryRequest(`/lf.a2a.v1.A2AService/${method}`, asIs, asIs, Buffer.from(bytes), md, (error) => resolve(error?.code ?? grpc.status.OK))
    })
  } finally {
    client.close()
  }
}

t.test("requests refused before any operation are counted under method none, by binding and the refusal's reason; other routes' refusals are not", async (t) => {
  const token = "ops-secret-0123456789"
  const agent = await meteredAgent(t, { auth: { tokens: { [token]: "ops" } }, bodyLimit: 1024 })
  const grpcAddress = await agent.app.toolnexusGrpc.listen("127.0.0.1:0")
  const bearer = { authorization: `Bearer ${token}` }
  const send = async (path: string, init: { method?: string; body?: string; headers?: Record<string, string> }, status: number) => {
    const response = await fetch(`${agent.url}${path}`, { method: init.method ?? "POST", headers: { "content-type": "application/json", ...init.headers }, body: init.body })
    await response.arrayBuffer()
    t.equal(response.status, status, `${init.method ?? "POST"} ${path} ${JSON.stringify(init.headers ?? {})} answers ${status}`)
  }
  const v1 = { ...bearer, "a2a-version": "1.0" }
  const big = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x".repeat(2000) } })
  const getTask = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "nope" } })

  // JSON-RPC: at the HTTP level (the error handler) and in the dispatcher.
  await send("/", { body: getTask }, 401)
  await send("/", { body: big, headers: v1 }, 413)
  await send("/", { body: getTask, headers: { ...v1, "content-type": "text/plain" } }, 415)
  await send("/", { body: "{", headers: v1 }, 200)
  await send("/", { body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "NoSuchMethod" }), headers: v1 }, 200)
  await send("/", { body: JSON.stringify({ jsonrpc: "1.0", id: 1, method: "GetTask" }), headers: v1 }, 200)
  await send("/", { body: getTask, headers: { ...bearer, "a2a-version": "9.9" } }, 200)
  await send("/", { body: getTask, headers: v1 }, 200) // reaches GetTask: counted under it
  // REST: its error handler (auth, limits, parse, schema) and its binding (a 0.3 request on a 1.0 path).
  await send("/tasks/nope", { method: "GET" }, 401)
  await send("/message:send", { body: big, headers: v1 }, 413)
  await send("/message:send", { body: "{}", headers: { ...v1, "content-type": "text/plain" } }, 415)
  await send("/message:send", { body: "{", headers: v1 }, 400)
  await send("/message:send", { body: "{}", headers: v1 }, 400)
  await send("/tasks/nope", { method: "GET", headers: bearer }, 400)
  // gRPC: its checks before the operation.
  const getRequest = messageType("GetTaskRequest").encode({ id: "nope" }).finish()
  t.equal(await grpcStatus(grpcAddress, "GetTask", getRequest), grpc.status.UNAUTHENTICATED)
  t.equal(await grpcStatus(grpcAddress, "GetTask", getRequest, { ...bearer, "a2a-version": "0.3" }), grpc.status.FAILED_PRECONDITION)
  t.equal(await grpcStatus(grpcAddress, "GetTask", Buffer.from([0xff, 0xff, 0xff]), bearer), grpc.status.INVALID_ARGUMENT)
  // Not A2A requests: the metrics route's own refusal.
  await send("/metrics", { method: "GET" }, 401)

  const metrics = await scrape(`${agent.url}/metrics`, bearer)
  const refusals = Object.fromEntries([...metrics].filter(([key]) => key.startsWith("toolnexus_a2a_requests_total{") && key.includes('method="none"')))
  const refused = (binding: string, outcome: string) => sample("toolnexus_a2a_requests_total", { method: "none", binding, outcome })
  t.same(refusals, {
    [refused("jsonrpc", "UNAUTHENTICATED")]: 1,
    [refused("jsonrpc", "PAYLOAD_TOO_LARGE")]: 1,
    [refused("jsonrpc", "UNSUPPORTED_MEDIA_TYPE")]: 1,
    [refused("jsonrpc", "PARSE_ERROR")]: 1,
    [refused("jsonrpc", "METHOD_NOT_FOUND")]: 1,
    [refused("jsonrpc", "INVALID_REQUEST")]: 1,
    [refused("jsonrpc", "VERSION_NOT_SUPPORTED")]: 1,
    [refused("rest", "UNAUTHENTICATED")]: 1,
    [refused("rest", "PAYLOAD_TOO_LARGE")]: 1,
    [refused("rest", "UNSUPPORTED_MEDIA_TYPE")]: 1,
    [refused("rest", "PARSE_ERROR")]: 1,
    [refused("rest", "INVALID_PARAMS")]: 1,
    [refused("rest", "VERSION_NOT_SUPPORTED")]: 1,
    [refused("grpc", "UNAUTHENTICATED")]: 1,
    [refused("grpc", "VERSION_NOT_SUPPORTED")]: 1,
    [refused("grpc", "PARSE_ERROR")]: 1,
  })
  t.equal(metrics.get(sample("toolnexus_a2a_requests_total", { method: "GetTask", binding: "jsonrpc", outcome: "TASK_NOT_FOUND" })), 1, "a request that reached its operation is counted under it")
  t.notOk(
    [...metrics.keys()].some((key) => key.startsWith("toolnexus_a2a_request_duration_seconds") && key.includes('method="none"')),
    "refusals are not timed: the duration is from reaching an operation",
  )
})

/** The push stores the age gauge is checked on: memory, files in a directory of their own, and NATS on buckets of its own (deleted when the test ends, after the agent stops). */
const pushStores: Array<[string, (t: Test) => ServeOptions["a2a"]]> = [
  ["the memory store", () => ({ store: "memory" })],
  ["FileTaskStore", (t) => ({ store: `file:${tmpDir(t)}` })],
  [
    "NatsTaskStore",
    (t) => {
      const suffix = randomUUID().replaceAll("-", "")
      const store = new NatsTaskStore(NATS_URL, { bucket: `tn_metrics_${suffix}`, leaseBucket: `tn_metrics_leases_${suffix}` })
      t.teardown(async () => {
        await store.close()
        const nc = await connect({ servers: NATS_URL })
        const jsm = await nc.jetstreamManager()
        for (const stream of [`KV_${store.bucket}`, `KV_${store.leaseBucket}`, `KV_${store.bucket}_push`, store.eventStream]) await jsm.streams.delete(stream).catch(() => false)
        await nc.drain()
      })
      return { store }
    },
  ],
]

for (const [name, storeOf] of pushStores) {
  t.test(`push notifications on ${name}: sent, retried and the oldest pending one's age`, async (t) => {
    let answers = 0
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    let firstArrived: () => void = () => {}
    const arrived = new Promise<void>((resolve) => {
      firstArrived = resolve
    })
    const webhook = await localServer(t, (req, res) => {
      req.resume()
      // The first notification is held until the test has seen its age, then refused once (503); every one after is taken.
      req.on("end", () => {
        if (answers++ > 0) return res.writeHead(200).end()
        firstArrived()
        void held.then(() => res.writeHead(503, { "retry-after": "0" }).end())
      })
    })
    const agent = await meteredAgent(t, { ...storeOf(t), push: { allow: ["127.0.0.1"], retryBaseMs: 1 } })
    t.teardown(release)
    const url = `${agent.url}/metrics`
    const before = await scrape(url)
    t.equal(before.get("toolnexus_push_oldest_pending_age_seconds"), 0, "the store tells the age; nothing pending yet")
    await post(agent.url, {
      ...send10("add"),
      params: { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "add" }] }, configuration: { taskPushNotificationConfig: { url: `${webhook}/hook` } } },
    })
    await arrived
    // Pending while the webhook holds it: its age grows from 0 as the clock moves on.
    await waitFor(async () => (await scrape(url)).get("toolnexus_push_oldest_pending_age_seconds")! > 0, 10_000, "an age above 0 for the held notification")
    const during = await scrape(url)
    t.ok(during.get("toolnexus_push_oldest_pending_age_seconds")! < 60, "the age of a notification of this test")
    release()
    // submitted, working, the answer's artifact, completed: four notifications, the first one twice.
    await waitFor(async () => (await scrape(url)).get(sample("toolnexus_push_notifications_total", { outcome: "sent" })) === 4, 10_000, "four notifications sent")
    const after = await scrape(url)
    t.equal(after.get(sample("toolnexus_push_notifications_total", { outcome: "retried" })), 1)
    t.equal(after.get(sample("toolnexus_push_notifications_total", { outcome: "dead_lettered" })), undefined)
    t.equal(answers, 5, "the webhook got five POSTs")
    t.equal(after.get("toolnexus_push_oldest_pending_age_seconds"), 0, "nothing pending once all went")
  })
}

t.test("with metrics on and no tracing SDK, a push save reads and keeps no trace context", async (t) => {
  const metrics = new A2AMetrics()
  const observed = observedStore(new InMemoryTaskStore(), new Telemetry(metrics))
  const task = sampleTask("t-1", "working")
  await observed.save(task)
  await observed.push!.putConfig({ taskId: "t-1", id: "a", version: "1.0", url: "http://127.0.0.1:9/hook", createdAt: new Date().toISOString() })
  t.equal(await observed.push!.saveWithEvent(task, { kind: "status", task }), 1)
  t.match(await metrics.text(), /toolnexus_store_operation_duration_seconds_count\{store="memory",operation="save",outcome="ok"\} 2/, "the saves were observed")
  const [claim] = await observed.push!.claim("i-1", 10, 60_000, Date.now())
  t.notOk("traceContext" in claim.item, "the notification has none")
})

t.test("a bad metrics option is refused at registration, naming it", async (t) => {
  const client = createLocalClient(() => "x")
  await t.rejects(serve("127.0.0.1:0", { client, a2a: { metrics: { listen: "nowhere" } }, logger: false }), { message: /opts\.metrics should be true .* \{ listen: "HOST:PORT" \}/ })
  await t.rejects(serve("127.0.0.1:0", { client, a2a: { metrics: "yes" as never }, logger: false }), { message: /opts\.metrics should be/ })
})
