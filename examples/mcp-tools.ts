// An MCP server's tools in your toolkit: createToolkit starts the server (the same { command, args }
// as an mcp.json's "mcpServers"), lists its tools as "<server>__<tool>", and stops it on close().
// Run: npm run build && node dist/examples/mcp-tools.js
import assert from "node:assert/strict"
import fs from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { createLocalClient, createToolkit } from "toolnexus/client"

// The server script sits beside this file in examples/; compiled, this file runs from dist/examples/.
const here = path.dirname(fileURLToPath(import.meta.url))
const script = [path.join(here, "mcp-echo-server.mjs"), path.join(here, "..", "..", "examples", "mcp-echo-server.mjs")].find((file) => fs.existsSync(file))
assert.ok(script, "examples/mcp-echo-server.mjs is found")

const toolkit = await createToolkit({
  builtins: false,
  mcpServers: { echo: { command: process.execPath, args: [script] } },
})
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
}
console.log("ok: the MCP server's tool ran in the toolkit")
