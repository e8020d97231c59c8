// The A2A agent inside a Fastify app you already run: your own routes stay as they are, the agent's
// routes sit under a prefix, and only callers presenting a known token reach it.
// Run: npm run build && node dist/examples/fastify-plugin-auth.js
import assert from "node:assert/strict"
import { randomBytes } from "node:crypto"
import Fastify from "fastify"
import { createLocalClient } from "toolnexus/client"
import { toolnexusA2A } from "toolnexus/fastify"

// The host's app, with a route of its own.
const app = Fastify({ logger: false })
app.get("/health", async () => ({ status: "up" }))

// An in-process model: it greets whoever wrote the last user message.
const client = createLocalClient(({ messages }) => `hello from the desk, you said: ${String(messages.at(-1)?.content)}`)

// A long random secret (the plugin refuses ones under 16 characters); in production, read it from your secrets.
const aliceToken = randomBytes(24).toString("base64url")

await app.register(toolnexusA2A, {
  client,
  name: "help-desk",
  prefix: "/agents/desk",
  // secret → principal: sent as `Authorization: Bearer <secret>` or `x-api-key: <secret>`.
  auth: { tokens: { [aliceToken]: "alice" } },
})
await app.listen({ host: "127.0.0.1", port: 0 })
const { port } = app.server.address() as { port: number }
const base = `http://127.0.0.1:${port}`

try {
  // The host's route is untouched by the plugin (no auth, no JSON-RPC error handler).
  assert.deepEqual(await (await fetch(`${base}/health`)).json(), { status: "up" })

  // The card is public and names the endpoint under the prefix.
  const card = (await (await fetch(`${base}/agents/desk/.well-known/agent-card.json`)).json()) as { name: string; url: string }
  assert.equal(card.name, "help-desk")
  console.log(`card: ${card.name} at ${card.url}`)

  const send = (headers: Record<string, string>) =>
    fetch(`${base}/agents/desk`, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0", ...headers },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: { message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "my printer is on fire" }] } },
      }),
    })

  // Without a token: refused.
  const refused = await send({})
  console.log(`without a token: HTTP ${refused.status}`)
  assert.equal(refused.status, 401)

  // With one: a 1.0 SendMessage waits for the Task to finish and answers with it.
  const answered = (await (await send({ authorization: `Bearer ${aliceToken}` })).json()) as {
    result: { task: { status: { state: string }; artifacts: Array<{ parts: Array<{ text: string }> }> } }
  }
  const { task } = answered.result
  assert.equal(task.status.state, "TASK_STATE_COMPLETED")
  console.log(`with a token: ${task.status.state}: ${task.artifacts[0].parts[0].text}`)
} finally {
  await app.close()
}
console.log("ok: the agent served inside the host's Fastify app, behind its tokens")
