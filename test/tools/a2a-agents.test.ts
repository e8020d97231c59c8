import { Writable } from "node:stream"
import { pino } from "pino"
import t, { type Test } from "tap"
import { createLocalClient, type ModelFunction } from "../../lib/client/client.js"
import type { ChatMessage } from "../../lib/models/model.js"
import { toolName } from "../../lib/tools/a2a-agents.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import type { JsonObject } from "../../lib/types.js"
import { serve } from "../../plugins/serve.js"
import { callRpc, closedPort, localServer, RecordingStore, rpc, userMessage, waitFor } from "../fixtures/helpers.js"

/*
 * Other A2A agents as tools, against real toolnexus agents on 127.0.0.1: agent B serves a local model;
 * agent A (or a bare toolkit) uses B as a tool over each version and binding B's card (or a card we
 * write) offers.
 */

const SKILLS = [{ id: "sums", name: "Sums", description: "Adds numbers up.", tags: ["math"], examples: ["what is 2+2"] }]

/** The last user message a model was given. */
const lastUser = (messages: readonly ChatMessage[]) => messages.filter((m) => m.role === "user").at(-1)?.content ?? ""

/** Agent B: a toolnexus agent on 127.0.0.1 with a local model, a recording store and its request log lines kept. */
async function agentB(t: Test, respond: ModelFunction, a2a: JsonObject = {}, grpc?: string) {
  const store = new RecordingStore()
  const lines: Array<Record<string, unknown>> = []
  const logger = pino(
    { level: "info" },
    new Writable({
      write(chunk, _enc, done) {
        lines.push(JSON.parse(String(chunk)) as Record<string, unknown>)
        done()
      },
    }),
  )
  const agent = await serve("127.0.0.1:0", { client: createLocalClient(respond), a2a: { name: "helper desk", description: "Answers sums.", skills: SKILLS, store, ...a2a }, logger, ...(grpc && { grpc }) })
  t.teardown(() => agent.stop())
  /** The A2A calls B took: method, version, binding ("jsonrpc" when the log line names none). */
  const calls = () => lines.filter((l) => l.msg === "a2a request").map((l) => ({ method: l.method, version: l.version, binding: l.binding ?? "jsonrpc" }))
  return { ...agent, store, calls }
}

/** A card server: serves `card` at /card.json (and nothing else). */
async function cardServer(t: Test, card: JsonObject): Promise<string> {
  const url = await localServer(t, (req, res) => {
    if (req.url !== "/card.json") return void res.writeHead(404).end()
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(card))
  })
  return `${url}/card.json`
}

t.test("agent A uses agent B as a tool: B's answer reaches A's model's next turn and A's Task completes", async (t) => {
  const b = await agentB(t, ({ messages }) => `B says: ${lastUser(messages).length} characters in "${lastUser(messages)}"`)
  const toolkit = await createToolkit({ builtins: false, a2aAgents: [{ url: b.url }] })
  t.teardown(() => toolkit.close())
  const tool = toolkit.get("helper_desk")
  t.ok(tool, "the tool is named after B's card, made a valid tool name")
  t.match(tool!.description, /A2A agent "helper desk".*Answers sums\.\nIts skills:\n- Sums: Adds numbers up\. \(e\.g\. "what is 2\+2"\)/s)
  t.same(tool!.inputSchema.required, ["message"])

  const turns: ChatMessage[][] = []
  const a = await toolkit.serve("127.0.0.1:0", {
    client: createLocalClient(({ messages }) => {
      turns.push([...messages])
      if (!messages.some((m) => m.role === "tool")) return { toolCalls: [{ id: "c1", name: "helper_desk", args: { message: "what is 2+2" } }] }
      return `A heard: ${messages.find((m) => m.role === "tool")!.content}`
    }),
    a2a: { store: "memory" },
    logger: false,
  })
  const sent = await callRpc(a.url, rpc("SendMessage", { message: userMessage("ask B"), configuration: { blocking: true } }))
  t.equal(sent.result.status.state, "completed", "A's Task completes")
  t.equal(turns.length, 2, "A's model was asked twice: the tool call, then with B's answer")
  const toolMessage = turns[1].find((m) => m.role === "tool")!
  t.match(toolMessage.content, /^B says: 11 characters in "what is 2\+2"\n\n\(contextId "[^"]+": pass it to helper_desk to continue this conversation\.\)$/)
  t.notOk(toolMessage.isError)
  t.match(sent.result.artifacts[0].parts[0].text, /^A heard: B says: 11 characters/)
  t.same(b.calls().at(0), { method: "SendMessage", version: "1.0", binding: "jsonrpc" }, "B's card offers JSON-RPC 1.0 first: that is what A speaks")
  t.ok(b.calls().every((call) => call.version === "1.0"))
  const remote = b.store.saves.at(-1)!
  t.equal(remote.status.state, "completed")
  t.equal(remote.history![0].parts[0].kind === "text" && remote.history![0].parts[0].text, "what is 2+2", "B got the model's message")
})

t.test("each version and binding a card offers: 1.0 and 0.3, JSON-RPC and HTTP+JSON, and gRPC in 1.0", async (t) => {
  const b = await agentB(t, ({ messages }) => `answer to ${lastUser(messages)}`, {}, "127.0.0.1:0")
  const cards: Array<{ what: string; card: JsonObject; version: string; binding: string }> = [
    { what: "1.0 JSON-RPC", card: { name: "one", supportedInterfaces: [{ url: b.url, protocolBinding: "JSONRPC", protocolVersion: "1.0" }] }, version: "1.0", binding: "jsonrpc" },
    { what: "1.0 HTTP+JSON", card: { name: "two", supportedInterfaces: [{ url: b.url, protocolBinding: "HTTP+JSON", protocolVersion: "1.0.1" }] }, version: "1.0", binding: "rest" },
    { what: "1.0 gRPC", card: { name: "three", supportedInterfaces: [{ url: b.grpc, protocolBinding: "GRPC", protocolVersion: "1.0" }] }, version: "1.0", binding: "grpc" },
    { what: "0.3 JSON-RPC", card: { name: "four", url: b.url, protocolVersion: "0.3.0", preferredTransport: "JSONRPC" }, version: "0.3", binding: "jsonrpc" },
    {
      what: "0.3 HTTP+JSON (a 0.3 card's additional interface, its gRPC one skipped)",
      card: { name: "five", url: b.grpc, protocolVersion: "0.3.0", preferredTransport: "GRPC", additionalInterfaces: [{ url: b.url, transport: "HTTP+JSON" }] },
      version: "0.3",
      binding: "rest",
    },
    {
      what: "0.3 JSON-RPC listed in supportedInterfaces after an interface we do not speak",
      card: { name: "six", supportedInterfaces: [{ url: b.url, protocolBinding: "SOAP", protocolVersion: "1.0" }, { url: b.url, protocolBinding: "JSONRPC", protocolVersion: "0.3" }] },
      version: "0.3",
      binding: "jsonrpc",
    },
  ]
  for (const { what, card, version, binding } of cards) {
    const toolkit = await createToolkit({ builtins: false, a2aAgents: [{ url: await cardServer(t, card) }] })
    t.teardown(() => toolkit.close())
    const before = b.calls().length
    const first = await toolkit.execute(String(card.name), { message: `hello ${what}` })
    t.notOk(first.isError, `${what}: ${first.output}`)
    t.match(first.output, `answer to hello ${what}`, what)
    const contextId = /contextId "([^"]+)"/.exec(first.output)?.[1]
    t.ok(contextId, `${what}: the answer names its contextId`)
    const again = await toolkit.execute(String(card.name), { message: "and again", contextId })
    t.match(again.output, "answer to and again")
    t.equal(b.store.saves.at(-1)!.contextId, contextId, `${what}: a follow-up with the contextId continues B's context`)
    const calls = b.calls().slice(before)
    t.ok(calls.length >= 4, `${what}: sent twice and followed with GetTask`)
    t.ok(
      calls.every((call) => call.version === version && call.binding === binding),
      `${what}: every call in ${version} over ${binding}: ${JSON.stringify(calls)}`,
    )
  }
})

t.test("input-required: the agent's question is the tool's result, and a call with its taskId answers it", async (t) => {
  const b = await agentB(t, ({ messages }) => (lastUser(messages) === "weather please" ? { text: "Which city?", inputRequired: true } : `Sunny in ${lastUser(messages)}`))
  const toolkit = await createToolkit({ builtins: false, a2aAgents: [{ url: b.url, name: "weather" }] })
  t.teardown(() => toolkit.close())
  const asked = await toolkit.execute("weather", { message: "weather please" })
  t.notOk(asked.isError)
  t.match(asked.output, /it asks:\nWhich city\?\n\nTo answer, call weather again with your answer as message, taskId "([^"]+)" and contextId "([^"]+)"\./)
  const [, taskId, contextId] = /taskId "([^"]+)" and contextId "([^"]+)"/.exec(asked.output)!
  t.equal(b.store.saves.at(-1)!.status.state, "input-required")
  const answered = await toolkit.execute("weather", { message: "Paris", taskId, contextId })
  t.match(answered.output, /^Sunny in Paris/)
  const states = b.store.statesOf(taskId)
  t.same(states.slice(0, 3), ["submitted", "working", "input-required"])
  t.equal(states.at(-1), "completed", "the same remote Task was continued to its end")
})

t.test("canceling A's Task cancels the remote Task B runs for it", async (t) => {
  let bStarted = false
  const b = await agentB(t, ({ signal }) => {
    bStarted = true
    return new Promise<string>((_resolve, reject) => signal!.addEventListener("abort", () => reject(signal!.reason)))
  })
  const toolkit = await createToolkit({ builtins: false, a2aAgents: [{ url: b.url }] })
  t.teardown(() => toolkit.close())
  const a = await toolkit.serve("127.0.0.1:0", {
    client: createLocalClient(({ messages }) => (messages.some((m) => m.role === "tool") ? "done" : { toolCalls: [{ name: "helper_desk", args: { message: "take your time" } }] })),
    a2a: { store: "memory" },
    logger: false,
  })
  const sent = await callRpc(a.url, rpc("SendMessage", { message: userMessage("ask B slowly") }))
  await waitFor(() => bStarted && b.store.saves.some((s) => s.status.state === "working"), 10_000, "B's Task to be working")
  const remoteId = b.store.saves.at(-1)!.id
  const canceled = await callRpc(a.url, rpc("CancelTask", { id: sent.result.id }))
  t.equal(canceled.result.status.state, "canceled", "A's Task is canceled")
  await waitFor(() => b.store.statesOf(remoteId).includes("canceled"), 10_000, "B's Task to be canceled")
  t.equal((await callRpc(b.url, rpc("GetTask", { id: remoteId }))).result.status.state, "canceled", "B's Task reads canceled")
  t.ok(b.calls().some((call) => call.method === "CancelTask"), "A's tool sent CancelTask")
})

t.test("a remote failure, a refused connection and missing credentials are tool errors, not crashes", async (t) => {
  const secret = "b-secret-0123456789abcdef"
  const b = await agentB(t, ({ messages }) => {
    if (lastUser(messages) === "break") throw new Error("the model is down")
    return "fine"
  }, { auth: { tokens: { [secret]: "a" } } })
  const toolkit = await createToolkit({
    builtins: false,
    a2aAgents: [
      { url: b.url, name: "with key", headers: { authorization: `Bearer ${secret}` } },
      { url: b.url, name: "with key" },
    ],
  })
  t.teardown(() => toolkit.close())
  t.same(toolkit.tools().map((tool) => tool.name), ["with_key", "with_key_2"], "names are made valid and unique")
  t.same(await toolkit.execute("with_key", { message: "hi" }), { output: `fine\n\n(contextId "${b.store.saves.at(-1)!.contextId}": pass it to with_key to continue this conversation.)`, isError: false }, "headers go with every call")

  const unauthorized = await toolkit.execute("with_key_2", { message: "hi" })
  t.equal(unauthorized.isError, true)
  t.match(unauthorized.output, /^Tool with_key_2 failed: SendMessage answered error -32600: Unauthorized.*\(HTTP 401\): give the agent's headers \(such as authorization\)/)

  const failed = await toolkit.execute("with_key", { message: "break" })
  t.equal(failed.isError, true)
  t.match(failed.output, /^Tool with_key failed: the agent's task \S+ ended failed: The agent failed: the model is down/)

  await b.stop()
  const refused = await toolkit.execute("with_key", { message: "hi" })
  t.equal(refused.isError, true)
  t.match(refused.output, /^Tool with_key failed: POST http:\/\/127\.0\.0\.1:\d+\/ failed: ECONNREFUSED/)
})

t.test("createToolkit fails naming the agent when its card cannot be read or is not a card", async (t) => {
  const refused = `http://127.0.0.1:${await closedPort()}`
  await t.rejects(createToolkit({ a2aAgents: [{ url: refused }] }), {
    message: new RegExp(`^opts\\.a2aAgents\\[0\\] \\(${refused.replace(/\./g, "\\.")}\\): GET ${refused.replace(/\./g, "\\.")}/\\.well-known/agent-card\\.json failed: ECONNREFUSED`),
  })
  const nothing = await localServer(t, (_req, res) => void res.writeHead(404).end())
  await t.rejects(createToolkit({ a2aAgents: [{ url: `${nothing}/a2a` }] }), {
    message: `opts.a2aAgents[0] (${nothing}/a2a): no agent card at ${nothing}/a2a/.well-known/agent-card.json (404), ${nothing}/a2a/.well-known/agent.json (HTTP 404): give the agent's base URL or its card's URL`,
  })
  const notACard = await cardServer(t, { hello: "world" })
  await t.rejects(createToolkit({ a2aAgents: [{ url: notACard }] }), { message: /is not an agent card: it has no name; give the agent's base URL or its card's URL/ })
  const noInterface = await cardServer(t, { name: "x", supportedInterfaces: [{ url: "x:1", protocolBinding: "GRPC", protocolVersion: "0.3" }] })
  await t.rejects(createToolkit({ a2aAgents: [{ url: noInterface }] }), { message: /offers no interface we speak \(it offers GRPC 0\.3; we speak JSONRPC, HTTP\+JSON, GRPC/ })
  await t.rejects(createToolkit({ a2aAgents: [{ url: "ftp://x" }] }), { message: /^opts\.a2aAgents\[0\] \(ftp:\/\/x\): should be an http\(s\) URL/ })
  await t.rejects(createToolkit({ a2aAgents: [{ url: 42 as never }] }), { message: "opts.a2aAgents[0].url should be the agent's base URL or its card's URL" })
  await t.rejects(createToolkit({ a2aAgents: [{ url: refused, timeoutMs: 0 }] }), { message: /timeoutMs should be a whole number/ })
  const refusals: Array<[unknown, RegExp]> = [
    ["http://x", /^opts\.a2aAgents should be an array of \{ url, name\?, headers\? \}$/],
    [[null], /^opts\.a2aAgents\[0\] should be \{ url, name\?, headers\? \}$/],
    [[{ url: refused, name: "" }], /^opts\.a2aAgents\[0\]\.name should be a non-empty string$/],
    [[{ url: refused, headers: { authorization: 1 } }], /^opts\.a2aAgents\[0\]\.headers should be an object of header names to string values$/],
    [[{ url: refused, headers: null }], /headers should be an object/],
    [[{ url: refused, taskTimeoutMs: 1.5 }], /^opts\.a2aAgents\[0\]\.taskTimeoutMs should be a whole number of ms, 1 or more$/],
  ]
  for (const [a2aAgents, message] of refusals) await t.rejects(createToolkit({ a2aAgents: a2aAgents as never }), { message }, JSON.stringify(a2aAgents))
})

t.test("toolName keeps what both model APIs take", async (t) => {
  t.equal(toolName("helper desk"), "helper_desk")
  t.equal(toolName("Ünïcode agent!"), "n_code_agent")
  t.equal(toolName("!!!"), "a2a_agent")
  t.equal(toolName("x".repeat(80)).length, 64)
})
