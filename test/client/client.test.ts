import t from "tap"
import { createClient, createLocalClient, type ModelFunction } from "../../lib/client/client.js"
import type { ChatMessage } from "../../lib/models/model.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import type { Tool } from "../../lib/tools/types.js"
import { addTool, closedPort, modelServer, waitFor } from "../fixtures/helpers.js"

const KEY = "sk-test-0123456789abcdef"

const openAIToolCall = (id: string, name: string, args: string) => ({ id, type: "function", function: { name, arguments: args } })

t.test("openai: the minimal answer is accepted", async (t) => {
  const server = await modelServer(t, [
    { json: { choices: [{ message: { content: "DONE" } }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } },
  ])
  const client = createClient({ baseUrl: server.url, style: "openai", model: "gpt-test" })
  const result = await client.run("Say DONE")

  t.equal(result.text, "DONE")
  t.same(result.usage, { inputTokens: 1, outputTokens: 1, totalTokens: 2 })
  t.equal(result.turns, 1)
  t.equal(result.model, "gpt-test")
  t.same(result.toolCalls, [])
  t.equal(server.requests[0].path, "/chat/completions")
  t.same(server.requests[0].body, { model: "gpt-test", messages: [{ role: "user", content: "Say DONE" }] }, "no tools key without a toolkit")
  t.notOk(server.requests[0].headers.authorization, "no authorization header without an apiKey")
})

t.test("openai: a two-turn tool loop", async (t) => {
  const server = await modelServer(t, [
    {
      json: {
        choices: [{ message: { role: "assistant", content: null, tool_calls: [openAIToolCall("call_1", "add", '{"a":2,"b":3}')] }, finish_reason: "tool_calls" }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      },
    },
    { json: { choices: [{ message: { role: "assistant", content: "2 + 3 = 5" } }], usage: { prompt_tokens: 20, completion_tokens: 2, total_tokens: 22 } } },
  ])
  const calls: Array<{ a: unknown; b: unknown }> = []
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(calls)] })
  const client = createClient({ baseUrl: `${server.url}/v1/`, style: "openai", model: "gpt-test", apiKey: KEY, systemPrompt: "Use tools.", headers: { "x-team": "qa" } })
  const result = await client.run("What is 2 + 3?", { toolkit })

  t.equal(result.text, "2 + 3 = 5")
  t.equal(result.turns, 2)
  t.same(result.usage, { inputTokens: 30, outputTokens: 7, totalTokens: 37 })
  t.same(calls, [{ a: 2, b: 3 }], "the tool ran once with the parsed arguments")
  t.same(result.toolCalls, [{ id: "call_1", name: "add", args: { a: 2, b: 3 }, result: { output: "5", isError: false } }])

  const [first, second] = server.requests
  t.equal(first.method, "POST")
  t.equal(first.path, "/v1/chat/completions", "the trailing slash of baseUrl is dropped")
  t.equal(first.headers.authorization, `Bearer ${KEY}`)
  t.equal(first.headers["content-type"], "application/json")
  t.equal(first.headers["x-team"], "qa")
  t.same(first.body.tools, toolkit.toOpenAI())
  t.same(first.body.messages, [
    { role: "system", content: "Use tools." },
    { role: "user", content: "What is 2 + 3?" },
  ])
  t.same(second.body.messages.slice(2), [
    { role: "assistant", content: null, tool_calls: [openAIToolCall("call_1", "add", '{"a":2,"b":3}')] },
    { role: "tool", tool_call_id: "call_1", content: "5" },
  ])
  t.same(
    result.messages.map((m) => m.role),
    ["user", "assistant", "tool", "assistant"],
    "messages hold the conversation without the system prompt",
  )
})

t.test("openai: arguments that are not JSON reach the model as an error result", async (t) => {
  const server = await modelServer(t, [
    { json: { choices: [{ message: { content: null, tool_calls: [openAIToolCall("call_1", "add", "{a: 2")] } }] } },
    { json: { choices: [{ message: { content: "Sorry." } }] } },
  ])
  const calls: Array<{ a: unknown; b: unknown }> = []
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(calls)] })
  const result = await createClient({ baseUrl: server.url, style: "openai", model: "m" }).run("add", { toolkit })

  t.equal(result.text, "Sorry.")
  t.same(calls, [], "the tool did not run")
  t.equal(result.toolCalls[0].result.isError, true)
  t.match(result.toolCalls[0].result.output, /arguments were not valid JSON/)
  t.match(server.requests[1].body.messages[2], { role: "tool", tool_call_id: "call_1", content: /arguments were not valid JSON/ })
  t.same(result.usage, { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, "missing usage counts as 0")
})

t.test("anthropic: a two-turn tool loop", async (t) => {
  const server = await modelServer(t, [
    {
      json: {
        type: "message",
        role: "assistant",
        content: [
          { type: "text", text: "Adding." },
          { type: "tool_use", id: "toolu_1", name: "add", input: { a: 1, b: 2 } },
          { type: "tool_use", id: "toolu_2", name: "add", input: { a: 3, b: 4 } },
        ],
        stop_reason: "tool_use",
        usage: { input_tokens: 12, output_tokens: 8 },
      },
    },
    { json: { type: "message", content: [{ type: "text", text: "3 and " }, { type: "text", text: "7" }], usage: { input_tokens: 30, output_tokens: 3 } } },
  ])
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool()] })
  const client = createClient({ baseUrl: server.url, style: "anthropic", model: "claude-test", apiKey: KEY, systemPrompt: "Be brief." })
  const result = await client.run("1+2 and 3+4?", { toolkit })

  t.equal(result.text, "3 and 7", "text blocks are concatenated")
  t.equal(result.turns, 2)
  t.same(result.usage, { inputTokens: 42, outputTokens: 11, totalTokens: 53 })
  t.same(
    result.toolCalls.map((c) => [c.id, c.result.output]),
    [["toolu_1", "3"], ["toolu_2", "7"]],
  )

  const [first, second] = server.requests
  t.equal(first.path, "/v1/messages")
  t.equal(first.headers["x-api-key"], KEY)
  t.equal(first.headers["anthropic-version"], "2023-06-01")
  t.equal(first.headers["content-type"], "application/json")
  t.notOk(first.headers.authorization)
  t.equal(first.body.system, "Be brief.")
  t.equal(first.body.max_tokens, 4096)
  t.same(first.body.tools, toolkit.toAnthropic())
  t.same(first.body.messages, [{ role: "user", content: "1+2 and 3+4?" }], "the system prompt is not a message")
  t.same(second.body.messages.slice(1), [
    {
      role: "assistant",
      content: [
        { type: "text", text: "Adding." },
        { type: "tool_use", id: "toolu_1", name: "add", input: { a: 1, b: 2 } },
        { type: "tool_use", id: "toolu_2", name: "add", input: { a: 3, b: 4 } },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "toolu_1", content: "3", is_error: false },
        { type: "tool_result", tool_use_id: "toolu_2", content: "7", is_error: false },
      ],
    },
  ], "both tool results go back in one user message")
})

t.test("anthropic: a baseUrl ending in /v1 is not doubled", async (t) => {
  const server = await modelServer(t, [{ json: { content: [{ type: "text", text: "hi" }] } }])
  await createClient({ baseUrl: `${server.url}/v1/`, style: "anthropic", model: "m", maxTokens: 100 }).run("hello")

  t.equal(server.requests[0].path, "/v1/messages")
  t.equal(server.requests[0].body.max_tokens, 100)
})

t.test("anthropic: a throwing tool becomes an error result and the run completes", async (t) => {
  const server = await modelServer(t, [
    { json: { content: [{ type: "tool_use", id: "toolu_1", name: "explode", input: {} }] } },
    { json: { content: [{ type: "text", text: "The tool failed." }] } },
  ])
  const explode: Tool = {
    name: "explode",
    description: "Always fails",
    inputSchema: { type: "object" },
    execute() {
      throw new Error("disk on fire")
    },
  }
  const toolkit = await createToolkit({ builtins: false, extraTools: [explode] })
  const result = await createClient({ baseUrl: server.url, style: "anthropic", model: "m" }).run("go", { toolkit })

  t.equal(result.text, "The tool failed.")
  t.equal(result.toolCalls[0].result.isError, true)
  t.match(server.requests[1].body.messages[2], {
    role: "user",
    content: [{ type: "tool_result", tool_use_id: "toolu_1", content: /disk on fire/, is_error: true }],
  })
})

t.test("a non-2xx answer names provider, status and the provider's message, never the key", async (t) => {
  const server = await modelServer(t, [
    // Some servers echo the key they got; it must still not reach the message.
    { status: 401, json: { error: { message: `Incorrect API key provided: ${KEY}`, type: "invalid_request_error" } } },
    { status: 429, json: { type: "error", error: { type: "rate_limit_error", message: "Number of requests has exceeded your rate limit" } } },
    { status: 502, text: "<html>Bad gateway</html>" },
  ])
  const openai = createClient({ baseUrl: server.url, style: "openai", model: "m", apiKey: KEY, maxRetries: 0 })
  const unauthorized = await openai.run("hi").catch((err: unknown) => err)
  t.match(unauthorized, { status: 401, message: /^openai model endpoint answered 401 Unauthorized: Incorrect API key provided/ })
  t.notMatch((unauthorized as Error).message, KEY)
  t.notMatch((unauthorized as Error).stack ?? "", KEY)

  const anthropic = createClient({ baseUrl: server.url, style: "anthropic", model: "m", apiKey: KEY, maxRetries: 0 })
  await t.rejects(anthropic.run("hi"), { status: 429, message: /^anthropic model endpoint answered 429 Too Many Requests: Number of requests has exceeded/ })
  await t.rejects(openai.run("hi"), { status: 502, message: /answered 502 Bad Gateway: <html>Bad gateway<\/html>/ })
  t.equal(server.requests.length, 3, "maxRetries: 0 makes one request per run")
})

t.test("an answer that is not a chat completion is a clear error", async (t) => {
  const server = await modelServer(t, [
    { text: "<html>login page</html>" },
    { json: { object: "list", data: [] } },
    { json: { error: "nope" } },
  ])
  const client = createClient({ baseUrl: server.url, style: "openai", model: "m" })
  await t.rejects(client.run("hi"), { message: /openai model endpoint .* answered with something that is not a chat completion: <html>login page/ })
  await t.rejects(client.run("hi"), { message: /not a chat completion: \{"object":"list"/ })
  const anthropic = createClient({ baseUrl: server.url, style: "anthropic", model: "m" })
  await t.rejects(anthropic.run("hi"), { message: /anthropic model endpoint .* not a Messages API response/ })
})

t.test("an unreachable endpoint is named, without the key", async (t) => {
  const port = await closedPort()
  const err = await createClient({ baseUrl: `http://127.0.0.1:${port}/v1`, style: "openai", model: "m", apiKey: KEY, maxRetries: 0 })
    .run("hi")
    .catch((e: unknown) => e)
  t.match(err, { message: new RegExp(`Could not reach the openai model endpoint at http://127\\.0\\.0\\.1:${port}/v1/chat/completions \\(ECONNREFUSED\\)`) })
  t.notMatch((err as Error).message, KEY)
})

/** Retry tests wait 1-2 ms between attempts instead of the default 250 ms and up. */
const FAST_RETRY = { retryBaseDelayMs: 1 } as const
const DONE = { json: { choices: [{ message: { content: "DONE" } }] } }

t.test("retries: 503 twice, then an answer", async (t) => {
  const overloaded = { status: 503, json: { error: { message: "overloaded" } } }
  const server = await modelServer(t, [overloaded, overloaded, DONE])
  const result = await createClient({ baseUrl: server.url, style: "openai", model: "m", ...FAST_RETRY }).run("hi")

  t.equal(result.text, "DONE")
  t.equal(server.requests.length, 3)
  t.same(server.requests[2].body, server.requests[0].body, "each retry sends the same request")
})

t.test("retries: a 429's Retry-After, in seconds or as a date, is the wait instead of the backoff", async (t) => {
  const server = await modelServer(t, [
    { status: 429, headers: { "retry-after": "0" }, json: { error: { message: "slow down" } } },
    { status: 429, headers: { "retry-after": new Date(Date.now() - 60_000).toUTCString() }, json: { error: { message: "slow down" } } },
    { json: { content: [{ type: "text", text: "DONE" }] } },
  ])
  // A 60 s backoff would time the test out: only Retry-After can make these retries quick.
  const client = createClient({ baseUrl: server.url, style: "anthropic", model: "m", retryBaseDelayMs: 60_000, retryDeadlineMs: 120_000 })
  const result = await client.run("hi")

  t.equal(result.text, "DONE")
  t.equal(server.requests.length, 3)
})

t.test("retries: a persistent 500 fails naming the attempts and the status, never the key", async (t) => {
  const broken = { status: 500, json: { error: { message: `internal error for ${KEY}` } } }
  const server = await modelServer(t, [broken, broken, broken, DONE])
  const client = createClient({ baseUrl: server.url, style: "openai", model: "m", apiKey: KEY, maxRetries: 2, ...FAST_RETRY })
  const err = await client.run("hi").catch((e: unknown) => e)

  t.match(err, { name: "ModelEndpointError", status: 500, attempts: 3, message: /^openai model endpoint answered 500 Internal Server Error after 3 attempts: internal error for \[redacted\]/ })
  t.notMatch((err as Error).message, KEY)
  t.equal(server.requests.length, 3, "maxRetries: 2 means three requests in all")
})

t.test("retries: a 400 is not retried", async (t) => {
  const server = await modelServer(t, [{ status: 400, json: { error: { message: "bad tools" } } }, DONE])
  const client = createClient({ baseUrl: server.url, style: "openai", model: "m", ...FAST_RETRY })

  await t.rejects(client.run("hi"), { status: 400, message: /^openai model endpoint answered 400 Bad Request: bad tools$/ })
  t.equal(server.requests.length, 1)
})

t.test("retries: a refused connection is retried, then named with the attempts", async (t) => {
  const port = await closedPort()
  const client = createClient({ baseUrl: `http://127.0.0.1:${port}`, style: "anthropic", model: "m", maxRetries: 2, ...FAST_RETRY })

  await t.rejects(client.run("hi"), {
    message: new RegExp(`^Could not reach the anthropic model endpoint at http://127\\.0\\.0\\.1:${port}/v1/messages \\(ECONNREFUSED\\) after 3 attempts; check opts\\.baseUrl`),
  })
})

t.test("retries: the signal cancels a backoff wait at once", async (t) => {
  const server = await modelServer(t, [{ status: 503, text: "busy" }, DONE])
  // The backoff after the 503 is a 30-60 s timer: once one is set, the client is waiting.
  let backingOff = false
  const setTimer = globalThis.setTimeout
  t.capture(globalThis, "setTimeout", ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    if (ms !== undefined && ms >= 30_000 && ms <= 60_000) backingOff = true
    return setTimer(callback, ms, ...args)
  }) as typeof setTimeout)
  const controller = new AbortController()
  const started = Date.now()
  // The request timeout (a timer too) is set outside the backoff's 30-60 s window, so only the backoff counts.
  const client = createClient({ baseUrl: server.url, style: "openai", model: "m", timeoutMs: 300_000, retryBaseDelayMs: 60_000, retryDeadlineMs: 600_000 })
  const run = client.run("hi", { signal: controller.signal })
  await waitFor(() => backingOff, 5000, "the client to start its backoff wait")
  controller.abort(new Error("user canceled"))

  await t.rejects(run, { message: "user canceled" })
  t.ok(Date.now() - started < 10_000, "rejects long before the backoff ends")
  t.equal(server.requests.length, 1)
})

t.test("retries: no retry starts after retryDeadlineMs", async (t) => {
  const server = await modelServer(t, [
    { status: 503, text: "busy" },
    { status: 429, headers: { "retry-after": "5" }, json: { error: { message: "slow down" } } },
    DONE,
    DONE,
  ])
  // Backoff of 30-60 s cannot fit in 1 s: fail now instead of sleeping into the deadline.
  const slowBackoff = createClient({ baseUrl: server.url, style: "openai", model: "m", retryBaseDelayMs: 60_000, retryDeadlineMs: 1_000 })
  const started = Date.now()
  await t.rejects(slowBackoff.run("hi"), { status: 503, message: /^openai model endpoint answered 503 Service Unavailable: busy$/ })
  t.ok(Date.now() - started < 10_000, "gives up without waiting")
  t.equal(server.requests.length, 1)

  const client = createClient({ baseUrl: server.url, style: "openai", model: "m", retryDeadlineMs: 1_000, ...FAST_RETRY })
  await t.rejects(client.run("hi"), { status: 429, message: /answered 429 Too Many Requests: slow down; it asked to be retried in 5 s, past opts\.retryDeadlineMs$/ })
  t.equal(server.requests.length, 2, "a Retry-After past the deadline is not cut short")
})

t.test("the signal aborts a request in flight", async (t) => {
  const server = await modelServer(t, ["hang"])
  const controller = new AbortController()
  const started = Date.now()
  const running = createClient({ baseUrl: server.url, style: "openai", model: "m" }).run("hi", { signal: controller.signal })
  await waitFor(() => server.requests.length === 1, 5000, "the request to reach the model")
  controller.abort()
  await t.rejects(running, { name: "AbortError" })
  t.ok(Date.now() - started < 5_000, "rejects long before the 60 s timeout")
  t.equal(server.requests.length, 1)
})

t.test("an aborted signal stops the loop before the next turn and before tools", async (t) => {
  const controller = new AbortController()
  controller.abort(new Error("user canceled"))
  let calls = 0
  const client = createLocalClient(() => {
    calls++
    return "never"
  })
  await t.rejects(client.run("hi", { signal: controller.signal }), { message: "user canceled" })
  t.equal(calls, 0)

  const late = new AbortController()
  const toolCalls: Array<{ a: unknown; b: unknown }> = []
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(toolCalls)] })
  const aborting = createLocalClient(() => {
    late.abort()
    return { toolCalls: [{ name: "add", args: { a: 1, b: 1 } }] }
  })
  await t.rejects(aborting.run("hi", { toolkit, signal: late.signal }), { name: "AbortError" })
  t.same(toolCalls, [], "no tool ran after the abort")
})

t.test("timeoutMs bounds each request", async (t) => {
  const server = await modelServer(t, ["hang"])
  // Long enough for the request to reach the model on a loaded machine; it never answers.
  const client = createClient({ baseUrl: server.url, style: "anthropic", model: "m", timeoutMs: 1000 })
  await t.rejects(client.run("hi"), { message: /anthropic model did not answer within 1000 ms/ })
  t.equal(server.requests.length, 1, "a timeout is not retried")
})

t.test("maxTurns stops a model that keeps calling tools", async (t) => {
  let turns = 0
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool()] })
  const client = createLocalClient(
    () => {
      turns++
      return { toolCalls: [{ name: "add", args: { a: 1, b: 1 } }] }
    },
    { maxTurns: 3 },
  )
  await t.rejects(client.run("loop", { toolkit }), { message: /kept calling tools after 3 turns/ })
  t.equal(turns, 3)
})

t.test("createLocalClient: a function plays the model", async (t) => {
  const seen: Array<{ messages: ChatMessage[]; tools: string[] }> = []
  const respond: ModelFunction = ({ messages, tools }) => {
    seen.push({ messages, tools: tools.map((tool) => tool.name) })
    const last = messages[messages.length - 1]
    if (last.role === "user") return { toolCalls: [{ name: "add", args: { a: 40, b: 2 } }], usage: { inputTokens: 3 } }
    return { text: `The answer is ${last.content}`, usage: { inputTokens: 5, outputTokens: 4 } }
  }
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool()] })
  const result = await createLocalClient(respond, { systemPrompt: "You add." }).run("40 + 2?", { toolkit })

  t.equal(result.text, "The answer is 42")
  t.equal(result.model, "local")
  t.equal(result.turns, 2)
  t.same(result.usage, { inputTokens: 8, outputTokens: 4, totalTokens: 12 })
  t.same(seen[0].tools, ["add"])
  t.same(seen[0].messages, [
    { role: "system", content: "You add." },
    { role: "user", content: "40 + 2?" },
  ])
  const callId = result.toolCalls[0].id
  t.ok(callId, "a call without an id gets one")
  t.same(seen[1].messages.slice(2), [
    { role: "assistant", content: "", toolCalls: [{ id: callId, name: "add", args: { a: 40, b: 2 } }] },
    { role: "tool", content: "42", toolCallId: callId, isError: false },
  ])
})

t.test("without a toolkit, a tool call gets an error result", async (t) => {
  const client = createLocalClient(({ messages }) => {
    const last = messages[messages.length - 1]
    return last.role === "tool" ? last.content : { toolCalls: [{ id: "c1", name: "add", args: {} }] }
  })
  const result = await client.run("hi")
  t.match(result.text, /no toolkit/)
  t.equal(result.toolCalls[0].result.isError, true)
})

t.test("history reaches the model before the prompt", async (t) => {
  const server = await modelServer(t, [
    { json: { choices: [{ message: { content: "first" } }] } },
    { json: { choices: [{ message: { content: "second" } }] } },
  ])
  const client = createClient({ baseUrl: server.url, style: "openai", model: "m", systemPrompt: "sys" })
  const history: ChatMessage[] = [
    { role: "user", content: "My name is Ada." },
    { role: "assistant", content: "Hello Ada." },
  ]
  const first = await client.run("What is my name?", { history })
  t.same(server.requests[0].body.messages, [
    { role: "system", content: "sys" },
    { role: "user", content: "My name is Ada." },
    { role: "assistant", content: "Hello Ada." },
    { role: "user", content: "What is my name?" },
  ])

  await client.run("And again?", { history: first.messages })
  t.same(
    server.requests[1].body.messages.map((m) => m.content),
    ["sys", "My name is Ada.", "Hello Ada.", "What is my name?", "first", "And again?"],
    "a previous result's messages chain without repeating the system prompt",
  )
})

t.test("bad options throw naming the option", async (t) => {
  const good = { baseUrl: "http://127.0.0.1:1", style: "openai", model: "m" } as const
  t.throws(() => createClient({ ...good, baseUrl: "ftp://example.com" }), { message: /createClient: opts\.baseUrl should be an http\(s\) URL/ })
  t.throws(() => createClient({ ...good, baseUrl: "not a url" }), { message: /opts\.baseUrl/ })
  t.throws(() => createClient({ ...good, style: "gemini" as "openai" }), { message: /opts\.style should be "openai" or "anthropic"/ })
  t.throws(() => createClient({ ...good, model: "" }), { message: /opts\.model should be a non-empty string/ })
  t.throws(() => createClient({ ...good, maxTurns: 0 }), { message: /opts\.maxTurns should be a positive integer/ })
  t.throws(() => createClient({ ...good, timeoutMs: -5 }), { message: /opts\.timeoutMs/ })
  t.throws(() => createClient({ ...good, apiKey: "" }), { message: /opts\.apiKey/ })
  t.throws(() => createClient({ ...good, maxRetries: -1 }), { message: /opts\.maxRetries should be a non-negative integer, got -1/ })
  t.throws(() => createClient({ ...good, retryDeadlineMs: 1.5 }), { message: /opts\.retryDeadlineMs should be a non-negative integer/ })
  t.throws(() => createClient({ ...good, retryBaseDelayMs: "10" as unknown as number }), { message: /opts\.retryBaseDelayMs should be a non-negative integer/ })
  t.doesNotThrow(() => createClient({ ...good, maxRetries: 0, retryDeadlineMs: 0, retryBaseDelayMs: 0 }), "0 turns retrying off")
  t.throws(() => createLocalClient("nope" as unknown as ModelFunction), { message: /respond should be a function/ })
  t.throws(() => createLocalClient(() => "x", { maxTurns: 1.5 }), { message: /opts\.maxTurns/ })
})

t.test("an abort ends the run even when the model function or a tool ignores the signal", async (t) => {
  const never = new Promise<string>(() => {})
  const controller = new AbortController()
  const deaf = createLocalClient(() => never)
  const running = deaf.run("x", { signal: controller.signal })
  controller.abort(new Error("stop now"))
  await t.rejects(running, /stop now/)

  let toolRuns = false
  const stuck: Tool = { name: "stuck", description: "never returns", inputSchema: { type: "object" }, execute: () => ((toolRuns = true), never) }
  const toolkit = await createToolkit({ builtins: false, extraTools: [stuck] })
  const caller = createLocalClient(() => ({ toolCalls: [{ name: "stuck" }] }))
  const second = new AbortController()
  const withTool = caller.run("x", { toolkit, signal: second.signal })
  await waitFor(() => toolRuns, 5000, "the tool to run")
  second.abort(new Error("tool took too long"))
  await t.rejects(withTool, /tool took too long/)
})
