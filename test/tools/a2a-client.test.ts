import t, { type Test } from "tap"
import { chooseEndpoint, fetchAgentCard } from "../../lib/a2a-client/card.js"
import { grpcTransport } from "../../lib/a2a-client/grpc.js"
import { callJson } from "../../lib/a2a-client/http.js"
import { jsonRpcTransport } from "../../lib/a2a-client/jsonrpc.js"
import { connectRemoteAgent } from "../../lib/a2a-client/remote-agent.js"
import { readSendResult, readTask } from "../../lib/a2a-client/remote-task.js"
import { restTransport } from "../../lib/a2a-client/rest.js"
import { createLocalClient } from "../../lib/client/client.js"
import { answerText, describeAgent } from "../../lib/tools/a2a-agents.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import type { JsonObject } from "../../lib/types.js"
import { serve } from "../../plugins/serve.js"
import { deferred, localServer, RecordingStore, waitFor } from "../fixtures/helpers.js"

/*
 * The A2A client's parts on their own: the readers of every answer shape, the card's interface choice, and
 * the calls' edges (timeouts, aborts, late cancels, closing), against scripted agents on 127.0.0.1.
 */

const HTTP = { headers: {}, timeoutMs: 5000 }

/** A scripted JSON-RPC agent: answers each call with `answer(method, params)`, records the calls and their headers. */
async function scriptedAgent(t: Test, answer: (method: string, params: JsonObject) => unknown) {
  const calls: Array<{ method: string; params: JsonObject; headers: Record<string, unknown> }> = []
  const url = await localServer(t, (req, res) => {
    let raw = ""
    req.on("data", (chunk: Buffer) => (raw += String(chunk)))
    req.on("end", () => {
      void (async () => {
        const body = JSON.parse(raw) as { id: string; method: string; params: JsonObject }
        calls.push({ method: body.method, params: body.params, headers: req.headers })
        const result = await answer(body.method, body.params)
        if (!res.destroyed) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: body.id, result }))
      })()
    })
  })
  return { url: `${url}/`, calls }
}

const task = (state: string, extra: JsonObject = {}) => ({ id: "t-1", contextId: "c-1", status: { state }, ...extra })

t.test("readTask and readSendResult read every version's and binding's shapes", async (t) => {
  t.match(readTask({ id: "a", status: { state: "TASK_STATE_CANCELLED" } }), { state: "canceled" }, "0.3 REST spells it CANCELLED")
  t.match(readTask({ id: "a", status: { state: "TASK_STATE_INPUT_REQUIRED" } }), { state: "input-required" })
  t.match(readTask({ id: "a", status: { state: "what" } }), { state: "unknown", contextId: undefined, statusText: "", artifactText: "" })
  t.match(readTask({ id: "a", status: {} }), { state: "unknown" })
  const parts = [
    { text: "one " },
    { kind: "data", data: { n: 1 } },
    { kind: "file", file: { name: "a.txt", uri: "http://x/a.txt" } },
    { url: "http://x/b", filename: "b.png" },
    { file: { fileWithUri: "http://x/c" } },
    { raw: "AAAA" },
    "not a part",
  ]
  t.equal(readTask({ id: "a", status: { state: "completed" }, artifacts: [{ parts }, { parts: [] }] }).artifactText, 'one {"n":1}[file a.txt at http://x/a.txt][file b.png at http://x/b][file at http://x/c][file]')
  const history = [
    { role: "ROLE_AGENT", parts: [{ text: "first" }] },
    { role: "ROLE_USER", parts: [{ text: "mine" }] },
    { role: "ROLE_AGENT", content: [{ text: "last, 0.3 REST" }] },
  ]
  t.equal(readTask({ id: "a", status: { state: "completed" }, history }).lastAgentText, "last, 0.3 REST")
  t.throws(() => readTask({ status: {} }), /the agent answered something that is not a Task: \{"status":\{\}\}/)
  t.throws(() => readTask("nope"), /not a Task/)

  t.same(readSendResult({ message: { contextId: "c", taskId: "", parts: [{ text: "hi" }] } }), { kind: "message", contextId: "c", taskId: undefined, text: "hi" }, "1.0 {message}")
  t.same(readSendResult({ msg: { content: [{ text: "hi" }] } }), { kind: "message", contextId: undefined, taskId: undefined, text: "hi" }, "0.3 REST {msg}")
  t.same(readSendResult({ kind: "message", taskId: "t", parts: [{ kind: "text", text: "hi" }] }), { kind: "message", contextId: undefined, taskId: "t", text: "hi" }, "0.3 bare message")
  t.match(readSendResult({ task: task("TASK_STATE_WORKING") }), { kind: "task", id: "t-1", state: "working" }, "1.0 {task}")
  t.match(readSendResult(task("submitted")), { kind: "task", state: "submitted" }, "0.3 bare Task")
})

t.test("answerText: what the model reads for each outcome", async (t) => {
  const base = { kind: "task" as const, id: "t-1", statusText: "", artifactText: "", lastAgentText: "" }
  t.equal(answerText({ kind: "message", text: "hi" }, "x"), "hi", "a message without a context has no follow-up line")
  t.equal(answerText({ ...base, state: "completed", statusText: "done here" }, "x"), "done here")
  t.equal(answerText({ ...base, state: "completed", lastAgentText: "from history" }, "x"), "from history")
  t.equal(answerText({ ...base, state: "completed" }, "x"), "(the agent completed the task without any text)")
  t.equal(answerText({ ...base, state: "input-required" }, "x"), 'The agent needs more input before it can finish; it asks:\n(no question given)\n\nTo answer, call x again with your answer as message, taskId "t-1".')
  t.throws(() => answerText({ ...base, state: "auth-required", statusText: "log in" }, "x"), /needs authorization it cannot get through this tool \(auth-required\): log in/)
  t.throws(() => answerText({ ...base, state: "rejected" }, "x"), /the agent's task t-1 ended rejected: no reason given/)
  t.throws(() => answerText({ ...base, state: "canceled", statusText: "stopped" }, "x"), /ended canceled: stopped/)
})

t.test("describeAgent: the card's description and skills, cut when too long", async (t) => {
  const agent = (card: JsonObject) => ({ card, endpoint: { binding: "JSONRPC" as const, version: "1.0" as const, url: "http://x/" }, ask: async () => ({ kind: "message" as const, text: "" }), close: async () => {} }) as never
  t.equal(describeAgent(agent({ name: "bare" })), 'Sends a message to the A2A agent "bare" and returns its answer.')
  t.equal(
    describeAgent(agent({ name: "n", skills: [{ description: "d", examples: ["a", "b", "c", "d", 5] }, null] })),
    'Sends a message to the A2A agent "n" and returns its answer.\nIts skills:\n- (unnamed): d (e.g. "a", "b", "c")',
  )
  const long = describeAgent(agent({ name: "n", description: "x".repeat(5000) }))
  t.equal(long.length, 2000)
  t.ok(long.endsWith("…"))
})

t.test("chooseEndpoint: relative URLs, tenants, 0.3 defaults and gRPC's TLS", async (t) => {
  t.same(chooseEndpoint({ name: "a", supportedInterfaces: [{ url: "/rpc", protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "acme" }] }, "https://h/.well-known/agent-card.json", ["JSONRPC"]), {
    binding: "JSONRPC",
    version: "1.0",
    url: "https://h/rpc",
    tenant: "acme",
  })
  t.same(chooseEndpoint({ name: "a", supportedInterfaces: [{ url: "h:443", protocolBinding: "GRPC", protocolVersion: "1.0" }] }, "https://h/card.json", ["GRPC"]), { binding: "GRPC", version: "1.0", url: "h:443", secure: true })
  t.same(chooseEndpoint({ name: "a", url: "http://h/a2a" }, "http://h/card.json", ["JSONRPC"]), { binding: "JSONRPC", version: "0.3", url: "http://h/a2a" }, "a 0.3 card without preferredTransport is JSON-RPC")
  t.throws(() => chooseEndpoint({ name: "a", url: "http://h/", preferredTransport: "GRPC" }, "http://h/card.json", ["JSONRPC", "GRPC"]), /offers no interface we speak \(it offers GRPC 0\.3;/)
  t.throws(() => chooseEndpoint({ name: "a", supportedInterfaces: [] }, "http://h/card.json", ["JSONRPC"]), /it offers none;/)
})

t.test("fetchAgentCard: agent.json after a missing agent-card.json, credentials asked for, what is not a card", async (t) => {
  const card = { name: "old", url: "http://h/" }
  const seen: Array<string | undefined> = []
  const url = await localServer(t, (req, res) => {
    seen.push(req.headers.authorization)
    if (req.url === "/.well-known/agent.json") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(card))
    if (req.url === "/locked/card.json") return void res.writeHead(401).end()
    if (req.url === "/html/card.json") return void res.writeHead(200, { "content-type": "text/html" }).end("<html></html>")
    res.writeHead(404).end()
  })
  const found = await fetchAgentCard(url, { headers: { authorization: "Bearer k" }, timeoutMs: 5000 })
  t.same(found, { card, cardUrl: `${url}/.well-known/agent.json` })
  t.same(seen, ["Bearer k", "Bearer k"], "the headers go with the card's requests too")
  await t.rejects(fetchAgentCard(`${url}/locked/card.json`, HTTP), { message: `the agent card at ${url}/locked/card.json needs credentials (HTTP 401): give the agent's headers (such as authorization)` })
  await t.rejects(fetchAgentCard(`${url}/html/card.json`, HTTP), { message: /html\/card\.json is not an agent card: it is not a JSON object/ })
  await t.rejects(fetchAgentCard("not a url", HTTP), { message: 'should be the agent\'s http(s) base URL or its card\'s URL, got "not a url"' })
})

t.test("a call that does not answer in time fails saying so; the caller's abort rejects with its reason", async (t) => {
  const url = await localServer(t, () => {})
  await t.rejects(callJson("GET", url, { headers: {}, timeoutMs: 50 }), { message: `GET ${url} did not answer within 50 ms` })
  const controller = new AbortController()
  const call = callJson("GET", url, { headers: {}, timeoutMs: 60_000, signal: controller.signal })
  controller.abort(new Error("run canceled"))
  await t.rejects(call, { message: "run canceled" })
})

t.test("an answer larger than maxBytes is refused, and its connection dropped", async (t) => {
  let closed = false
  const url = await localServer(t, (_req, res) => {
    res.on("close", () => (closed = true))
    res.writeHead(200, { "content-type": "application/json" })
    res.write(`"${"x".repeat(64 * 1024)}`) // and never ends
  })
  await t.rejects(callJson("GET", url, { headers: {}, timeoutMs: 60_000, maxBytes: 1000 }), { message: `GET ${url}: the answer is larger than 1000 bytes` })
  await waitFor(() => closed, 10_000, "the connection to be dropped")
  t.ok(closed)
})

t.test("JSON-RPC: the tenant goes in every call's params; an answer without a result is refused", async (t) => {
  const agent = await scriptedAgent(t, (method) => (method === "GetTask" ? undefined : task("TASK_STATE_COMPLETED")))
  const transport = jsonRpcTransport({ binding: "JSONRPC", version: "1.0", url: agent.url, tenant: "acme" }, HTTP)
  await transport.cancel("t-1")
  t.same(agent.calls[0].params, { id: "t-1", tenant: "acme" })
  t.equal(agent.calls[0].headers["a2a-version"], "1.0")
  await t.rejects(transport.get("t-1"), /GetTask at .* answered HTTP 200 without a JSON-RPC result$/)
})

t.test("HTTP+JSON: the tenant's path, and errors in 1.0's and 0.3's forms", async (t) => {
  const paths: string[] = []
  const url = await localServer(t, (req, res) => {
    paths.push(`${req.method} ${req.url}`)
    if (req.url?.startsWith("/acme/")) return void res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { code: 404, status: "NOT_FOUND", message: "Task not found: t-1" } }))
    if (req.url?.startsWith("/v1/")) return void res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ code: -32602, message: "bad id" }))
    res.writeHead(500).end()
  })
  await t.rejects(restTransport({ binding: "HTTP+JSON", version: "1.0", url: `${url}/`, tenant: "acme" }, HTTP).get("t-1"), { message: `GET ${url}/acme/tasks/t-1 answered HTTP 404: Task not found: t-1` })
  await t.rejects(restTransport({ binding: "HTTP+JSON", version: "0.3", url }, HTTP).cancel("t/1"), { message: `POST ${url}/v1/tasks/t%2F1:cancel answered HTTP 400: bad id` })
  await t.rejects(restTransport({ binding: "HTTP+JSON", version: "1.0", url }, HTTP).get("x"), { message: `GET ${url}/tasks/x answered HTTP 500: no error message` })
  t.same(paths, ["GET /acme/tasks/t-1", "POST /v1/tasks/t%2F1:cancel", "GET /tasks/x"])
})

t.test("an abort during the send still cancels the Task the send started, once its id is known", async (t) => {
  const held = deferred()
  const agent = await scriptedAgent(t, async (method) => {
    if (method === "SendMessage") await held.promise
    return method === "SendMessage" ? { task: task("TASK_STATE_SUBMITTED") } : task("TASK_STATE_CANCELED")
  })
  const remote = await connectRemoteAgent({ url: await cardFor(t, agent.url) })
  t.teardown(() => remote.close())
  const controller = new AbortController()
  const asked = remote.ask({ text: "hi" }, controller.signal)
  await waitFor(() => agent.calls.length === 1, 10_000, "the send to arrive")
  controller.abort(new Error("run canceled"))
  await t.rejects(asked, { message: "run canceled" }, "the call rejects at once")
  held.resolve()
  await waitFor(() => agent.calls.some((call) => call.method === "CancelTask"), 10_000, "the late CancelTask")
  t.same(agent.calls.find((call) => call.method === "CancelTask")!.params, { id: "t-1" })
  await t.rejects(remote.ask({ text: "again" }, controller.signal), { message: "run canceled" }, "an aborted signal sends nothing")
  t.equal(agent.calls.filter((call) => call.method === "SendMessage").length, 1)
})

t.test("a long Task survives a few failed polls in a row (5xx, a dropped connection), not more, nor an error the agent answered", async (t) => {
  /** Answers GetTask with `script`'s next entry: a status to fail with, "drop" to close the connection, or a state. */
  const agentWith = async (script: Array<number | string>) => {
    const gets: string[] = []
    const url = await localServer(t, (req, res) => {
      let raw = ""
      req.on("data", (chunk: Buffer) => (raw += String(chunk)))
      req.on("end", () => {
        const body = JSON.parse(raw) as { id: string; method: string }
        const reply = (result: unknown) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: body.id, result }))
        if (body.method === "SendMessage") return reply({ task: task("TASK_STATE_WORKING") })
        if (body.method === "CancelTask") return reply(task("TASK_STATE_CANCELED"))
        const next = script.shift() ?? "TASK_STATE_WORKING"
        gets.push(String(next))
        if (next === "drop") return void res.socket?.destroy()
        if (typeof next === "number") return void res.writeHead(next, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: body.id, error: { code: -32603, message: "busy" } }))
        reply(task(next, { artifacts: [{ parts: [{ text: "made it" }] }] }))
      })
    })
    const remote = await connectRemoteAgent({ url: await cardFor(t, `${url}/`) })
    t.teardown(() => remote.close())
    return { remote, gets }
  }
  const survives = await agentWith([503, "drop", 502, "TASK_STATE_COMPLETED"])
  t.match(await survives.remote.ask({ text: "go" }), { state: "completed", artifactText: "made it" })
  t.same(survives.gets, ["503", "drop", "502", "TASK_STATE_COMPLETED"])

  const gives = await agentWith([503, 503, 503, 503, "TASK_STATE_COMPLETED"])
  await t.rejects(gives.remote.ask({ text: "go" }), { message: /^GetTask answered error -32603: busy$/ }, "the fourth failure in a row fails the call")
  t.equal(gives.gets.length, 4)

  const refused = await agentWith([404, "TASK_STATE_COMPLETED"])
  await t.rejects(refused.remote.ask({ text: "go" }), { message: /^GetTask answered error -32603: busy$/ }, "a 4xx is not tried again")
  t.equal(refused.gets.length, 1)
})

t.test("a Task running past taskTimeoutMs is canceled and the call fails saying so", async (t) => {
  const agent = await scriptedAgent(t, (method) => (method === "SendMessage" ? { task: task("TASK_STATE_WORKING") } : task(method === "CancelTask" ? "TASK_STATE_CANCELED" : "TASK_STATE_WORKING")))
  const remote = await connectRemoteAgent({ url: await cardFor(t, agent.url), taskTimeoutMs: 100 })
  t.teardown(() => remote.close())
  await t.rejects(remote.ask({ text: "slow" }), { message: "the agent's Task t-1 was still working after 100 ms; it was canceled" })
  t.ok(agent.calls.some((call) => call.method === "CancelTask"), "the Task was canceled")
})

t.test("over gRPC, an abort cancels the call and the remote Task; closing the toolkit ends a call in flight", async (t) => {
  const store = new RecordingStore()
  let started = 0
  const b = await serve("127.0.0.1:0", {
    client: createLocalClient(({ signal }) => {
      started++
      return new Promise<string>((_resolve, reject) => signal!.addEventListener("abort", () => reject(signal!.reason)))
    }),
    a2a: { store },
    grpc: "127.0.0.1:0",
    logger: false,
  })
  t.teardown(() => b.stop())
  const card = await cardServerFor(t, { name: "slow", supportedInterfaces: [{ url: b.grpc, protocolBinding: "GRPC", protocolVersion: "1.0" }] })
  const toolkit = await createToolkit({ builtins: false, a2aAgents: [{ url: card }] })
  const controller = new AbortController()
  const aborted = toolkit.execute("slow", { message: "one" }, { signal: controller.signal })
  await waitFor(() => started === 1 && store.saves.some((s) => s.status.state === "working"), 10_000, "the first remote Task to run")
  const first = store.saves.at(-1)!.id
  const direct = grpcTransport({ binding: "GRPC", version: "1.0", url: b.grpc!, tenant: "acme" }, { headers: { "X-Trace": "1" }, timeoutMs: 5000 })
  t.teardown(() => direct.close())
  await t.rejects(direct.get(first), { message: `GetTask at ${b.grpc} failed: NOT_FOUND: Task not found: ${first}` }, "the tenant goes with the call: another tenant's Task is not found")
  await t.rejects(direct.get(first, AbortSignal.abort(new Error("gone"))), { message: "gone" }, "an aborted signal sends nothing")
  controller.abort(new Error("run canceled"))
  t.same(await aborted, { output: "Tool slow failed: run canceled", isError: true })
  await waitFor(() => store.statesOf(first).includes("canceled"), 10_000, "the first remote Task to be canceled")

  const closed = toolkit.execute("slow", { message: "two" })
  await waitFor(() => started === 2 && store.saves.some((s) => s.id !== first && s.status.state === "working"), 10_000, "the second remote Task to run")
  const second = store.saves.at(-1)!.id
  await toolkit.close()
  t.same(await closed, { output: "Tool slow failed: the A2A agent tool slow was closed", isError: true })
  await waitFor(() => store.statesOf(second).includes("canceled"), 10_000, `the second remote Task to be canceled: ${JSON.stringify(store.saves.map((s) => [s.id, s.status.state]))} ${second}`)
  await t.rejects(
    createToolkit({ a2aAgents: [{ url: card }, { url: card.replace("card.json", "other.json") }] }),
    { message: /^opts\.a2aAgents\[1\] .*no agent card at .*other\.json \(HTTP 404\)/ },
    "one agent that fails fails them all (the others' channels closed)",
  )
})

/** A card server for a scripted agent: a 1.0 JSON-RPC card pointing at it. */
async function cardFor(t: Test, agentUrl: string): Promise<string> {
  return cardServerFor(t, { name: "scripted", supportedInterfaces: [{ url: agentUrl, protocolBinding: "JSONRPC", protocolVersion: "1.0" }] })
}

async function cardServerFor(t: Test, card: JsonObject): Promise<string> {
  const url = await localServer(t, (req, res) => {
    if (req.url !== "/card.json") return void res.writeHead(404).end()
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(card))
  })
  return `${url}/card.json`
}
