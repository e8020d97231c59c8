// Another A2A agent as one of your tools: the toolkit reads the agent's card, and when the model calls
// the tool, the agent gets the model's message as an A2A Task and its answer comes back as the result.
// Run: npm run build && node dist/examples/agent-as-tool.js
import assert from "node:assert/strict"
import { createLocalClient, createToolkit } from "toolnexus/client"
import { serve } from "toolnexus/fastify"

// The remote agent: a "translator" served on its own port (in real life another team's service).
const translator = await serve("127.0.0.1:0", {
  client: createLocalClient(({ messages }) => (messages.at(-1)?.content === "good morning" ? "bonjour" : "?")),
  a2a: { name: "translator", description: "Translates English into French" },
  logger: false,
})

// Our toolkit: the translator joins as a tool named after its card, taking { message }.
const toolkit = await createToolkit({ builtins: false, a2aAgents: [{ url: translator.url }] })
console.log(`tools: ${toolkit.tools().map((tool) => tool.name).join(", ")}`)

// Our model: first asks the translator, then answers with what came back.
const client = createLocalClient(({ messages }) => {
  const last = messages.at(-1)
  if (last?.role === "tool") return `In French: ${last.content}`
  return { toolCalls: [{ name: "translator", args: { message: "good morning" } }] }
})

try {
  const result = await client.run("How do I say good morning in French?", { toolkit })
  assert.equal(result.toolCalls[0].name, "translator")
  assert.equal(result.toolCalls[0].result.isError, false)
  assert.match(result.text, /bonjour/)
  console.log(`answer after ${result.turns} turns: ${result.text}`)
} finally {
  await toolkit.close()
  await translator.stop()
}
console.log("ok: the translator agent answered as a tool")
