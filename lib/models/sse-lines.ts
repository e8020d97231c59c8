/** One server-sent event: its `event:` name ("message" when it gave none) and its `data:` lines joined by "\n". */
export interface SseEvent {
  event: string
  data: string
}

/**
 * The events of a `text/event-stream` body, as its bytes arrive: lines end in
 * "\n", "\r\n" or "\r", a blank line ends an event, ":" lines are comments,
 * and fields other than event and data are ignored. A character split across
 * two chunks is decoded whole. A last event left without its blank line is
 * still given when the body ends after a whole line; a last line cut short
 * is dropped, as half a JSON chunk is no chunk.
 */
export async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder()
  let pending = "" // the start of a line whose end has not arrived
  let event = ""
  let data: string[] = []
  let afterCr = false // a "\r" ended the last chunk: a "\n" starting the next one belongs to it
  for await (const chunk of body) {
    let text = decoder.decode(chunk, { stream: true })
    if (text === "") continue
    if (afterCr && text.startsWith("\n")) text = text.slice(1)
    afterCr = text.endsWith("\r")
    const lines = (pending + text).split(/\r\n|\r|\n/)
    pending = lines.pop() ?? ""
    for (const line of lines) {
      if (line !== "") {
        field(line)
        continue
      }
      if (data.length > 0) yield { event: event || "message", data: data.join("\n") }
      event = ""
      data = []
    }
  }
  if (data.length > 0) yield { event: event || "message", data: data.join("\n") }

  function field(line: string): void {
    if (line.startsWith(":")) return
    const colon = line.indexOf(":")
    const name = colon === -1 ? line : line.slice(0, colon)
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "")
    if (name === "event") event = value
    else if (name === "data") data.push(value)
  }
}
