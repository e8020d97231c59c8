// The floor for the time-to-first-token row: a plain node:http server that, for any POST, answers text/event-stream,
// asks the model endpoint with fetch (as our OpenAI adapter does), and writes each content chunk on as an
// artifactUpdate-shaped SSE frame the moment it is parsed; no A2A, no Task, no store. What the loopback hops, the
// event loops and the machine's scheduling cost on their own.
// argv: <model baseUrl>
import http from "node:http"
import { portOf, reportStartFailure, serveParent } from "../child.mjs"

const modelUrl = process.argv[2]
/** @param {number} id @param {object} result */
const frame = (id, result) => `id: ${id}\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: 1, result })}\n\n`

const server = http.createServer((req, res) => void relay(req, res))

/** @param {http.IncomingMessage} req @param {http.ServerResponse} res */
async function relay(req, res) {
  try {
    for await (const _ of req); // the request body, unread
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" })
    res.write(frame(1, { task: { status: { state: "TASK_STATE_WORKING" } } }))
    const answer = await fetch(`${modelUrl}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m", stream: true, messages: [] }) })
    const decoder = new TextDecoder()
    let pending = ""
    let id = 2
    if (answer.body === null) throw new Error("the model endpoint answered no body")
    for await (const bytes of answer.body) {
      pending += decoder.decode(bytes, { stream: true })
      let end
      while ((end = pending.indexOf("\n\n")) !== -1) {
        const data = pending.slice(6, end) // after "data: "
        pending = pending.slice(end + 2)
        if (data === "[DONE]") continue
        const text = JSON.parse(data).choices[0].delta.content
        if (text) res.write(frame(id++, { artifactUpdate: { artifact: { parts: [{ text }] }, append: id > 3 } }))
      }
    }
    res.end(frame(id, { statusUpdate: { status: { state: "TASK_STATE_COMPLETED" } } }))
  } catch (err) {
    res.destroy(err instanceof Error ? err : new Error(String(err)))
  }
}

try {
  await new Promise((/** @type {(value?: undefined) => void} */ resolve) => server.listen(0, "127.0.0.1", resolve))
  serveParent({}, () => {
    server.closeAllConnections()
    return new Promise((/** @type {(value?: undefined) => void} */ resolve) => server.close(() => resolve()))
  })
  process.send?.({ ready: true, url: `http://127.0.0.1:${portOf(server)}` })
} catch (err) {
  reportStartFailure(err)
}
