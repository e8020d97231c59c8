import assert from "node:assert"
import http from "node:http"
import { createClient, createToolkit, type A2ATask } from "toolnexus"

class SpyStore {
  saved: string[] = []
  private map = new Map<string, A2ATask>()
  async save(t: A2ATask) { this.saved.push(t.status.state); this.map.set(t.id, t) }
  async get(id: string) { return this.map.get(id) }
}

const llm = http.createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json" })
  res.end(JSON.stringify({ choices: [{ message: { content: "DONE" } }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }))
})
await new Promise<void>((r) => llm.listen(0, "127.0.0.1", r))
const llmPort = (llm.address() as any).port

const tk = await createToolkit({ builtins: false })
const client = createClient({ baseUrl: `http://127.0.0.1:${llmPort}`, style: "openai", model: "x", apiKey: "k" })
const store = new SpyStore()
const srv = await tk.serve("127.0.0.1:0", { client, a2a: { name: "audited-desk", store } })

try {
  const send = await fetch(srv.url + "/", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: "1", method: "SendMessage", params: { message: { role: "user", parts: [{ kind: "text", text: "go" }] } } }),
  }).then((r) => r.json()) as any

  const id = send.result.id
  for (let i = 0; i < 50 && store.saved.at(-1) !== "completed"; i++) await new Promise((r) => setTimeout(r, 10))

  assert.deepEqual(store.saved, ["submitted", "working", "completed"], "every state transition went through the host store")
  console.log("ok:", store.saved.join(" → "))
} finally {
  await srv.stop()
  await tk.close()
  llm.close()
}
