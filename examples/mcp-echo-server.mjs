// A tiny MCP server over stdio, for examples/mcp-tools.ts: one tool, "shout", which answers its text in capitals.
// Any MCP client can start it: node examples/mcp-echo-server.mjs
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"

const server = new Server({ name: "echo-example", version: "1.0.0" }, { capabilities: { tools: {} } })

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "shout",
      description: "Answers the text in capital letters.",
      inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    },
  ],
}))

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  if (request.params.name !== "shout") return { isError: true, content: [{ type: "text", text: `no tool ${request.params.name}` }] }
  const text = request.params.arguments?.text
  if (typeof text !== "string") return { isError: true, content: [{ type: "text", text: "text should be a string" }] }
  return { content: [{ type: "text", text: text.toUpperCase() }] }
})

// stdout carries the protocol; the server ends when the client closes its stdin.
await server.connect(new StdioServerTransport())
