import { CancelTaskRequest, GetTaskRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk"
import { ClientFactory } from "@a2a-js/sdk/client"
import { createOpenAI } from "@ai-sdk/openai"
import { MockLanguageModelV4 } from "ai/test"
import t, { type Test } from "tap"
import { createClient, type Client } from "../../lib/client/client.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import { serve } from "../../plugins/serve.js"
import { finish, openAIEndpoint, partStream, sse, textAnswer } from "../fixtures/ai-sdk.js"
import { addTool, waitFor } from "../fixtures/helpers.js"
import { recordSpans } from "../fixtures/tracing.js"

/*
 * An A2A agent whose loop runs on an AI SDK language model, driven by the
 * official @a2a-js/sdk 1.x client: the answer streams as artifact chunks, the
 * usage reaches the metrics and the model call's span, a model error fails the
 * Task without the key, and a cancel aborts the model's signal and request.
 * The OpenTelemetry SDK is registered once for this file.
 */

const KEY = "sk-served-0123456789abcdef"

const exporter = recordSpans(t)

const say = (text: string, extra: Record<string, unknown> = {}) => SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] }, ...extra })
const textOf = (part: { content?: { $case: string; value: unknown } } | undefined) => (part?.content?.$case === "text" ? part.content.value : undefined)

async function served(t: Test, client: Client) {
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool()] })
  const agent = await serve("127.0.0.1:0", { client, toolkit, a2a: { name: "ai-sdk-agent", metrics: true }, logger: false })
  t.teardown(() => agent.stop())
  return { agent, sdk: await new ClientFactory().createFromUrl(agent.url) }
}

/** A metric's value in a scrape of `url`, by its exact sample line prefix. */
async function metric(url: string, line: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const found = text.split("\n").find((l) => l.startsWith(`${line} `))
  return found === undefined ? undefined : Number(found.slice(line.length + 1))
}

t.test("a streamed Task: a tool call, then text as artifact chunks; usage in the metrics and the span", async (t) => {
  const endpoint = await openAIEndpoint(t, async (reply, _request, n) => {
    if (n === 1) await reply.stream([sse.role(), sse.toolCall(0, "call_1", "add", '{"a":20,"b":22}'), sse.finish("tool_calls"), sse.usage(12, 5), sse.done()])
    else await reply.stream(textAnswer(["The sum ", "is ", "42."], [30, 4]))
    reply.end()
  })
  const { agent, sdk } = await served(t, createClient({ languageModel: createOpenAI({ baseURL: endpoint.url, apiKey: KEY }).chat("m") }))

  const cases: string[] = []
  const chunks: unknown[] = []
  let taskId = ""
  for await (const event of sdk.sendMessageStream(say("What is 20 + 22?"))) {
    const payload = (event as any).payload
    if (payload.$case === "task") taskId = payload.value.id
    cases.push(payload.$case === "statusUpdate" ? `status:${TaskState[payload.value.status.state]}` : payload.$case)
    if (payload.$case === "artifactUpdate") chunks.push(textOf(payload.value.artifact.parts[0]))
  }
  t.same(cases.at(-1), "status:TASK_STATE_COMPLETED")
  t.same(chunks.filter((c) => c !== ""), ["The sum ", "is ", "42."], "the model's text arrived chunk by chunk")
  const task = (await sdk.getTask(GetTaskRequest.fromJSON({ id: taskId }))) as any
  t.equal(textOf(task.artifacts[0].parts[0]), "The sum is 42.")

  t.equal(await metric(agent.url, 'toolnexus_model_tokens_total{model="m",type="input"}'), 42, "input tokens of both turns")
  t.equal(await metric(agent.url, 'toolnexus_model_tokens_total{model="m",type="output"}'), 9)

  const calls = exporter.getFinishedSpans().filter((span) => span.name === "chat m")
  t.equal(calls.length, 2, "a span per model call")
  t.match(calls[0].attributes, { "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5 })
  const traceparent = String(endpoint.requests[0].headers.traceparent)
  t.equal(traceparent.split("-")[1], calls[0].spanContext().traceId, "the provider's request carried the model call's trace context")
  t.equal(traceparent.split("-")[2], calls[0].spanContext().spanId)
})

t.test("a model error fails the Task with the provider's words, the key redacted", async (t) => {
  const endpoint = await openAIEndpoint(t, (reply, request) => reply.json(401, { error: { message: `Incorrect API key provided: ${String(request.headers.authorization)}`, type: "invalid_request_error" } }))
  const { sdk } = await served(t, createClient({ languageModel: createOpenAI({ baseURL: endpoint.url, apiKey: KEY }).chat("m") }))
  const task = (await sdk.sendMessage(say("hi"))) as any
  t.equal(task.status.state, TaskState.TASK_STATE_FAILED)
  const message = String(textOf(task.status.message.parts[0]))
  t.equal(message, "The agent failed: The openai.chat model answered 401: Incorrect API key provided: [redacted]")
  t.notMatch(message, KEY)
})

t.test("a cancel aborts the model's signal (mock model) and its HTTP request (@ai-sdk/openai)", async (t) => {
  const signals: AbortSignal[] = []
  const held = partStream([{ type: "text-delta", id: "x", delta: "working on it" }], false)
  const mock = new MockLanguageModelV4({
    doStream: async ({ abortSignal }) => {
      signals.push(abortSignal!)
      return { stream: held.stream } as never
    },
  })
  const { sdk } = await served(t, createClient({ languageModel: mock }))
  const running = (await sdk.sendMessage(say("long job", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => signals.length === 1, 5000, "the model to be called")
  const canceled = (await sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id }))) as any
  t.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED)
  t.equal(signals[0].aborted, true, "the signal the model was given aborted")
  await waitFor(() => held.state.canceled, 5000, "the model's stream to be canceled")
  t.pass("its stream was canceled")

  const endpoint = await openAIEndpoint(t, async (reply) => {
    await reply.stream([sse.role(), sse.text("thinking")])
    await reply.closed
  })
  const http = await served(t, createClient({ languageModel: createOpenAI({ baseURL: endpoint.url, apiKey: KEY }).chat("m") }))
  const busy = (await http.sdk.sendMessage(say("long job", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => endpoint.requests.length === 1, 5000, "the request to reach the endpoint")
  await http.sdk.cancelTask(CancelTaskRequest.fromJSON({ id: busy.id }))
  await waitFor(() => endpoint.requests[0].abandoned, 5000, "the endpoint to see its request dropped")
  t.pass("the provider's request was dropped")
})

t.test("a served Task streams every turn: doStream, never doGenerate", async (t) => {
  const mock = new MockLanguageModelV4({ doStream: async () => ({ stream: partStream<object>([{ type: "text-delta", id: "x", delta: "hello" }, finish("stop")]).stream }) as never })
  const { sdk } = await served(t, createClient({ languageModel: mock }))
  const task = (await sdk.sendMessage(say("hi"))) as any
  t.equal(textOf(task.artifacts[0].parts[0]), "hello")
  t.equal(mock.doStreamCalls.length, 1)
  t.equal(mock.doGenerateCalls.length, 0, "a served Task streams its turns")
})
