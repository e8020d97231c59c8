// A streamed answer that survives a cut connection: every SSE event has an `id:`; after a cut, the peer
// calls SubscribeToTask with the last id it saw as Last-Event-ID and gets exactly what it missed, then
// the rest live. Run: npm run build && node dist/examples/streaming-resume.js
import assert from "node:assert/strict"
import { createLocalClient } from "toolnexus/client"
import { serve } from "toolnexus/fastify"

// A model that streams its answer in chunks, and holds the second half until we let it go on.
let goOn!: () => void
const secondHalf = new Promise<void>((resolve) => (goOn = resolve))
const client = createLocalClient(async function* () {
  yield "one "
  yield "two "
  await secondHalf
  yield "three "
  yield "four"
})
const agent = await serve("127.0.0.1:0", { client, a2a: { name: "counter" }, logger: false })

interface StreamEvent {
  id: number
  result: { task?: { id: string }; artifactUpdate?: { artifact: { parts: Array<{ text: string }> } }; statusUpdate?: { status: { state: string } } }
}

/** POSTs a JSON-RPC streaming call and yields its SSE events as they arrive. */
async function* openStream(method: string, params: object, headers: Record<string, string>, signal?: AbortSignal): AsyncGenerator<StreamEvent> {
  const res = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0", ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal,
  })
  assert.equal(res.headers.get("content-type")?.split(";")[0], "text/event-stream")
  let buffered = ""
  for await (const chunk of res.body!.pipeThrough(new TextDecoderStream())) {
    buffered += chunk
    let end: number
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const frame = buffered.slice(0, end)
      buffered = buffered.slice(end + 2)
      const id = /^id: ?(.*)$/m.exec(frame)?.[1]
      const data = /^data: ?(.*)$/m.exec(frame)?.[1]
      if (id !== undefined && data !== undefined) yield { id: Number(id), result: (JSON.parse(data) as { result: StreamEvent["result"] }).result }
    }
  }
}

const textOf = (events: StreamEvent[]) => events.map((e) => e.result.artifactUpdate?.artifact.parts[0]?.text ?? "").join("")

try {
  // 1. Stream the answer, and cut the connection after the first two chunks.
  const cut = new AbortController()
  const before: StreamEvent[] = []
  try {
    for await (const event of openStream("SendStreamingMessage", { message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "count" }] } }, {}, cut.signal)) {
      before.push(event)
      if (before.filter((e) => e.result.artifactUpdate).length === 2) cut.abort()
    }
  } catch (err) {
    if (!cut.signal.aborted) throw err
  }
  const taskId = before[0].result.task!.id
  const lastId = before.at(-1)!.id
  console.log(`before the cut: ${JSON.stringify(textOf(before))}, last event id ${lastId}`)

  // 2. While we are away, the model goes on; what it says is kept for us.
  goOn()

  // 3. Resume: the Task first, then every event after lastId, to the end of the Task.
  const after: StreamEvent[] = []
  for await (const event of openStream("SubscribeToTask", { id: taskId }, { "last-event-id": String(lastId) })) after.push(event)
  console.log(`after the resume: ${JSON.stringify(textOf(after))}, ids ${after.map((e) => e.id).join(",")}`)

  assert.equal(textOf(before) + textOf(after), "one two three four", "nothing lost, nothing twice")
  assert.equal(after.at(-1)!.result.statusUpdate?.status.state, "TASK_STATE_COMPLETED")
} finally {
  await agent.stop()
}
console.log("ok: the stream was cut and resumed with Last-Event-ID")
