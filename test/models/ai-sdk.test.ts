import { createOpenAI } from "@ai-sdk/openai"
import { MockLanguageModelV3, MockLanguageModelV4 } from "ai/test"
import { createOpenAI as createOpenAIV3 } from "ai-sdk-openai-v3"
import t from "tap"
import { createClient } from "../../lib/client/client.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import { finish, openAIEndpoint, partStream, sse, textAnswer, usage } from "../fixtures/ai-sdk.js"
import { addTool, waitFor } from "../fixtures/helpers.js"

/*
 * createClient({ languageModel }): the built-in loop through a Vercel AI SDK
 * language model. The real @ai-sdk/openai provider, in its v4 (ai 7) and v3
 * (ai 6) releases, against a fake OpenAI-style endpoint on 127.0.0.1; and the
 * AI SDK's own mock models from ai/test.
 */

const KEY = "sk-aisdk-0123456789abcdef"

/** The OpenAI provider of each specification version, as a user makes it. */
const providers = {
  v4: (baseURL: string) => createOpenAI({ baseURL, apiKey: KEY }).chat("m"),
  v3: (baseURL: string) => createOpenAIV3({ baseURL, apiKey: KEY }).chat("m"),
}

/** What onText was given, with each piece's turn. */
function listener() {
  const heard: Array<[string, number]> = []
  return { heard, onText: (delta: string, info: { turn: number }) => void heard.push([delta, info.turn]) }
}

for (const [version, provider] of Object.entries(providers)) {
  t.test(`@ai-sdk/openai (${version}): a tool call, then streamed text, through the whole loop`, async (t) => {
    const endpoint = await openAIEndpoint(t, async (reply, _request, n) => {
      if (n === 1) await reply.stream([sse.role(), sse.text("Adding. "), sse.toolCall(0, "call_1", "add", '{"a":2,"b":3}'), sse.finish("tool_calls"), sse.usage(10, 4), sse.done()])
      else await reply.stream(textAnswer(["2 + 3 ", "= 5"], [20, 3]))
      reply.end()
    })
    const calls: Array<{ a: unknown; b: unknown }> = []
    const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(calls)] })
    const model = provider(endpoint.url)
    t.equal(model.specificationVersion, version, `the provider builds ${version} models`)
    const client = createClient({ languageModel: model, headers: { "x-team": "blue" } })
    const { heard, onText } = listener()
    const result = await client.run("What is 2 + 3?", { toolkit, onText })

    t.same(calls, [{ a: 2, b: 3 }], "the tool ran with the model's arguments")
    t.same(heard, [["Adding. ", 1], ["2 + 3 ", 2], ["= 5", 2]], "text streamed to onText piece by piece, with its turn")
    t.equal(result.text, "2 + 3 = 5")
    t.equal(result.turns, 2)
    t.equal(result.model, "m")
    t.same(result.usage, { inputTokens: 30, outputTokens: 7, totalTokens: 37 }, "each turn's usage, summed")
    t.same(result.toolCalls.map(({ id, name, args, result }) => [id, name, args, result.output]), [["call_1", "add", { a: 2, b: 3 }, "5"]])

    const [first, second] = endpoint.requests
    t.equal(first.path, "/v1/chat/completions")
    t.equal(first.headers.authorization, `Bearer ${KEY}`, "the provider sent its key")
    t.equal(first.headers["x-team"], "blue", "opts.headers reached the endpoint")
    t.equal(first.body.stream, true, "asked as a stream")
    t.same(first.body.tools, [{ type: "function", function: { name: "add", description: "Adds two numbers", parameters: addTool().inputSchema } }], "the toolkit's tool, with its JSON schema")
    t.same(
      second.body.messages.slice(1),
      [
        { role: "assistant", content: "Adding. ", tool_calls: [{ id: "call_1", type: "function", function: { name: "add", arguments: '{"a":2,"b":3}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "5" },
      ],
      "the call and its result went back to the model",
    )
  })
}

t.test("@ai-sdk/openai: without onText the turn is asked whole (doGenerate)", async (t) => {
  const endpoint = await openAIEndpoint(t, (reply) =>
    reply.json(200, { id: "c1", created: 0, model: "m", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "whole" }, finish_reason: "stop" }], usage: { prompt_tokens: 4, completion_tokens: 1, total_tokens: 5 } }),
  )
  const result = await createClient({ languageModel: providers.v4(endpoint.url) }).run("hi")
  t.equal(result.text, "whole")
  t.same(result.usage, { inputTokens: 4, outputTokens: 1, totalTokens: 5 })
  t.notOk(endpoint.requests[0].body.stream, "not asked as a stream")
})

t.test("retries: a 503, then a 429 with retry-after, then the answer; nothing retried once text went out", async (t) => {
  const endpoint = await openAIEndpoint(t, async (reply, _request, n) => {
    if (n === 1) return reply.json(503, { error: { message: "overloaded" } })
    if (n === 2) return reply.json(429, { error: { message: "slow down" } }, { "retry-after": "0" })
    await reply.stream(textAnswer(["fine"]))
    reply.end()
  })
  const result = await createClient({ languageModel: providers.v4(endpoint.url), retryBaseDelayMs: 1 }).run("hi", { onText: () => {} })
  t.equal(result.text, "fine")
  t.equal(endpoint.requests.length, 3, "two retries")

  const cut = await openAIEndpoint(t, async (reply) => {
    await reply.stream([sse.role(), sse.text("half an ans")])
    reply.cut()
  })
  const { heard, onText } = listener()
  await t.rejects(createClient({ languageModel: providers.v4(cut.url), retryBaseDelayMs: 1 }).run("hi", { onText }), /m?odel's answer broke off after streaming had begun .*not retried/)
  t.same(heard, [["half an ans", 1]])
  t.equal(cut.requests.length, 1, "not tried again: the text would be said twice")

  const overloaded = await openAIEndpoint(t, (reply) => reply.json(503, { error: { message: "overloaded" } }))
  await t.rejects(createClient({ languageModel: providers.v4(overloaded.url), maxRetries: 0 }).run("hi", { onText: () => {} }), /^The openai\.chat model answered 503: overloaded$/)
  t.equal(overloaded.requests.length, 1, "maxRetries 0: the first failure stands")
  await t.rejects(createClient({ languageModel: providers.v4(overloaded.url), maxRetries: 2, retryBaseDelayMs: 1 }).run("hi", { onText: () => {} }), /answered 503 after 3 attempts: overloaded/)
})

t.test("a stream cut before any text is tried again", async (t) => {
  const endpoint = await openAIEndpoint(t, async (reply, _request, n) => {
    if (n === 1) {
      await reply.stream([sse.role()])
      return reply.cut()
    }
    await reply.stream(textAnswer(["second try"]))
    reply.end()
  })
  const result = await createClient({ languageModel: providers.v4(endpoint.url), retryBaseDelayMs: 1 }).run("hi", { onText: () => {} })
  t.equal(result.text, "second try")
  t.equal(endpoint.requests.length, 2)
})

t.test("an error answer that echoes the key fails the run without it, and is not retried", async (t) => {
  const endpoint = await openAIEndpoint(t, (reply, request) => reply.json(401, { error: { message: `Invalid key: ${String(request.headers.authorization)}`, type: "invalid_request_error" } }))
  const err = (await createClient({ languageModel: providers.v4(endpoint.url), headers: { "x-api-key": "hdr-secret-value" }, retryBaseDelayMs: 1 })
    .run("hi", { onText: () => {} })
    .catch((e: unknown) => e)) as Error
  t.equal(err.message, "The openai.chat model answered 401: Invalid key: [redacted]", "the key the provider sent (read from its config) is redacted")
  t.notMatch(err.message, KEY)
  t.equal(endpoint.requests.length, 1, "a 401 is not retried")
})

t.test("the caller's abort reaches the provider's request, and the run ends with its reason", async (t) => {
  const endpoint = await openAIEndpoint(t, async (reply) => {
    await reply.stream([sse.role(), sse.text("thinking")])
    await reply.closed // held until the client goes away
  })
  const controller = new AbortController()
  const run = createClient({ languageModel: providers.v4(endpoint.url) }).run("hi", { signal: controller.signal, onText: () => controller.abort(new Error("stop now")) })
  await t.rejects(run, /stop now/)
  await waitFor(() => endpoint.requests[0]?.abandoned === true, 5000, "the endpoint to see the request dropped")
  t.pass("the HTTP request was canceled")
})

t.test("AI SDK mock models (v3 and v4): stream parts and doGenerate content make turns", async (t) => {
  for (const Mock of [MockLanguageModelV3, MockLanguageModelV4]) {
    const turns = [
      [
        { type: "stream-start", warnings: [] },
        { type: "tool-input-start", id: "t1", toolName: "add" },
        { type: "tool-input-delta", id: "t1", delta: '{"a":1,' },
        { type: "tool-input-end", id: "t1" },
        { type: "tool-call", toolCallId: "t1", toolName: "add", input: '{"a":1,"b":41}' },
        { type: "tool-call", toolCallId: "hosted", toolName: "web_search", input: "{}", providerExecuted: true },
        finish("tool-calls", 5, 2),
      ],
      [{ type: "text-start", id: "x" }, { type: "reasoning-delta", id: "r", delta: "hmm" }, { type: "text-delta", id: "x", delta: "forty" }, { type: "text-delta", id: "x", delta: "-two" }, { type: "text-end", id: "x" }, finish("stop", 9, 3)],
    ]
    const model = new Mock({ provider: "acme.chat", modelId: "acme-1", doStream: async () => ({ stream: partStream(turns.shift() ?? []).stream }) as never })
    const calls: Array<{ a: unknown; b: unknown }> = []
    const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(calls)] })
    const { heard, onText } = listener()
    const result = await createClient({ languageModel: model, systemPrompt: "Be brief.", maxTokens: 99 }).run("1 + 41?", { toolkit, onText })
    const name = `Mock ${model.specificationVersion}`
    t.equal(result.text, "forty-two", name)
    t.same(heard, [["forty", 2], ["-two", 2]], `${name}: only text deltas reach onText`)
    t.same(calls, [{ a: 1, b: 41 }], `${name}: the provider-executed call is not run`)
    t.same(result.usage, { inputTokens: 14, outputTokens: 5, totalTokens: 19 })
    const [firstCall, secondCall] = model.doStreamCalls
    t.same(firstCall.tools, [{ type: "function", name: "add", description: "Adds two numbers", inputSchema: addTool().inputSchema }], `${name}: function tools with JSON schemas`)
    t.equal(firstCall.maxOutputTokens, 99, `${name}: maxTokens is maxOutputTokens`)
    t.ok(firstCall.abortSignal instanceof AbortSignal, `${name}: an abort signal is passed`)
    t.same(
      secondCall.prompt,
      [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "1 + 41?" }] },
        { role: "assistant", content: [{ type: "tool-call", toolCallId: "t1", toolName: "add", input: { a: 1, b: 41 } }] },
        { role: "tool", content: [{ type: "tool-result", toolCallId: "t1", toolName: "add", output: { type: "text", value: "42" } }] },
      ],
      `${name}: the conversation in the AI SDK's prompt form`,
    )

    const whole = new Mock({
      modelId: "acme-2",
      doGenerate: async () =>
        ({ content: [{ type: "reasoning", text: "hmm" }, { type: "text", text: "whole " }, { type: "text", text: "answer" }], finishReason: { unified: "stop", raw: "stop" }, usage: usage(2, 2), warnings: [] }) as never,
    })
    const generated = await createClient({ languageModel: whole }).run("hi")
    t.equal(generated.text, "whole answer", `${name}: doGenerate without onText`)
    t.equal(whole.doGenerateCalls.length, 1)
  }
})

t.test("mock model: a tool that fails is reported to the model as error-text; bad arguments never run the tool", async (t) => {
  const turns: object[][] = [
    [{ type: "tool-call", toolCallId: "a", toolName: "boom", input: "{}" }, { type: "tool-call", toolCallId: "b", toolName: "add", input: "{not json" }, finish("tool-calls")],
    [{ type: "text-delta", id: "x", delta: "done" }, finish("stop")],
  ]
  const model = new MockLanguageModelV4({ doStream: async () => ({ stream: partStream(turns.shift() ?? []).stream }) as never })
  const calls: Array<{ a: unknown; b: unknown }> = []
  const boom = { name: "boom", description: "Fails", inputSchema: { type: "object" }, execute: () => Promise.reject(new Error("it broke")) }
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(calls), boom] })
  await createClient({ languageModel: model }).run("go", { toolkit, onText: () => {} })
  t.same(calls, [], "the call with bad JSON did not run")
  const results = model.doStreamCalls[1].prompt.at(-1)
  t.match(results, {
    role: "tool",
    content: [
      { toolCallId: "a", toolName: "boom", output: { type: "error-text", value: /it broke/ } },
      { toolCallId: "b", toolName: "add", output: { type: "error-text", value: /not valid JSON/ } },
    ],
  })
})

t.test("mock model: an error part fails the turn; a stream without its finish, or interrupted, is a cut", async (t) => {
  const failing = new MockLanguageModelV4({ doStream: async () => ({ stream: partStream([{ type: "text-delta", id: "x", delta: "par" }, { type: "error", error: new Error("upstream exploded") }]).stream }) as never })
  await t.rejects(createClient({ languageModel: failing }).run("hi", { onText: () => {} }), /mock-provider model's answer broke off after streaming had begun \(upstream exploded\)/)

  let n = 0
  const interrupted = new MockLanguageModelV4({
    doStream: async () => ({ stream: partStream<object>(n++ === 0 ? [finish("interrupted")] : [{ type: "text-delta", id: "x", delta: "ok" }, finish("stop")]).stream }) as never,
  })
  t.equal((await createClient({ languageModel: interrupted, retryBaseDelayMs: 1 }).run("hi", { onText: () => {} })).text, "ok", "interrupted before text: tried again")

  const unfinished = new MockLanguageModelV3({ doStream: async () => ({ stream: partStream([{ type: "text-delta", id: "x", delta: "so" }]).stream }) as never })
  await t.rejects(createClient({ languageModel: unfinished }).run("hi", { onText: () => {} }), /broke off after streaming had begun \(the stream ended before its finish part\)/)

  const thrower = new MockLanguageModelV4({ doGenerate: () => Promise.reject(new Error("no credits left")) })
  await t.rejects(createClient({ languageModel: thrower }).run("hi"), /^The mock-provider model failed: no credits left$/)
})

t.test("limits: timeoutMs, turnTimeoutMs and maxResponseBytes end the turn and abort the model's signal", async (t) => {
  const signals: AbortSignal[] = []
  const silent = partStream([], false)
  const idle = new MockLanguageModelV4({
    doStream: async ({ abortSignal }) => {
      signals.push(abortSignal!)
      return { stream: silent.stream }
    },
  })
  await t.rejects(createClient({ languageModel: idle, timeoutMs: 50 }).run("hi", { onText: () => {} }), /^The mock-provider model did not answer within 50 ms; raise opts.timeoutMs/)
  t.equal(signals[0].aborted, true, "the model's signal aborted")
  t.equal(silent.state.canceled, true, "its stream canceled")

  const ignoring = new MockLanguageModelV4({ doGenerate: () => new Promise(() => {}) }) // never settles, ignores its signal
  await t.rejects(createClient({ languageModel: ignoring, turnTimeoutMs: 60 }).run("hi"), /turn took longer than 60 ms in all; the limit is createClient's turnTimeoutMs/)

  const chatty = partStream([{ type: "text-delta", id: "x", delta: "0123456789" }, { type: "text-delta", id: "x", delta: "0123456789" }, { type: "text-delta", id: "x", delta: "0123456789" }], false)
  const big = new MockLanguageModelV4({ doStream: async () => ({ stream: chatty.stream }) as never })
  const { heard, onText } = listener()
  await t.rejects(createClient({ languageModel: big, maxResponseBytes: 25 }).run("hi", { onText }), /answer ran past 25 bytes of text and tool input; the limit is createClient's maxResponseBytes/)
  t.equal(heard.length, 2, "the delta past the limit was not handed on")
  t.equal(chatty.state.canceled, true, "the stream was canceled")
})

t.test("options: one kind of model only, a known specification version, no endpoint options", async (t) => {
  const model = new MockLanguageModelV4()
  t.throws(() => createClient({ languageModel: model, baseUrl: "http://127.0.0.1:1", style: "openai", model: "m" } as never), {
    name: "TypeError",
    message: /give either opts.languageModel or opts.baseUrl\/style\/model, not both: opts.baseUrl, opts.style, opts.model were given/,
  })
  t.throws(() => createClient({ languageModel: model, apiKey: "k" } as never), /opts.apiKey was given with opts.languageModel/)
  t.throws(() => createClient({ languageModel: { ...model, specificationVersion: "v2" } as never }), /specificationVersion "v2" \(ai 5, @ai-sdk\/\* 2.x\); toolnexus speaks "v3" \(ai 6, @ai-sdk\/\* 3.x\) and "v4"/)
  t.throws(() => createClient({ languageModel: "gpt-4o" as never }), /opts.languageModel should be an AI SDK language model/)
  t.throws(() => createClient({ languageModel: { specificationVersion: "v4", provider: "p", modelId: "m" } as never }), /should have doStream and doGenerate methods/)
  t.throws(() => createClient({ languageModel: model, maxTurns: 0 }), /opts.maxTurns should be a positive integer/)
  t.equal(createClient({ languageModel: model }).model, "mock-model-id", "the client's model is the modelId")
})

t.test("odd model objects: what an in-process model hands over is checked, and each failure says what was wrong", async (t) => {
  const streaming = (doStream: () => unknown) => createClient({ languageModel: new MockLanguageModelV4({ doStream: doStream as never }), maxRetries: 0 }).run("hi", { onText: () => {} })
  const whole = (doGenerate: () => unknown) => createClient({ languageModel: new MockLanguageModelV4({ doGenerate: doGenerate as never }), maxRetries: 0 }).run("hi")

  await t.rejects(streaming(async () => ({ nothing: true })), /model failed: doStream answered without a stream/)
  await t.rejects(streaming(async () => ({ stream: partStream([42]).stream })), /the stream held 42, not a part with a type/)
  await t.rejects(whole(async () => ({ text: "not content" })), /model failed: doGenerate answered without content/)
  await t.rejects(streaming(async () => ({ stream: partStream([{ type: "finish", usage: usage(1, 1), finishReason: "error" }]).stream })), /finishReason error/, "a plain-string finish reason is read too")

  // doGenerate: parts that are not parts are skipped, a call without id or name still pairs with its result, usage and finishReason may be missing.
  let n = 0
  const generated = new MockLanguageModelV4({
    doGenerate: async () =>
      (n++ === 0 ? { content: [null, { type: "tool-call", input: "{}" }] } : { content: [{ type: "text", text: "fine" }], usage: "lots" }) as never,
  })
  const result = await createClient({ languageModel: generated }).run("hi")
  t.equal(result.text, "fine")
  t.same(result.usage, { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, "no usable usage: zero")
  t.match(result.toolCalls, [{ id: "call_0", name: "", result: { isError: true } }], "the nameless call got an error result")
  t.match(generated.doGenerateCalls[1].prompt.at(-1), { role: "tool", content: [{ toolCallId: "call_0", toolName: "" }] })

  // Errors of every shape are told in words.
  for (const [error, words] of [
    ["a plain string", "a plain string"],
    [{ message: "an object with a message" }, "an object with a message"],
    [{ code: 7 }, '{"code":7}'],
    [Object.assign(new Error(""), { name: "EmptyError" }), "EmptyError"],
  ] as const) {
    await t.rejects(streaming(async () => ({ stream: partStream([{ type: "error", error }]).stream })), new RegExp(`model failed: ${words.replace(/[{}]/g, "\\$&")}$`))
  }
  const circular: Record<string, unknown> = {}
  circular.self = circular
  // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- a model object may reject with anything
  await t.rejects(whole(() => Promise.reject(circular)), /model failed: \[object Object\]$/)

  // A retryable failure whose retry-after is past the retry deadline stands at once.
  const busy = Object.assign(new Error("busy"), { isRetryable: true, statusCode: 429, responseHeaders: { "Retry-After": "3600" } })
  const slow = new MockLanguageModelV4({ doGenerate: () => Promise.reject(busy) })
  await t.rejects(createClient({ languageModel: slow, retryDeadlineMs: 1000 }).run("hi"), /^The mock-provider model answered 429: busy$/)
  t.equal(slow.doGenerateCalls.length, 1, "not retried: the wait it asked for is past retryDeadlineMs")

  // The provider's headers are read for redaction only where the model has them, and a throwing getter is no failure of its own.
  const secretive = Object.assign(new MockLanguageModelV4({ doGenerate: () => Promise.reject(new Error("key sk-hidden-1 refused")) }), {
    config: {
      headers: () => {
        throw new Error("no headers today")
      },
    },
  })
  await t.rejects(createClient({ languageModel: secretive }).run("hi"), /^The mock-provider model failed: key sk-hidden-1 refused$/)
  const listed = Object.assign(new MockLanguageModelV4({ doGenerate: () => Promise.reject(new Error("key sk-hidden-2 refused")) }), { config: { headers: async () => ({ "x-api-key": "sk-hidden-2", other: undefined }) } })
  await t.rejects(createClient({ languageModel: listed }).run("hi"), /^The mock-provider model failed: key \[redacted\] refused$/)
  const notAnObject = Object.assign(new MockLanguageModelV4({ doGenerate: () => Promise.reject(new Error("x")) }), { config: { headers: () => "nope" } })
  await t.rejects(createClient({ languageModel: notAnObject }).run("hi"), /model failed: x$/)
})

t.test("options: a model without an id or provider, null, and one endpoint option", async (t) => {
  t.throws(() => createClient({ languageModel: { specificationVersion: "v4", provider: "", modelId: "m", doStream() {}, doGenerate() {} } as never }), /should have a non-empty provider and modelId/)
  t.throws(() => createClient({ languageModel: null as never }), /languageModel should be an AI SDK language model, .* got null/)
  t.throws(() => createClient({ languageModel: new MockLanguageModelV4(), maxLineLength: 10 } as never), /opts.maxLineLength was given with opts.languageModel/)
  t.throws(() => createClient({ languageModel: { ...new MockLanguageModelV4(), specificationVersion: "v9" } as never }), /specificationVersion "v9"; toolnexus speaks/)
})
