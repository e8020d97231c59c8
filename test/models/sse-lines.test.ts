import t from "tap"
import { sseEvents, type SseEvent } from "../../lib/models/sse-lines.js"

/** The events sseEvents reads from a body that arrives as these chunks. */
async function eventsOf(chunks: Array<string | Uint8Array>): Promise<SseEvent[]> {
  async function* body(): AsyncGenerator<Uint8Array> {
    for (const chunk of chunks) yield typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk
  }
  const events: SseEvent[] = []
  for await (const event of sseEvents(body())) events.push(event)
  return events
}

const STREAM = 'event: content_block_delta\ndata: {"text":"Hi"}\n\n: a comment\n\ndata: [DONE]\n\n'
const EXPECTED = [
  { event: "content_block_delta", data: '{"text":"Hi"}' },
  { event: "message", data: "[DONE]" },
]

t.test("events come out the same however the body is cut into chunks", async (t) => {
  t.same(await eventsOf([STREAM]), EXPECTED, "in one chunk")
  for (let at = 1; at < STREAM.length; at++) {
    t.same(await eventsOf([STREAM.slice(0, at), STREAM.slice(at)]), EXPECTED, `cut after ${at} characters`)
  }
  t.same(await eventsOf([...STREAM]), EXPECTED, "one character a chunk")
})

t.test("a character cut between two chunks is decoded whole", async (t) => {
  const bytes = new TextEncoder().encode("data: é😀\n\n")
  const events = await eventsOf([bytes.slice(0, 8), bytes.slice(8, 11), bytes.slice(11)])
  t.same(events, [{ event: "message", data: "é😀" }])
})

t.test('"\\r\\n" and "\\r" end lines, also when a "\\r\\n" is cut in two', async (t) => {
  t.same(await eventsOf(["data: a\r\ndata: b\r\n\r\n"]), [{ event: "message", data: "a\nb" }], "CRLF")
  t.same(await eventsOf(["data: a\rdata: b\r\r"]), [{ event: "message", data: "a\nb" }], "CR")
  // Read as two line ends, the cut "\r" + "\n" would be a blank line: two events instead of one.
  t.same(await eventsOf(["data: a\r", "\ndata: b\r", "", "\n\r\n"]), [{ event: "message", data: "a\nb" }], "CRLF cut after the CR")
})

t.test("fields: event names reset after each event, other fields and data-less events are skipped", async (t) => {
  const events = await eventsOf(["event: ping\n\nid: 7\nretry: 10\ndata:no space\ndata\nevent: x\n\ndata: after\n\n"])
  t.same(events, [
    { event: "x", data: "no space\n" },
    { event: "message", data: "after" },
  ])
})

t.test("the body's end: a last event without its blank line is given, a line cut short is not", async (t) => {
  t.same(await eventsOf(["data: [DONE]\n"]), [{ event: "message", data: "[DONE]" }])
  t.same(await eventsOf(['data: {"a":1}\n\ndata: {"choi']), [{ event: "message", data: '{"a":1}' }])
  t.same(await eventsOf([]), [], "an empty body has no events")
})
