// A streamed answer that survives a cut connection, with the official A2A client (@a2a-js/sdk 1.x):
// every SSE event the agent sends has an `id:`; after a cut, the client calls SubscribeToTask with the
// last id it saw as the Last-Event-ID header and gets exactly what it missed, then the rest live.
// Run: npm run build && node dist/examples/streaming-resume.js
import assert from "node:assert/strict"
import { SendMessageRequest, SubscribeToTaskRequest, TaskState, type StreamResponse } from "@a2a-js/sdk"
import { ClientFactory, JsonRpcTransportFactory } from "@a2a-js/sdk/client"
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

// The official client yields each event's data but not its SSE `id:`. It does take the fetch it should
// use, though: this one passes the stream on untouched and notes, for each event, the id it came with,
// in the order the client yields the events. eventIds[i] is the id of the i-th event of the latest stream.
let eventIds: string[] = []
const fetchNotingIds: typeof fetch = async (input, init) => {
  const res = await fetch(input, init)
  if (!res.headers.get("content-type")?.startsWith("text/event-stream") || res.body === null) return res
  const ids: string[] = (eventIds = [])
  let line = ""
  let id = ""
  let hasData = false
  // As the SSE standard reads a stream: "id:" sets the id, "data:" makes an event, a blank line ends it.
  const noteIds = new TransformStream<string, string>({
    transform(chunk, controller) {
      controller.enqueue(chunk)
      const lines = (line + chunk).split("\n")
      line = lines.pop()!
      for (const text of lines.map((l) => l.replace(/\r$/, ""))) {
        if (text === "" && hasData) ids.push(id)
        if (text === "") hasData = false
        else if (text.startsWith("id:")) id = text.slice(3).replace(/^ /, "")
        else if (text.startsWith("data:")) hasData = true
      }
    },
  })
  const body = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(noteIds).pipeThrough(new TextEncoderStream())
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
}

/** The text the artifact updates among `events` carry, joined. */
const textOf = (events: StreamResponse[]) => events.map(({ payload }) => (payload?.$case === "artifactUpdate" && payload.value.artifact?.parts[0]?.content?.$case === "text" ? payload.value.artifact.parts[0].content.value : "")).join("")

try {
  // The client reads the agent card and speaks JSON-RPC to the endpoint it names.
  const sdk = await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: fetchNotingIds })] }).createFromUrl(agent.url)

  // 1. Stream the answer, and cut the connection after the first two chunks.
  const cut = new AbortController()
  const before: StreamResponse[] = []
  const request = SendMessageRequest.fromJSON({ message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "count" }] } })
  for await (const event of sdk.sendMessageStream(request, { signal: cut.signal })) {
    before.push(event)
    if (before.filter((e) => e.payload?.$case === "artifactUpdate").length === 2) {
      // Aborting ends the request and closes the connection, as a network failure would.
      cut.abort()
      break
    }
  }
  const first = before[0].payload
  assert.equal(first?.$case, "task", "a stream opens with the Task")
  const taskId = first.value.id
  // The id of the last event we got: the id noted for it, by its place in the stream.
  const lastId = eventIds[before.length - 1]
  console.log(`before the cut: ${JSON.stringify(textOf(before))}, ${before.length} events, last event id ${lastId}`)

  // 2. While we are away, the model goes on; what it says is kept for us.
  goOn()

  // 3. Resume: the Task first, then every event after lastId, to the end of the Task. The client sends
  // what a call's serviceParameters hold as HTTP headers: here, Last-Event-ID.
  const after: StreamResponse[] = []
  for await (const event of sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: taskId }), { serviceParameters: { "Last-Event-ID": lastId } })) after.push(event)
  console.log(`after the resume: ${JSON.stringify(textOf(after))}, ids ${eventIds.join(",")}`)

  assert.equal(after[0].payload?.$case, "task", "a resumed stream opens with the Task as it is now")
  assert.equal(eventIds[0], lastId, "with the id it was resumed from")
  assert.equal(textOf(before) + textOf(after), "one two three four", "nothing lost, nothing twice")
  const last = after.at(-1)?.payload
  assert.ok(last?.$case === "statusUpdate" && last.value.status?.state === TaskState.TASK_STATE_COMPLETED, "the stream ends with the Task completed")
} finally {
  await agent.stop()
}
console.log("ok: the stream was cut and resumed with Last-Event-ID")
