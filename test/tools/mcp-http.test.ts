import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import { closedPort, waitFor } from "../fixtures/helpers.js"
import { httpMcpServer } from "../fixtures/mcp.js"

/*
 * MCP servers over HTTP as tool sources: the fixture server (test/fixtures/mcp-tools.mjs, the official SDK)
 * behind the SDK's streamable HTTP transport, or its older HTTP+SSE one, on 127.0.0.1 port 0.
 */

t.test("streamable HTTP: a call with the configured headers, list_changed over the session's stream, and close ends the session", async (t) => {
  const server = await httpMcpServer(t)
  const toolkit = await createToolkit({ builtins: false, mcpServers: { web: { url: server.url, headers: { authorization: "Bearer t0k" } } } })
  t.ok(toolkit.get("web__echo"))
  t.same(await toolkit.execute("web__echo", { text: "over http" }), { output: "echo: over http", isError: false })
  t.ok(server.events.includes("authorization Bearer t0k"), "the headers reach the server")
  t.same(await toolkit.execute("web__grow", {}), { output: "added extra_13", isError: false })
  await waitFor(() => toolkit.get("web__extra_13") !== undefined, 10_000, "the added tool")
  const session = server.requests.find((request) => request.session)?.session
  t.ok(session)
  await toolkit.close()
  t.ok(server.requests.some((request) => request.method === "DELETE" && request.session === session), "the session is ended with a DELETE")
})

t.test("streamable HTTP: a server that lost the session gives one error result, then a new session answers", async (t) => {
  const server = await httpMcpServer(t)
  const toolkit = await createToolkit({ builtins: false, mcpServers: { web: { url: server.url } } })
  t.teardown(() => toolkit.close())
  server.forgetSessions()
  const lost = await toolkit.execute("web__echo", { text: "a" })
  t.equal(lost.isError, true)
  t.match(lost.output, /^Tool web__echo failed: MCP server "web" went away during the call \(.*404.*\); it is restarted at the next call$/)
  t.same(await toolkit.execute("web__echo", { text: "b" }), { output: "echo: b", isError: false })
  t.equal(server.requests.filter((request) => request.method === "POST" && !request.session).length, 2, "two initialize requests: the first session and the new one")
})

t.test("streamable HTTP: a cancel during a slow tool reaches the server", async (t) => {
  const server = await httpMcpServer(t)
  const toolkit = await createToolkit({ builtins: false, mcpServers: { web: { url: server.url } } })
  t.teardown(() => toolkit.close())
  const controller = new AbortController()
  const client = createLocalClient(({ messages }) => (messages.some((m) => m.role === "tool") ? "done" : { toolCalls: [{ id: "c1", name: "web__slow" }] }))
  const run = client.run("go", { toolkit, signal: controller.signal })
  await waitFor(() => server.events.includes("slow started"), 10_000, "the slow tool to start")
  controller.abort(new Error("stop now"))
  await t.rejects(run)
  await waitFor(() => server.events.some((line) => line.startsWith("canceled ")), 10_000, "the server to see the cancellation")
  t.match(server.events.find((line) => line.startsWith("canceled ")), /stop now/)
})

t.test("an HTTP+SSE server: reached after streamable HTTP is refused with 4xx, or directly with type \"sse\"", async (t) => {
  const server = await httpMcpServer(t, { sse: true })
  const fallback = await createToolkit({ builtins: false, mcpServers: { old: { url: server.url, headers: { authorization: "Bearer old" } } } })
  t.teardown(() => fallback.close())
  t.same(await fallback.execute("old__echo", { text: "via sse" }), { output: "echo: via sse", isError: false })
  t.same(server.requests.slice(0, 2).map((request) => request.method), ["POST", "GET"], "a streamable POST first, refused; then the SSE stream")
  t.ok(server.events.includes("authorization Bearer old"), "the headers go with the SSE transport's POSTs too")
  const before = server.requests.length
  const direct = await createToolkit({ builtins: false, mcpServers: { old: { url: server.url, type: "sse" } } })
  t.teardown(() => direct.close())
  t.same(await direct.execute("old__echo", { text: "direct" }), { output: "echo: direct", isError: false })
  t.equal(server.requests[before].method, "GET", 'type "sse" opens the stream at once')
})

t.test("a URL that refuses, or answers with no MCP server, fails createToolkit naming the server and the field", async (t) => {
  const port = await closedPort()
  await t.rejects(createToolkit({ mcpServers: { web: { url: `http://127.0.0.1:${port}/mcp` } } }), {
    message: new RegExp(`^MCP server "web": mcpServers\\.web\\.url http://127\\.0\\.0\\.1:${port}/mcp did not answer as an MCP server over streamable HTTP: fetch failed \\(ECONNREFUSED\\)$`),
  })
  const server = await httpMcpServer(t, { sse: true })
  const refused = await createToolkit({ mcpServers: { web: { url: server.url.replace("/mcp", "/elsewhere"), headers: { authorization: "Bearer s3cret" } } } }).then(
    () => new Error("createToolkit did not fail"),
    (err: Error) => err,
  )
  t.match(refused.message, /^MCP server "web": mcpServers\.web\.url .*\/elsewhere did not answer as an MCP server over streamable HTTP: HTTP 405: .*; the HTTP\+SSE transport failed too: .*404/)
  t.notMatch(refused.message, /s3cret/, "headers never appear in errors")
})
