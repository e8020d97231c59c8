import { SpanKind } from "@opentelemetry/api"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-node"
import * as grpc from "@grpc/grpc-js"
import { randomBytes, randomUUID } from "node:crypto"
import t, { type Test } from "tap"
import { createClient } from "../../lib/client/client.js"
import { messageType } from "../../lib/grpc/proto.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import { serve } from "../../plugins/serve.js"
import { localServer, modelServer, rpc, waitFor, type Scripted } from "../fixtures/helpers.js"
import { recordSpans } from "../fixtures/tracing.js"

/*
 * Traces, as a user who registers the OpenTelemetry Node SDK sees them: a peer's traceparent goes on
 * through the request, the Task's run, the model call (whose endpoint gets ours) and the tool call,
 * on every binding. The SDK is registered once for this file (the global provider is process-wide).
 */

const exporter = recordSpans(t)

/** A peer's span: its own trace id and span id, as its traceparent says them. */
function peerSpan(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString("hex")
  const spanId = randomBytes(8).toString("hex")
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` }
}

const spansOf = (traceId: string): ReadableSpan[] => exporter.getFinishedSpans().filter((span) => span.spanContext().traceId === traceId)
const parentOf = (span: ReadableSpan): string | undefined => span.parentSpanContext?.spanId

/** The one span of the trace named `name`; fails listing what there is otherwise. */
function only(t: Test, spans: ReadableSpan[], name: string): ReadableSpan {
  const found = spans.filter((span) => span.name === name)
  t.equal(found.length, 1, `one ${name} span (spans: ${spans.map((span) => span.name).join(", ")})`)
  return found[0]
}

/** A streamed chat completion answering `text`, with the usage chunk OpenAI sends last. */
const streamedText = (text: string): Scripted => ({
  headers: { "content-type": "text/event-stream" },
  text: [
    `data: ${JSON.stringify({ choices: [{ delta: { content: text.slice(0, 3) } }] })}`,
    `data: ${JSON.stringify({ choices: [{ delta: { content: text.slice(3) } }] })}`,
    `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } })}`,
    "data: [DONE]",
    "",
  ].join("\n\n"),
})

const toolCallAnswer: Scripted = {
  json: {
    choices: [{ message: { content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "add", arguments: '{"a":2,"b":3}' } }] } }],
    usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
  },
}

async function tracedAgent(t: Test, script: Scripted[]) {
  const model = await modelServer(t, script)
  const toolkit = await createToolkit({
    builtins: false,
    extraTools: [{ name: "add", description: "adds", inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } }, execute: ({ a, b }) => String(Number(a) + Number(b)) }],
  })
  const agent = await serve("127.0.0.1:0", {
    client: createClient({ baseUrl: model.url, style: "openai", model: "gpt-test" }),
    toolkit,
    a2a: { name: "traced", store: "memory" },
    grpc: "127.0.0.1:0",
    logger: false,
  })
  t.teardown(() => agent.stop())
  return { agent, model }
}

t.test("JSON-RPC: the peer's span → the request → the Task's run → the model calls and the tool call; the model endpoint saw our traceparent", async (t) => {
  const { agent, model } = await tracedAgent(t, [toolCallAnswer, streamedText("the sum is 5")])
  const peer = peerSpan()
  const response = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0", traceparent: peer.traceparent, tracestate: "peer=1" },
    body: JSON.stringify(rpc("SendMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "add 2 and 3" }] } })),
  })
  const answer = (await response.json()) as { result: { task: { id: string; status: { state: string } } } }
  t.equal(answer.result.task.status.state, "TASK_STATE_COMPLETED")
  const taskId = answer.result.task.id
  // The run's span ends as the run settles, just before the blocking answer: wait for it, not for time.
  await waitFor(() => spansOf(peer.traceId).some((span) => span.name === "invoke_agent traced"), 5000, "the run's span")

  const spans = spansOf(peer.traceId)
  const request = only(t, spans, "lf.a2a.v1.A2AService/SendMessage")
  t.equal(parentOf(request), peer.spanId, "the request continues the peer's span")
  t.equal(request.spanContext().traceState?.get("peer"), "1", "and keeps its tracestate")
  t.match(request.attributes, { "rpc.system": "jsonrpc", "rpc.service": "lf.a2a.v1.A2AService", "rpc.method": "SendMessage", "a2a.binding": "jsonrpc", "a2a.version": "1.0", "a2a.task.id": taskId })
  t.equal(request.kind, 1, "a SERVER span")

  const run = only(t, spans, "invoke_agent traced")
  t.equal(parentOf(run), request.spanContext().spanId, "the Task's run is the request's child")
  t.match(run.attributes, { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "traced", "a2a.task.id": taskId, "a2a.task.state": "completed" })

  // In the order they ended (the exporter's), which is the order they ran: the second starts after the first's tool call.
  const calls = spans.filter((span) => span.name === "chat gpt-test")
  t.equal(calls.length, 2, "two model calls: the tool call's turn and the answer's")
  for (const call of calls) {
    t.equal(parentOf(call), run.spanContext().spanId, "a model call is the run's child")
    t.match(call.attributes, { "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test" })
    t.equal(call.kind, 2, "a CLIENT span")
  }
  t.match(calls[0].attributes, { "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 3 })
  t.match(calls[1].attributes, { "gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 7 })
  t.ok(calls[1].events.some((event) => event.name === "gen_ai.first_token"), "the streamed answer's first piece is an event")
  t.type(calls[1].attributes["toolnexus.model.time_to_first_token_ms"], "number")

  // Each model request carried the traceparent of its own call's span, in the peer's trace.
  t.equal(model.requests.length, 2)
  model.requests.forEach((seen, i) => {
    t.equal(seen.headers.traceparent, `00-${peer.traceId}-${calls[i].spanContext().spanId}-01`, `model request ${i + 1} carried our traceparent`)
  })

  t.match(model.requests[1].body.messages.at(-1), { role: "tool", content: "5", tool_call_id: "call_1" }, "the tool ran")
  const tool = only(t, spans, "execute_tool add")
  t.equal(parentOf(tool), run.spanContext().spanId, "the tool call is the run's child")
  t.match(tool.attributes, { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add", "gen_ai.tool.call.id": "call_1" })

  // The Task's first save is made inside the request; its later saves inside the run.
  const saves = spans.filter((span) => span.name === "save task_store")
  t.ok(saves.some((span) => parentOf(span) === request.spanContext().spanId), "the submitted save is the request's child")
  t.ok(saves.some((span) => parentOf(span) === run.spanContext().spanId), "the run's saves are the run's children")
  t.match(saves[0].attributes, { "toolnexus.store": "memory", "db.operation.name": "save" })
})

t.test("REST and gRPC: the request span says its binding and continues the peer's trace; a failed lookup says why", async (t) => {
  const { agent } = await tracedAgent(t, [])
  const restPeer = peerSpan()
  const missing = await fetch(`${agent.url}/tasks/no-such-task`, { headers: { "a2a-version": "1.0", traceparent: restPeer.traceparent } })
  t.equal(missing.status, 404)
  await waitFor(() => spansOf(restPeer.traceId).length > 0, 5000, "the REST request's span")
  const rest = only(t, spansOf(restPeer.traceId), "lf.a2a.v1.A2AService/GetTask")
  t.equal(parentOf(rest), restPeer.spanId)
  t.match(rest.attributes, { "rpc.system": "http_json", "a2a.binding": "rest", "a2a.task.id": "no-such-task", "error.type": "TASK_NOT_FOUND" })
  t.equal(rest.status.code, 0, "a peer's mistake leaves the span's status unset")

  const grpcPeer = peerSpan()
  const client = new grpc.Client(agent.grpc!, grpc.credentials.createInsecure())
  t.teardown(() => client.close())
  const metadata = new grpc.Metadata()
  metadata.set("traceparent", grpcPeer.traceparent)
  const request = Buffer.from(messageType("GetTaskRequest").encode({ id: "no-such-task" }).finish())
  const error = await new Promise<grpc.ServiceError | null>((resolve) =>
    client.makeUnaryRequest("/lf.a2a.v1.A2AService/GetTask", (bytes: Buffer) => bytes, (bytes: Buffer) => bytes, request, metadata, (err) => resolve(err)),
  )
  t.equal(error?.code, grpc.status.NOT_FOUND)
  await waitFor(() => spansOf(grpcPeer.traceId).length > 0, 5000, "the gRPC request's span")
  const call = only(t, spansOf(grpcPeer.traceId), "lf.a2a.v1.A2AService/GetTask")
  t.equal(parentOf(call), grpcPeer.spanId)
  t.match(call.attributes, { "rpc.system": "grpc", "a2a.binding": "grpc", "a2a.version": "1.0", "error.type": "TASK_NOT_FOUND" })
})

t.test("a request without a traceparent starts a trace of its own; a stream's span lasts until the stream ends", async (t) => {
  const { agent } = await tracedAgent(t, [streamedText("hello there")])
  const response = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify(rpc("SendStreamingMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "hi" }] } })),
  })
  const text = await response.text()
  t.match(text, /TASK_STATE_COMPLETED/)
  const streamed = () => exporter.getFinishedSpans().find((span) => span.name === "lf.a2a.v1.A2AService/SendStreamingMessage")
  await waitFor(() => streamed() !== undefined, 5000, "the stream's span")
  const span = streamed()!
  t.equal(parentOf(span), undefined, "a root span")
  const run = exporter.getFinishedSpans().find((s) => s.name === "invoke_agent traced" && s.spanContext().traceId === span.spanContext().traceId)
  t.ok(run, "the run is in the stream's trace")
  // The stream's last frame is the completed state, sent once its save is done: the request's span outlasts that save.
  // Which ended first is read from the order the exporter got them (SimpleSpanProcessor exports each as it ends): the
  // SDK anchors each span's clock to Date.now() when it starts, so two spans' end times can be a millisecond out.
  const finished = exporter.getFinishedSpans()
  const saves = finished.flatMap((s, at) => (s.name === "save task_store" && s.spanContext().traceId === span.spanContext().traceId ? [at] : []))
  t.ok(saves.length >= 3, "submitted, working, completed (and any save of the answer so far)")
  t.ok(finished.indexOf(span) > Math.max(...saves), "the request's span ended after the Task's last save")
})

t.test("a push delivery is a CLIENT span whose traceparent the webhook receives", async (t) => {
  const seen: Array<string | undefined> = []
  const webhook = await localServer(t, (req, res) => {
    seen.push(req.headers.traceparent as string | undefined)
    req.resume()
    req.on("end", () => res.writeHead(200).end())
  })
  const model = await modelServer(t, [streamedText("pushed")])
  const agent = await serve("127.0.0.1:0", {
    client: createClient({ baseUrl: model.url, style: "openai", model: "gpt-test" }),
    a2a: { name: "traced", store: "memory", push: { allow: ["127.0.0.1"] } },
    logger: false,
  })
  t.teardown(() => agent.stop())
  const response = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify(
      rpc("SendMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "hi" }] }, configuration: { taskPushNotificationConfig: { url: `${webhook}/hook` } } }),
    ),
  })
  t.equal(response.status, 200)
  const deliveries = () => exporter.getFinishedSpans().filter((span) => span.name === "POST" && span.attributes["server.port"] === Number(new URL(webhook).port))
  await waitFor(() => seen.length > 0 && deliveries().length >= seen.length, 5000, "a delivery and its span")
  const first = deliveries()[0]
  t.equal(first.kind, 2, "a CLIENT span")
  t.match(first.attributes, { "http.request.method": "POST", "server.address": "127.0.0.1", "http.response.status_code": 200, "toolnexus.push.outcome": "delivered" })
  t.ok(
    seen.includes(`00-${first.spanContext().traceId}-${first.spanContext().spanId}-01`),
    "the webhook got the delivery span's traceparent",
  )
})

t.test("a push delivery continues the trace of the save that enqueued it: the webhook gets the peer's trace id, each delivery span is its save's child", async (t) => {
  const received: Array<{ traceparent: string | undefined; body: string }> = []
  const webhook = await localServer(t, (req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (chunk: string) => (body += chunk))
    req.on("end", () => {
      received.push({ traceparent: req.headers.traceparent as string | undefined, body })
      res.writeHead(200).end()
    })
  })
  const model = await modelServer(t, [streamedText("pushed")])
  const agent = await serve("127.0.0.1:0", {
    client: createClient({ baseUrl: model.url, style: "openai", model: "gpt-test" }),
    a2a: { name: "traced", store: "memory", push: { allow: ["127.0.0.1"] } },
    logger: false,
  })
  t.teardown(() => agent.stop())
  const peer = peerSpan()
  const response = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0", traceparent: peer.traceparent },
    body: JSON.stringify(
      rpc("SendMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "hi" }] }, configuration: { taskPushNotificationConfig: { url: `${webhook}/hook` } } }),
    ),
  })
  const answer = (await response.json()) as { result: { task: { status: { state: string } } } }
  t.equal(answer.result.task.status.state, "TASK_STATE_COMPLETED")
  const port = Number(new URL(webhook).port)
  const deliveries = () => spansOf(peer.traceId).filter((span) => span.name === "POST" && span.attributes["server.port"] === port)
  // A channel's notifications go one at a time, in order: the completed status is the last, and every delivery's span ends before the next starts.
  await waitFor(
    () => received.some((got) => got.body.includes("TASK_STATE_COMPLETED")) && deliveries().length === received.length && spansOf(peer.traceId).some((span) => span.name === "invoke_agent traced"),
    5000,
    "every notification delivered, with its span in the peer's trace",
  )

  const spans = spansOf(peer.traceId)
  const request = only(t, spans, "lf.a2a.v1.A2AService/SendMessage")
  const run = only(t, spans, "invoke_agent traced")
  const saves = new Map(spans.filter((span) => span.name === "save task_store").map((span) => [span.spanContext().spanId, span]))
  t.ok(received.length >= 3, `submitted, working and completed were pushed (${received.length} notifications)`)
  for (const delivery of deliveries()) {
    t.ok(received.some((got) => got.traceparent === `00-${peer.traceId}-${delivery.spanContext().spanId}-01`), "the webhook got the delivery span's traceparent, in the peer's trace")
    const save = saves.get(parentOf(delivery)!)
    t.ok(save, "the delivery span's parent is the save that enqueued it")
    t.ok(save !== undefined && [request.spanContext().spanId, run.spanContext().spanId].includes(parentOf(save)!), "a save of the request or of the Task's run")
  }
  const completed = received.findIndex((got) => got.body.includes("TASK_STATE_COMPLETED"))
  const last = deliveries().find((delivery) => received[completed].traceparent?.includes(delivery.spanContext().spanId))
  t.equal(parentOf(saves.get(parentOf(last!)!)!), run.spanContext().spanId, "the completion's delivery: request -> run -> save -> delivery")
})

t.test("a traceparent that is not one (malformed, all zeros, too long, repeated) is ignored: the request is served and starts a trace of its own", async (t) => {
  const { agent } = await tracedAgent(t, [])
  const peer = peerSpan()
  const hostile = [
    "00-not-a-trace-01",
    `00-${"0".repeat(32)}-${"0".repeat(16)}-01`,
    `00-${peer.traceId}-${peer.spanId}-01-${"x".repeat(8000)}`,
    `ff-${peer.traceId}-${peer.spanId}-01`,
    `00-${peer.traceId}-${peer.spanId}-01, 00-${peer.traceId}-${peer.spanId}-01`,
  ]
  for (const traceparent of hostile) {
    const taskId = `hostile-${hostile.indexOf(traceparent)}`
    const response = await fetch(agent.url, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0", traceparent, tracestate: "=,=,==" },
      body: JSON.stringify(rpc("GetTask", { id: taskId })),
    })
    t.equal(response.status, 200, `served with traceparent ${traceparent.slice(0, 40)}`)
    t.match(await response.json(), { error: { code: -32001 } })
    await waitFor(() => exporter.getFinishedSpans().some((span) => span.attributes["a2a.task.id"] === taskId), 5000, "its span")
    const span = exporter.getFinishedSpans().find((s) => s.attributes["a2a.task.id"] === taskId)!
    t.equal(parentOf(span), undefined, "a root span")
    t.not(span.spanContext().traceId, "0".repeat(32), "with a trace id of its own")
  }
})

t.test("a call to another A2A agent carries our traceparent: its request span is the tool call's child, in the peer's trace", async (t) => {
  const { createLocalClient } = await import("../../lib/client/client.js")
  const other = await serve("127.0.0.1:0", { client: createLocalClient(() => "sunny"), a2a: { name: "weather", store: "memory" }, logger: false })
  t.teardown(() => other.stop())
  const model = await modelServer(t, [
    { json: { choices: [{ message: { content: null, tool_calls: [{ id: "call_w", type: "function", function: { name: "weather", arguments: '{"message":"today?"}' } }] } }] } },
    { json: { choices: [{ message: { content: "it is sunny" } }] } },
  ])
  const toolkit = await createToolkit({ builtins: false, a2aAgents: [{ url: other.url }] })
  const agent = await serve("127.0.0.1:0", {
    client: createClient({ baseUrl: model.url, style: "openai", model: "gpt-test" }),
    toolkit,
    a2a: { name: "asker", store: "memory" },
    logger: false,
  })
  t.teardown(() => agent.stop())

  const peer = peerSpan()
  const response = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0", traceparent: peer.traceparent },
    body: JSON.stringify(rpc("SendMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "weather?" }] } })),
  })
  t.equal(((await response.json()) as { result: { task: { status: { state: string } } } }).result.task.status.state, "TASK_STATE_COMPLETED")
  t.match(model.requests[1].body.messages.at(-1), { role: "tool", content: /sunny/ }, "the other agent's answer reached the model")
  await waitFor(() => spansOf(peer.traceId).some((span) => span.name === "invoke_agent asker"), 5000, "the asker's run span")

  const spans = spansOf(peer.traceId)
  const tool = only(t, spans, "execute_tool weather")
  const remote = spans.filter((span) => parentOf(span) === tool.spanContext().spanId && span.kind === SpanKind.SERVER)
  t.ok(
    remote.some((span) => span.name === "lf.a2a.v1.A2AService/SendMessage"),
    `the other agent's SendMessage span is the tool call's child (children: ${remote.map((span) => span.name).join(", ")})`,
  )
  t.ok(
    spans.some((span) => span.name === "invoke_agent weather"),
    "the other agent's run is in the same trace",
  )
})
