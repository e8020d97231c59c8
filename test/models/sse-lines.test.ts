import t from "tap"
import { sseEvents, SseLineTooLongError, type SseEvent } from "../../lib/models/sse-lines.js"

/** The events sseEvents reads from a body that arrives as these chunks. */
async function eventsOf(chunks: Array<string | Uint8Array>, maxLineLength?: number): Promise<SseEvent[]> {
  async function* body(): AsyncGenerator<Uint8Array> {
    for (const chunk of chunks) yield typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk
  }
  const events: SseEvent[] = []
  for await (const event of sseEvents(body(), maxLineLength)) events.push(event)
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

t.test("a line at the limit passes whole across many chunks; one past it, or an event's data past it, is refused", async (t) => {
  const line = "data: " + "a".repeat(94)
  const pieces = Array.from({ length: 10 }, (_, i) => line.slice(i * 10, i * 10 + 10))
  t.same(await eventsOf([...pieces, "\n\n"], 100), [{ event: "message", data: "a".repeat(94) }], "100 characters in ten chunks: one event")
  await t.rejects(eventsOf([...pieces, "b", "\n\n"], 100), new SseLineTooLongError(100), "101 characters, still open: refused before its end comes")
  await t.rejects(eventsOf([line + "bb\n\n"], 100), SseLineTooLongError, "a long line within one chunk too")
  await t.rejects(eventsOf(["data: 1234\n".repeat(30)], 100), SseLineTooLongError, "many short data lines of one event")
})
