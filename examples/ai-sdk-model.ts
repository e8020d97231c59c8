// The built-in tool-calling loop on a Vercel AI SDK provider (@ai-sdk/openai here; Anthropic's, Google's,
// Bedrock's, Mistral's or Ollama's provider the same way), served as an A2A agent. The provider talks to a
// small OpenAI-style endpoint started below on 127.0.0.1, so no key or network is needed: point baseURL at
// a real one instead. Run: npm run build && node dist/examples/ai-sdk-model.js
import assert from "node:assert/strict"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { SendMessageRequest, TaskState } from "@a2a-js/sdk"
import { ClientFactory } from "@a2a-js/sdk/client"
import { createOpenAI } from "@ai-sdk/openai"
import { createClient, createToolkit, serve } from "toolnexus"

// 1. A stand-in for the model's endpoint: the first turn asks for the `add` tool, the second streams the answer.
const chunk = (delta: object, finish: string | null = null) => `data: ${JSON.stringify({ id: "c", created: 0, model: "demo", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
const usage = (prompt: number, completion: number) =>
  `data: ${JSON.stringify({ id: "c", created: 0, model: "demo", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion } })}\n\n`
const endpoint = createServer((req, res) => {
  let body = ""
  req.on("data", (piece: Buffer) => (body += piece.toString()))
  req.on("end", () => {
    const { messages } = JSON.parse(body) as { messages: Array<{ role: string; content: string }> }
    res.writeHead(200, { "content-type": "text/event-stream" })
    const toolResult = messages.find((m) => m.role === "tool")
    const events = toolResult
      ? [chunk({ content: "The sum " }), chunk({ content: "is " }), chunk({ content: `${toolResult.content}.` }), chunk({}, "stop"), usage(40, 6)]
      : [chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "add", arguments: '{"a":19,"b":23}' } }] }), chunk({}, "tool_calls"), usage(25, 9)]
    res.end([...events, "data: [DONE]\n\n"].join(""))
  })
})
await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve))
const baseURL = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/v1`

// 2. The agent: a toolkit, and a client whose model is the AI SDK's, in place of baseUrl/style/model.
const toolkit = await createToolkit({
  builtins: false,
  extraTools: [
    {
      name: "add",
      description: "Adds two numbers",
      inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
      execute: ({ a, b }) => String(Number(a) + Number(b)),
    },
  ],
})
const client = createClient({ languageModel: createOpenAI({ baseURL, apiKey: "not-needed-here" }).chat("demo") })
const agent = await serve("127.0.0.1:0", { client, toolkit, a2a: { name: "adder" }, logger: false })

try {
  // 3. A peer streams a Task with the official A2A client: the answer comes as artifact chunks.
  const sdk = await new ClientFactory().createFromUrl(agent.url)
  const chunks: string[] = []
  let state: TaskState | undefined
  for await (const event of sdk.sendMessageStream(SendMessageRequest.fromJSON({ message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "What is 19 + 23?" }] } }))) {
    const payload = event.payload
    if (payload?.$case === "artifactUpdate") {
      const content = payload.value.artifact?.parts[0]?.content
      if (content?.$case === "text" && content.value !== "") chunks.push(content.value)
    }
    if (payload?.$case === "statusUpdate") state = payload.value.status?.state
  }
  console.log(`streamed chunks: ${JSON.stringify(chunks)}`)
  assert.deepEqual(chunks, ["The sum ", "is ", "42."])
  assert.equal(state, TaskState.TASK_STATE_COMPLETED)
} finally {
  await agent.stop()
  endpoint.closeAllConnections()
  endpoint.close()
}
console.log("ok: the AI SDK model called the tool and its answer streamed through the served agent")
