// MCP tools from an mcp.json: the file desktop clients and IDEs write. readMcpConfig reads and checks its
// "mcpServers"; createToolkit starts each server, lists its tools as "<server>__<tool>", and stops them on close().
// Run: npm run build && node dist/examples/mcp-tools.js
import assert from "node:assert/strict"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { createLocalClient, createToolkit, readMcpConfig } from "toolnexus/client"

// The server script sits beside this file in examples/; compiled, this file runs from dist/examples/.
const here = path.dirname(fileURLToPath(import.meta.url))
const script = [path.join(here, "mcp-echo-server.mjs"), path.join(here, "..", "..", "examples", "mcp-echo-server.mjs")].find((file) => fs.existsSync(file))
assert.ok(script, "examples/mcp-echo-server.mjs is found")

// An mcp.json as you would keep beside your project: one stdio server named "echo".
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "toolnexus-mcp-example-"))
const mcpJson = path.join(dir, "mcp.json")
fs.writeFileSync(mcpJson, JSON.stringify({ mcpServers: { echo: { command: process.execPath, args: [script] } } }, null, 2))

// readMcpConfig throws naming the file, the server and the field when an entry is wrong.
const toolkit = await createToolkit({ builtins: false, mcpServers: readMcpConfig(mcpJson) })
console.log(`tools: ${toolkit.tools().map((tool) => tool.name).join(", ")}`)

try {
  // A tool can be run directly...
  const direct = await toolkit.execute("echo__shout", { text: "direct" })
  assert.deepEqual(direct, { output: "DIRECT", isError: false })

  // ...or by the model, in the tool-calling loop: first a call, then an answer from its result.
  const client = createLocalClient(({ messages }) => {
    const last = messages.at(-1)
    if (last?.role === "tool") return `the server said ${last.content}`
    return { toolCalls: [{ name: "echo__shout", args: { text: "hello mcp" } }] }
  })
  const result = await client.run("shout hello", { toolkit })
  assert.equal(result.text, "the server said HELLO MCP")
  console.log(`answer: ${result.text}`)
} finally {
  // Ends the MCP server's process.
  await toolkit.close()
  fs.rmSync(dir, { recursive: true, force: true })
}
console.log("ok: the MCP server's tool ran in the toolkit, from an mcp.json")
