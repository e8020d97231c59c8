import { randomUUID } from "node:crypto"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import t, { type Test } from "tap"
import { createToolkit, type Tool } from "../../lib/tools/toolkit.js"
import type { ToolSource } from "../../lib/tools/types.js"
import { localServer, memoryLogger } from "../fixtures/helpers.js"

/*
 * What a tool can make the server carry: its result (read by the model, resent every turn), its listing
 * (sent in every model request), and, from an MCP server over HTTP, one message. Each is bounded.
 */

const MiB = 1024 * 1024
const returning = (name: string, output: () => string): Tool => ({ name, description: `Returns ${name}.`, inputSchema: { type: "object" }, execute: output })

t.test("a result past maxToolResultBytes is cut there with a note the model can read", async (t) => {
  const toolkit = await createToolkit({
    builtins: false,
    maxToolResultBytes: 1000,
    extraTools: [returning("ascii", () => "a".repeat(5000)), returning("accents", () => "é".repeat(700)), returning("short", () => "ok"), { ...returning("failing", () => ""), execute: () => { throw new Error("x".repeat(5000)) } }],
  })
  const ascii = await toolkit.execute("ascii", {})
  t.equal(ascii.output, `${"a".repeat(1000)}\n[cut: the result was 5000 bytes; the toolkit keeps 1000 (maxToolResultBytes)]`)
  const accents = await toolkit.execute("accents", {})
  t.match(accents.output, /^(é){500}\n\[cut: the result was 1400 bytes/, "a two-byte character is never split")
  t.same(await toolkit.execute("short", {}), { output: "ok", isError: false })
  const failing = await toolkit.execute("failing", {})
  t.ok(failing.isError && Buffer.byteLength(failing.output) < 1200, "an error's text is bounded too")
  await t.rejects(createToolkit({ maxToolResultBytes: 0 }), /opts\.maxToolResultBytes should be a whole number of bytes/)
})

t.test("a source's tool listed past maxToolListingBytes is left out with a warning; one of your own throws", async (t) => {
  const logger = memoryLogger()
  const wordy = { ...returning("wordy", () => "w"), description: "d".repeat(300 * 1024) }
  const source: ToolSource = { name: "MCP server test", tools: () => [wordy, returning("plain", () => "p")], close: async () => {} }
  const toolkit = await createToolkit({ builtins: false, sources: [source], logger })
  t.same(toolkit.tools().map((tool) => tool.name), ["plain"], "the others stay")
  t.match(logger.lines, [{ level: "warn", tool: "wordy", source: "MCP server test", limit: 256 * 1024, msg: "tool left out: its listing is too large" }])
  await t.rejects(createToolkit({ builtins: false, extraTools: [wordy] }), /Tool "wordy" is \d+ bytes listed .* past opts\.maxToolListingBytes \(262144\): shorten it or raise the limit/)
})

/** An MCP server over streamable HTTP with one tool, `big`, whose text result is `bytes` long. */
async function bigResultServer(t: Test): Promise<string> {
  const sessions = new Map<string, StreamableHTTPServerTransport>()
  const servers: Server[] = []
  t.teardown(() => Promise.allSettled(servers.map((server) => server.close())))
  const url = await localServer(t, (req, res) => {
    const session = req.headers["mcp-session-id"] as string | undefined
    void (async () => {
      let transport = session ? sessions.get(session) : undefined
      if (!transport) {
        const fresh = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (id) => void sessions.set(id, fresh) })
        const server = new Server({ name: "big", version: "1.0.0" }, { capabilities: { tools: {} } })
        server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [{ name: "big", inputSchema: { type: "object", properties: { bytes: { type: "number" } } } }] }))
        server.setRequestHandler(CallToolRequestSchema, (request) => ({ content: [{ type: "text", text: "b".repeat(Number(request.params.arguments?.bytes ?? 1)) }] }))
        servers.push(server)
        await server.connect(fresh)
        transport = fresh
      }
      await transport.handleRequest(req, res)
    })().catch(() => res.destroy())
  })
  return `${url}/mcp`
}

t.test("MCP over HTTP: a message past maxMessageBytes fails the call, not the server; a large one within it is cut for the model", async (t) => {
  const url = await bigResultServer(t)
  const toolkit = await createToolkit({ builtins: false, mcpServers: { web: { url, maxMessageBytes: 2 * MiB } } })
  t.teardown(() => toolkit.close())
  const cut = await toolkit.execute("web__big", { bytes: 1.5 * MiB })
  t.notOk(cut.isError, "within the message limit")
  t.match(cut.output, /\n\[cut: the result was 1572864 bytes; the toolkit keeps 1048576 \(maxToolResultBytes\)\]$/, "past the result limit: cut")
  const refused = await toolkit.execute("web__big", { bytes: 8 * MiB })
  t.equal(refused.isError, true, "past the message limit: an error result")
  t.match(refused.output, /larger than 2097152 bytes \(maxMessageBytes\)|went away|failed/)
  t.ok(Buffer.byteLength(refused.output) < 4096, "and a short one")
  t.same(await toolkit.execute("web__big", { bytes: 3 }), { output: "bbb", isError: false }, "the server answers the next call")
  await t.rejects(createToolkit({ builtins: false, mcpServers: { web: { url, maxMessageBytes: -1 } } }), /mcpServers\.web\.maxMessageBytes should be a whole number of bytes/)
})
