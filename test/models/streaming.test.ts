import type { IncomingHttpHeaders, ServerResponse } from "node:http"
import t, { type Test } from "tap"
import { createClient, createLocalClient, type ClientOptions } from "../../lib/client/client.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import { addTool, deferred, localServer, modelServer, waitFor } from "../fixtures/helpers.js"

/*
 * Streamed model answers (RunOptions.onText) against fake OpenAI and Anthropic
 * endpoints that write text/event-stream one chunk at a time, each write
 * flushed before the next, so the client sees them arrive apart.
 */

const KEY = "sk-stream-0123456789abcdef"
const FAST_RETRY = { retryBaseDelayMs: 1 } as const

/** One request the streaming endpoint took, and whether the client hung up before its answer ended. */
interface Received {
  body: any
  headers: IncomingHttpHeaders
  abandoned: boolean
}

/** The endpoint's side of one answer. */
interface Answer {
  /** Starts a 200 text/event-stream answer, unless it has begun. */
  open(): void
  /** Writes one chunk and waits until it is flushed to the socket. */
  send(text: string): Promise<void>
  end(): void
  /** Cuts the connection mid-answer, as a crashed proxy would. */
  cut(): void
  json(status: number, body: unknown): void
  /** Resolves when the client has gone away. */
  closed: Promise<void>
}

async function streamServer(t: Test, handle: (answer: Answer, request: Received, n: number) => void | Promise<void>) {
  const requests: Received[] = []
  const url = await localServer(t, (req, res) => {
    let raw = ""
    req.setEncoding("utf8")
    req.on("data", (chunk: string) => (raw += chunk))
    req.on("end", () => {
      const request: Received = { body: JSON.parse(raw), headers: req.headers, abandoned: false }
      requests.push(request)
      const closed = new Promise<void>((resolve) => res.on("close", resolve))
      res.on("close", () => (request.abandoned = !res.writableEnded))
      Promise.resolve(handle(answerOn(res, closed), request, requests.length)).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" })
        res.end(`the fake streaming endpoint failed: ${String(err)}`)
      })
    })
  })
  return { url, requests }
}

function answerOn(res: ServerResponse, closed: Promise<void>): Answer {
  return {
    open() {
      if (res.headersSent) return
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" })
      res.flushHeaders()
    },
    send: (text) => new Promise<void>((resolve, reject) => res.write(text, (err) => (err ? reject(err) : resolve()))),
    end: () => res.end(),
    cut: () => res.socket?.destroy(),
    json(status, body) {
      res.writeHead(status, { "content-type": "application/json" })
      res.end(JSON.stringify(body))
    },
    closed,
  }
}

/** Opens the answer (if it was not) and sends each chunk, one write each. */
async function stream(answer: Answer, chunks: string[]): Promise<void> {
  answer.open()
  for (const chunk of chunks) await answer.send(chunk)
}

// OpenAI chat.completion.chunk events
const chunk = (delta: object, extra: object = {}) => `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`
const text = (content: string) => chunk({ content })
const role = chunk({ role: "assistant", content: "" })
const usage = (prompt: number, completion: number) => `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } })}\n\n`
const DONE = "data: [DONE]\n\n"
const openAIStream = (...parts: string[]) => [role, ...parts.map(text), usage(3, parts.length), DONE]

// Anthropic Messages API events
const event = (type: string, payload: object = {}) => `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`
const messageStart = (inputTokens: number) => event("message_start", { message: { id: "msg_1", role: "assistant", content: [], usage: { input_tokens: inputTokens, output_tokens: 1 } } })
const textStart = (index: number) => event("content_block_start", { index, content_block: { type: "text", text: "" } })
const textDelta = (index: number, piece: string) => event("content_block_delta", { index, delta: { type: "text_delta", text: piece } })
const blockStop = (index: number) => event("content_block_stop", { index })
const messageEnd = (outputTokens: number, stopReason = "end_turn", usage: object = {}) => [
  event("message_delta", { delta: { stop_reason: stopReason }, usage: { output_tokens: outputTokens, ...usage } }),
  event("message_stop"),
]
const anthropicStream = (...parts: string[]) => [messageStart(5), textStart(0), ...parts.map((piece) => textDelta(0, piece)), blockStop(0), ...messageEnd(parts.length)]

/** What onText was given, with each piece's turn. */
function listener() {
  const heard: Array<[string, number]> = []
  const onText = (delta: string, info: { turn: number }) => void heard.push([delta, info.turn])
  return { heard, onText, text: () => heard.map(([delta]) => delta).join("") }
}

const openai = (url: string, opts: Partial<ClientOptions> = {}) => createClient({ baseUrl: url, style: "openai", model: "gpt-test", apiKey: KEY, ...opts })
const anthropic = (url: string, opts: Partial<ClientOptions> = {}) => createClient({ baseUrl: url, style: "anthropic", model: "claude-test", apiKey: KEY, ...opts })

t.test("openai: the deltas reach onText in order and make the answer; usage comes from the last chunk", async (t) => {
  const server = await streamServer(t, async (answer) => {
    await stream(answer, [role, text("The "), text("answer "), text("is 42."), chunk({}, { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }), usage(11, 4), DONE])
    answer.end()
  })
  const { heard, onText } = listener()
  const result = await openai(server.url).run("What is it?", { onText })

  t.same(heard, [["The ", 1], ["answer ", 1], ["is 42.", 1]])
  t.equal(result.text, "The answer is 42.")
  t.same(result.usage, { inputTokens: 11, outputTokens: 4, totalTokens: 15 })
  t.equal(result.turns, 1)
  t.equal(server.requests[0].body.stream, true, "the request asks for a stream")
  t.same(server.requests[0].body.stream_options, { include_usage: true }, "and for the usage chunk")
  t.equal(server.requests[0].headers.authorization, `Bearer ${KEY}`)
})

t.test("openai: onText has the first delta before the endpoint has sent the rest", async (t) => {
  const firstSeen = deferred()
  let restSent = false
  const server = await streamServer(t, async (answer) => {
    await stream(answer, [role, text("Hello")])
    await firstSeen.promise // the rest waits for the test to have seen the first delta
    restSent = true
    await stream(answer, [text(", world"), usage(1, 2), DONE])
    answer.end()
  })
  const sentAtDelta: boolean[] = []
  const result = await openai(server.url).run("hi", {
    onText() {
      sentAtDelta.push(restSent)
      firstSeen.resolve()
    },
  })

  t.same(sentAtDelta, [false, true], "the first delta came while the endpoint still held the rest")
  t.equal(result.text, "Hello, world")
})

t.test("openai: tool-call deltas split across chunks and interleaved by index make whole calls, and the loop goes on", async (t) => {
  const call = (index: number, fn: object, id?: string) => chunk({ tool_calls: [{ index, ...(id && { id, type: "function" }), function: fn }] })
  const server = await streamServer(t, async (answer, _request, n) => {
    if (n === 1) {
      await stream(answer, [
        role,
        text("Let me add. "),
        call(0, { name: "add", arguments: "" }, "call_a"),
        call(1, { name: "add", arguments: '{"a":' }, "call_b"),
        call(0, { arguments: '{"a": 2, "b' }), // cut inside the key "b"
        chunk({ tool_calls: [{ index: 1, function: { arguments: '10,"b":' } }, { index: 0, function: { arguments: '": 3' } }] }),
        call(1, { arguments: "5}" }),
        call(0, { arguments: "}" }),
        chunk({}, { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }),
        usage(10, 5),
        DONE,
      ])
    } else {
      await stream(answer, [role, text("2 + 3 = 5"), text(" and 10 + 5 = 15"), usage(20, 2), DONE])
    }
    answer.end()
  })
  const calls: Array<{ a: unknown; b: unknown }> = []
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(calls)] })
  const { heard, onText } = listener()
  const result = await openai(server.url).run("2+3 and 10+5?", { toolkit, onText })

  t.same(calls, [{ a: 2, b: 3 }, { a: 10, b: 5 }], "both tools ran with their whole arguments")
  t.same(
    result.toolCalls.map(({ id, name, args, result }) => [id, name, args, result.output]),
    [
      ["call_a", "add", { a: 2, b: 3 }, "5"],
      ["call_b", "add", { a: 10, b: 5 }, "15"],
    ],
  )
  t.same(heard, [["Let me add. ", 1], ["2 + 3 = 5", 2], [" and 10 + 5 = 15", 2]], "each delta carries its turn")
  t.equal(result.text, "2 + 3 = 5 and 10 + 5 = 15", "the final text is the last turn's only")
  t.equal(result.turns, 2)
  t.same(result.usage, { inputTokens: 30, outputTokens: 7, totalTokens: 37 })
  t.same(server.requests[1].body.messages.slice(1, 4), [
    {
      role: "assistant",
      content: "Let me add. ",
      tool_calls: [
        { id: "call_a", type: "function", function: { name: "add", arguments: '{"a":2,"b":3}' } },
        { id: "call_b", type: "function", function: { name: "add", arguments: '{"a":10,"b":5}' } },
      ],
    },
    { role: "tool", tool_call_id: "call_a", content: "5" },
    { role: "tool", tool_call_id: "call_b", content: "15" },
  ], "the assembled calls go back to the model")
})

t.test("openai: a server that leaves out the index sends one call at a time; broken arguments reach the model as an error result", async (t) => {
  const server = await streamServer(t, async (answer, _request, n) => {
    const piece = (fn: object, id?: string) => chunk({ tool_calls: [{ ...(id && { id }), function: fn }] })
    if (n === 1) {
      await stream(answer, [
        piece({ name: "add", arguments: '{"a":1,' }, "c1"),
        piece({ arguments: '"b":1}' }, "c1"), // the same id again: still the first call
        piece({ name: "add", arguments: '{"a": 2' }, "c2"),
        DONE,
      ])
    } else {
      await stream(answer, [text("ok"), DONE])
    }
    answer.end()
  })
  const calls: Array<{ a: unknown; b: unknown }> = []
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(calls)] })
  const result = await openai(server.url).run("add", { toolkit, onText: () => {} })

  t.same(calls, [{ a: 1, b: 1 }], "the whole call ran")
  t.same(result.toolCalls.map((call) => call.id), ["c1", "c2"])
  t.match(result.toolCalls[1].result, { isError: true, output: /arguments were not valid JSON/ }, "the broken one did not run")
  t.same(result.usage, { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, "no usage chunk counts as 0")
})

t.test("anthropic: text deltas stream, input_json_delta pieces make the tool input; ping, thinking and unknown events are skipped", async (t) => {
  const server = await streamServer(t, async (answer, _request, n) => {
    if (n === 1) {
      await stream(answer, [
        messageStart(12),
        event("ping"),
        textStart(0),
        textDelta(0, "Adding"),
        textDelta(0, " up."),
        blockStop(0),
        event("content_block_start", { index: 1, content_block: { type: "tool_use", id: "toolu_1", name: "add", input: {} } }),
        event("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: "" } }),
        event("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: '{"a": 1, "b' } }),
        event("some_future_event", { detail: "skipped" }),
        event("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: '": 2}' } }),
        blockStop(1),
        event("content_block_start", { index: 2, content_block: { type: "tool_use", id: "toolu_2", name: "add", input: { a: 5, b: 5 } } }),
        blockStop(2),
        ...messageEnd(8, "tool_use", { input_tokens: null }), // a null count does not wipe message_start's
      ])
    } else {
      await stream(answer, [
        messageStart(20),
        event("content_block_start", { index: 0, content_block: { type: "thinking", thinking: "" } }),
        event("content_block_delta", { index: 0, delta: { type: "thinking_delta", thinking: "not for the caller" } }),
        blockStop(0),
        textStart(1),
        textDelta(1, "3"),
        textDelta(1, " and 10"),
        blockStop(1),
        ...messageEnd(2, "end_turn", { input_tokens: 20 }), // the total again, not an increment
      ])
    }
    answer.end()
  })
  const calls: Array<{ a: unknown; b: unknown }> = []
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool(calls)] })
  const { heard, onText } = listener()
  const result = await anthropic(server.url).run("1+2 and 5+5?", { toolkit, onText })

  t.same(calls, [{ a: 1, b: 2 }, { a: 5, b: 5 }], "the JSON pieces made the input; an input sent whole in the start is taken as is")
  t.same(heard, [["Adding", 1], [" up.", 1], ["3", 2], [" and 10", 2]])
  t.equal(result.text, "3 and 10")
  t.same(result.usage, { inputTokens: 32, outputTokens: 10, totalTokens: 42 }, "input from message_start, output from message_delta")
  t.equal(server.requests[0].body.stream, true)
  t.notOk("stream_options" in server.requests[0].body, "stream_options is OpenAI's")
  t.equal(server.requests[0].headers["x-api-key"], KEY)
  t.same(server.requests[1].body.messages[1], {
    role: "assistant",
    content: [
      { type: "text", text: "Adding up." },
      { type: "tool_use", id: "toolu_1", name: "add", input: { a: 1, b: 2 } },
      { type: "tool_use", id: "toolu_2", name: "add", input: { a: 5, b: 5 } },
    ],
  })
})

t.test("an endpoint that ignores stream and answers JSON is read as before, its text given to onText once", async (t) => {
  const server = await streamServer(t, (answer, request) => {
    if (request.body.max_tokens !== undefined) answer.json(200, { content: [{ type: "text", text: "whole " }, { type: "text", text: "answer" }], usage: { input_tokens: 2, output_tokens: 3 } })
    else answer.json(200, { choices: [{ message: { content: "whole answer" } }], usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } })
  })
  for (const client of [openai(server.url), anthropic(server.url)]) {
    const { heard, onText } = listener()
    const result = await client.run("hi", { onText })
    t.equal(result.text, "whole answer")
    t.same(heard, [["whole answer", 1]])
    t.same(result.usage, { inputTokens: 2, outputTokens: 3, totalTokens: 5 })
  }
  t.same(
    server.requests.map((request) => request.body.stream),
    [true, true],
    "both asked for a stream",
  )
})

t.test("an endpoint that refuses streamed requests (400) is asked whole, and whole from then on; a 400 on both fails with its words", async (t) => {
  let refuseAll = false
  const server = await streamServer(t, (answer, request) => {
    if (refuseAll) return answer.json(400, { error: { message: "prompt is too long" } })
    if (request.body.stream === true) return answer.json(400, { error: { message: "Unrecognized request argument supplied: stream_options" } })
    if (request.body.max_tokens !== undefined) return answer.json(200, { content: [{ type: "text", text: "whole" }] })
    answer.json(200, { choices: [{ message: { content: "whole" } }] })
  })
  for (const client of [openai(server.url), anthropic(server.url)]) {
    const { heard, onText } = listener()
    t.equal((await client.run("hi", { onText })).text, "whole")
    t.same(heard, [["whole", 1]], "the whole answer reaches onText once")
    t.equal((await client.run("again", { onText })).text, "whole")
  }
  t.same(
    server.requests.map((request) => request.body.stream ?? false),
    [true, false, false, true, false, false],
    "each client asked for a stream once, then whole",
  )
  refuseAll = true
  await t.rejects(openai(server.url).run("long", { onText: () => {} }), /answered 400.*prompt is too long/, "a refusal that is not about streaming keeps its words")
})

t.test("without onText the requests are what they were: no stream field", async (t) => {
  const server = await modelServer(t, [{ json: { choices: [{ message: { content: "A" } }] } }, { json: { content: [{ type: "text", text: "B" }] } }])
  t.equal((await openai(server.url).run("hi")).text, "A")
  t.equal((await anthropic(server.url).run("hi")).text, "B")
  t.same(server.requests[0].body, { model: "gpt-test", messages: [{ role: "user", content: "hi" }] })
  t.same(server.requests[1].body, { model: "claude-test", max_tokens: 4096, messages: [{ role: "user", content: "hi" }] })
})

t.test("retries: a 503 before any byte of the stream is retried", async (t) => {
  const server = await streamServer(t, async (answer, _request, n) => {
    if (n === 1) return answer.json(503, { error: { message: "overloaded" } })
    await stream(answer, openAIStream("fine"))
    answer.end()
  })
  const { heard, onText } = listener()
  const result = await openai(server.url, FAST_RETRY).run("hi", { onText })

  t.equal(result.text, "fine")
  t.same(heard, [["fine", 1]])
  t.equal(server.requests.length, 2)
  t.same(server.requests[1].body, server.requests[0].body, "the retry sends the same request")
})

t.test("retries: a stream cut before any of its text reached onText is retried; the caller hears the text once", async (t) => {
  const server = await streamServer(t, async (answer, _request, n) => {
    if (n === 1) {
      await stream(answer, [role])
      return answer.cut()
    }
    await stream(answer, openAIStream("second ", "try"))
    answer.end()
  })
  const { heard, onText } = listener()
  const result = await openai(server.url, FAST_RETRY).run("hi", { onText })
  t.equal(result.text, "second try")
  t.same(heard, [["second ", 1], ["try", 1]])
  t.equal(server.requests.length, 2, "the cut stream was retried")

  // An error event is the provider's own word that the answer failed; before any text, a retry is still safe.
  const server2 = await streamServer(t, async (answer, _request, n) => {
    if (n === 1) await stream(answer, [messageStart(1), event("error", { error: { type: "overloaded_error", message: "Overloaded" } })])
    else await stream(answer, anthropicStream("after ", "the error"))
    answer.end()
  })
  const second = listener()
  const answered = await anthropic(server2.url, FAST_RETRY).run("hi", { onText: second.onText })
  t.equal(answered.text, "after the error")
  t.same(second.heard, [["after ", 1], ["the error", 1]])
  t.equal(server2.requests.length, 2, "the error event before any text was retried")
})

t.test("a connection cut after a delta is not retried, and the error says the answer broke off", async (t) => {
  const server = await streamServer(t, async (answer) => {
    await stream(answer, [role, text("Hel")])
    answer.cut()
  })
  const { heard, onText } = listener()
  const err = (await openai(server.url, FAST_RETRY).run("hi", { onText }).catch((e: unknown) => e)) as Error

  t.match(err.message, /^The openai model's answer broke off after streaming had begun \(other side closed\); not retried, since the text already streamed would be said twice$/)
  t.equal(server.requests.length, 1, "one request: no retry")
  t.same(heard, [["Hel", 1]])
})

t.test("an error event after a delta names the provider and its words, never the key", async (t) => {
  const server = await streamServer(t, async (answer, _request, n) => {
    if (n === 1) await stream(answer, [messageStart(1), textStart(0), textDelta(0, "Sure"), event("error", { error: { type: "api_error", message: `internal failure for key ${KEY}` } })])
    else await stream(answer, [role, text("It"), chunk({}, { choices: [], error: { message: `quota gone for ${KEY}` } })])
    answer.end()
  })
  const fromAnthropic = (await anthropic(server.url, FAST_RETRY).run("hi", { onText: () => {} }).catch((e: unknown) => e)) as Error
  t.match(fromAnthropic.message, /^The anthropic model's answer broke off after streaming had begun \(it sent an error: internal failure for key \[redacted\]\)/)
  t.notMatch(fromAnthropic.message, KEY)

  const fromOpenAI = (await openai(server.url, { ...FAST_RETRY, headers: { authorization: `Bearer ${KEY}` } }).run("hi", { onText: () => {} }).catch((e: unknown) => e)) as Error
  t.match(fromOpenAI.message, /^The openai model's answer broke off after streaming had begun \(it sent an error: quota gone for \[redacted\]\)/)
  t.notMatch(fromOpenAI.message, KEY)
  t.equal(server.requests.length, 2, "neither was retried")
})

t.test("a stream that ends without [DONE] or message_stop, or with a chunk that is not JSON, is an error", async (t) => {
  const server = await streamServer(t, async (answer, request, n) => {
    if (n === 3) await stream(answer, [role, text("half"), "data: {not json\n\n"])
    else if (request.body.max_tokens !== undefined) await stream(answer, [messageStart(1), textStart(0), textDelta(0, "half"), blockStop(0)])
    else await stream(answer, [role, text("half"), usage(1, 1)])
    answer.end()
  })
  await t.rejects(openai(server.url, FAST_RETRY).run("hi", { onText: () => {} }), {
    message: /^The openai model's answer broke off after streaming had begun \(the stream ended before \[DONE\]\)/,
  })
  await t.rejects(anthropic(server.url, FAST_RETRY).run("hi", { onText: () => {} }), {
    message: /^The anthropic model's answer broke off after streaming had begun \(the stream ended before message_stop\)/,
  })
  await t.rejects(openai(server.url, FAST_RETRY).run("hi", { onText: () => {} }), {
    message: /broke off after streaming had begun \(it sent an event that is not a JSON object: \{not json\)/,
  })
  t.equal(server.requests.length, 3, "none was retried")
})

t.test("a stream that ends short before any text is retried, then named with the attempts", async (t) => {
  const server = await streamServer(t, async (answer) => {
    await stream(answer, [role])
    answer.end()
  })
  await t.rejects(openai(server.url, { ...FAST_RETRY, maxRetries: 2 }).run("hi", { onText: () => {} }), {
    message: /^The openai model's streamed answer broke off before any text \(the stream ended before \[DONE\]\) after 3 attempts$/,
  })
  t.equal(server.requests.length, 3)
})

t.test("the signal aborts a stream in flight at once", async (t) => {
  const server = await streamServer(t, async (answer) => {
    await stream(answer, [role, text("partial")])
    await answer.closed // holds the rest until the client hangs up
  })
  const controller = new AbortController()
  const started = Date.now()
  const running = openai(server.url).run("hi", {
    signal: controller.signal,
    onText: () => controller.abort(new Error("user stopped it")),
  })

  await t.rejects(running, { message: "user stopped it" })
  t.ok(Date.now() - started < 5_000, "long before the 60 s timeout")
  await waitFor(() => server.requests[0].abandoned, 5000, "the endpoint to see the client hang up")
  t.equal(server.requests.length, 1, "an abort is not retried")
})

t.test("timeoutMs: a stall between chunks fails the turn; a stall before any text too; neither is retried", async (t) => {
  const server = await streamServer(t, async (answer, _request, n) => {
    await stream(answer, n === 1 ? [role, text("start")] : [role])
    await answer.closed // never sends more
  })
  const { heard, onText } = listener()
  await t.rejects(openai(server.url, { timeoutMs: 500, ...FAST_RETRY }).run("hi", { onText }), {
    message: /^The openai model's answer broke off after streaming had begun \(nothing came for 500 ms\); not retried, .*; raise opts\.timeoutMs if it is just slow$/,
  })
  t.same(heard, [["start", 1]])
  await t.rejects(openai(server.url, { timeoutMs: 500, ...FAST_RETRY }).run("hi", { onText }), {
    message: /^The openai model's streamed answer broke off before any text \(nothing came for 500 ms\); raise opts\.timeoutMs if it is just slow$/,
  })
  t.equal(server.requests.length, 2)
})

t.test("timeoutMs: a stream whose chunks keep coming may last longer than timeoutMs", async (t) => {
  const timeoutMs = 1000
  const server = await streamServer(t, async (answer) => {
    // The timer is the thing under test: chunks 200 ms apart (a fifth of the idle timeout) for 1.6 timeouts.
    answer.open()
    const started = Date.now()
    while (Date.now() - started < timeoutMs * 1.6) {
      await answer.send(text("."))
      await new Promise((resolve) => setTimeout(resolve, timeoutMs / 5))
    }
    await stream(answer, [text("done"), DONE])
    answer.end()
  })
  const started = Date.now()
  const result = await openai(server.url, { timeoutMs }).run("hi", { onText: () => {} })
  t.match(result.text, /^\.+done$/)
  t.ok(Date.now() - started >= timeoutMs * 1.6, "the answer took longer than timeoutMs")
})

t.test("a listener that throws, or rejects, does not break the run", async (t) => {
  const server = await streamServer(t, async (answer) => {
    await stream(answer, openAIStream("still ", "fine"))
    answer.end()
  })
  let calls = 0
  const result = await openai(server.url).run("hi", {
    onText() {
      calls++
      throw new Error("the listener broke")
    },
  })
  t.equal(result.text, "still fine")
  t.equal(calls, 2, "it was called for every delta all the same")

  const local = createLocalClient(() => "whole")
  const rejected: string[] = []
  const again = await local.run("hi", {
    // An async listener is what this case is about: its rejection must not go unhandled.
    // eslint-disable-next-line @typescript-eslint/no-misused-promises
    onText: async (delta) => {
      rejected.push(delta)
      throw new Error("async listener broke")
    },
  })
  t.equal(again.text, "whole")
  t.same(rejected, ["whole"])
  await t.rejects(local.run("hi", { onText: "nope" as unknown as () => void }), { message: /run: opts\.onText should be a function/ })
})

t.test("createLocalClient: a model function may stream an async iterable of text chunks", async (t) => {
  async function* chunks(...pieces: string[]): AsyncGenerator<string> {
    for (const piece of pieces) yield piece
  }
  const streaming = createLocalClient(() => chunks("Hel", "", "lo"))
  const { heard, onText } = listener()
  const result = await streaming.run("hi", { onText })
  t.equal(result.text, "Hello")
  t.same(heard, [["Hel", 1], ["lo", 1]], "each chunk as it came; an empty one is not handed on")
  t.same(result.toolCalls, [])
  t.equal((await streaming.run("hi")).text, "Hello", "without onText the chunks still make the answer")

  const promised = createLocalClient(async () => chunks("from ", "a promise"))
  t.equal((await promised.run("hi", { onText: () => {} })).text, "from a promise")

  const notText = createLocalClient(() => chunks("a", 5 as unknown as string))
  await t.rejects(notText.run("hi"), { name: "TypeError", message: /chunks should be strings, got number/ })
})

t.test("createLocalClient: a whole answer reaches onText once per turn, with the turn", async (t) => {
  const toolkit = await createToolkit({ builtins: false, extraTools: [addTool()] })
  const client = createLocalClient(({ messages }) =>
    messages.at(-1)?.role === "user" ? { text: "Checking.", toolCalls: [{ name: "add", args: { a: 1, b: 1 } }] } : { text: "" },
  )
  const { heard, onText } = listener()
  const result = await client.run("1+1?", { toolkit, onText })
  t.same(heard, [["Checking.", 1]], "an empty answer gives onText nothing")
  t.equal(result.text, "")
  t.equal(result.turns, 2)
})

t.test("createLocalClient: an abort stops reading the chunks; none after it reaches onText", async (t) => {
  let finished = false
  async function* chunks(): AsyncGenerator<string> {
    try {
      yield "a"
      yield "b"
      yield "c"
    } finally {
      finished = true
    }
  }
  const controller = new AbortController()
  const { heard } = listener()
  const client = createLocalClient(() => chunks())
  const running = client.run("hi", {
    signal: controller.signal,
    onText(delta, info) {
      heard.push([delta, info.turn])
      controller.abort(new Error("enough"))
    },
  })
  await t.rejects(running, { message: "enough" })
  await waitFor(() => finished, 5000, "the model function's generator to be closed")
  t.same(heard, [["a", 1]])
})
