import type { IncomingMessage } from "node:http"
import t, { type Test } from "tap"
import { fetchAgentCard } from "../../lib/a2a-client/card.js"
import { callJson } from "../../lib/a2a-client/http.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import type { JsonObject } from "../../lib/types.js"
import { localServer } from "../fixtures/helpers.js"

/*
 * What the A2A client sends to, and takes from, an agent that misbehaves: redirects to another origin
 * (which must not get the agent's headers or the body) and an agent that echoes our credentials back.
 */

const SECRET_HEADERS = { authorization: "Bearer tok-4242-secret", "x-api-key": "key-7777-secret" }
const HTTP = { headers: SECRET_HEADERS, timeoutMs: 5000 }

interface Seen {
  method: string
  url: string
  headers: IncomingMessage["headers"]
  body: string
}

/** A server that records every request it gets and answers with `answer`. */
async function recordingServer(t: Test, answer: (req: Seen, res: import("node:http").ServerResponse) => void) {
  const seen: Seen[] = []
  const url = await localServer(t, (req, res) => {
    let body = ""
    req.on("data", (chunk: Buffer) => (body += String(chunk)))
    req.on("end", () => {
      const entry = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body }
      seen.push(entry)
      answer(entry, res)
    })
  })
  return { url, seen }
}

const json = (res: import("node:http").ServerResponse, value: unknown, status = 200) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value))

t.test("a redirect to another origin is refused: the other origin gets neither the headers nor the body", async (t) => {
  const elsewhere = await recordingServer(t, (_req, res) => json(res, { jsonrpc: "2.0", id: 1, result: {} }))
  for (const status of [301, 302, 303, 307, 308]) {
    const agent = await recordingServer(t, (_req, res) => res.writeHead(status, { location: `${elsewhere.url}/rpc` }).end())
    const call = callJson("POST", `${agent.url}/rpc`, { ...HTTP, body: { jsonrpc: "2.0", id: 1, method: "SendMessage", params: {} } })
    await t.rejects(call, { message: new RegExp(`answered HTTP ${status}, a redirect to another origin \\(${elsewhere.url}/rpc\\).*configure the agent's URL`), status }, `${status} on a POST`)
    t.equal(agent.seen.length, 1, `${status}: the agent got the one call`)
  }
  t.equal(elsewhere.seen.length, 0, "the other origin got no request at all")
})

t.test("a redirected card on another origin is refused, naming where it pointed", async (t) => {
  const elsewhere = await recordingServer(t, (_req, res) => json(res, { name: "moved", url: "http://127.0.0.1:1/" }))
  const agent = await recordingServer(t, (_req, res) => res.writeHead(302, { location: `${elsewhere.url}/.well-known/agent-card.json` }).end())
  await t.rejects(fetchAgentCard(agent.url, HTTP), /GET http:\/\/127\.0\.0\.1:\d+\/\.well-known\/agent-card\.json: answered HTTP 302, a redirect to another origin/)
  t.equal(elsewhere.seen.length, 0, "the card's redirect took nothing elsewhere")
})

t.test("a redirect within the agent's origin is followed with its headers; 303 continues as a GET", async (t) => {
  const agent = await recordingServer(t, (req, res) => {
    if (req.url === "/old") return void res.writeHead(307, { location: "/new" }).end()
    if (req.url === "/see-other") return void res.writeHead(303, { location: "/result" }).end()
    if (req.url === "/loop") return void res.writeHead(302, { location: "/loop" }).end()
    json(res, { at: req.url, method: req.method, body: req.body })
  })
  const kept = await callJson("POST", `${agent.url}/old`, { ...HTTP, body: { hello: 1 } })
  t.same(kept, { status: 200, body: { at: "/new", method: "POST", body: '{"hello":1}' } }, "307 keeps the method and the body")
  t.equal(agent.seen.at(-1)!.headers["x-api-key"], SECRET_HEADERS["x-api-key"], "and the agent's headers, on its own origin")
  const seeOther = await callJson("POST", `${agent.url}/see-other`, { ...HTTP, body: { hello: 2 } })
  t.same(seeOther.body, { at: "/result", method: "GET", body: "" }, "303 continues as a GET without the body")
  await t.rejects(callJson("GET", `${agent.url}/loop`, HTTP), /redirected more than 5 times/)
})

/** A JSON-RPC agent that puts the headers it got into every answer: an error for SendMessage when `fail`, else a completed Task. */
async function echoingAgent(t: Test, fail: boolean) {
  const server = await recordingServer(t, (req, res) => {
    if (req.method === "GET") {
      return json(res, { name: "echo", url: server.url + "/rpc", preferredTransport: "JSONRPC", protocolVersion: "0.3", skills: [] })
    }
    const call = JSON.parse(req.body) as { id: string; method: string }
    const echoed = `you sent ${JSON.stringify(req.headers)}`
    if (fail) return json(res, { jsonrpc: "2.0", id: call.id, error: { code: -32603, message: echoed } })
    const answer: JsonObject = { kind: "task", id: "t-1", contextId: "c-1", status: { state: "completed" }, artifacts: [{ artifactId: "a", parts: [{ kind: "text", text: echoed }] }] }
    json(res, { jsonrpc: "2.0", id: call.id, result: answer })
  })
  return server
}

t.test("an agent that echoes our credentials: the model reads them redacted, in an error and in an answer", async (t) => {
  for (const fail of [true, false]) {
    const agent = await echoingAgent(t, fail)
    const toolkit = await createToolkit({ builtins: false, a2aAgents: [{ url: agent.url, name: "echo", headers: SECRET_HEADERS }] })
    t.teardown(() => toolkit.close())
    const result = await toolkit.execute("echo", { message: "hello" })
    t.equal(result.isError ?? false, fail, fail ? "the error is the tool's result" : "the answer is the tool's result")
    t.match(result.output, /you sent .*\[redacted\]/, "the echo arrives, redacted")
    t.notMatch(result.output, /tok-4242-secret|key-7777-secret/, "without either credential")
    t.equal(agent.seen.at(-1)!.headers["x-api-key"], SECRET_HEADERS["x-api-key"], "while the agent did get them")
  }
})
