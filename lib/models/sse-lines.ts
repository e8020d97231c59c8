/** One server-sent event: its `event:` name ("message" when it gave none) and its `data:` lines joined by "\n". */
export interface SseEvent {
  event: string
  data: string
}

/** A line (or one event's data) longer than the reader takes: the stream is refused, not buffered without end. */
export class SseLineTooLongError extends Error {
  constructor(readonly limit: number) {
    super(`a line of its event stream ran past ${limit} characters`)
    this.name = "SseLineTooLongError"
  }
}

/** The longest line (and event data) read by default: far above any honest chunk, far below what bloats a server. */
export const DEFAULT_MAX_LINE_LENGTH = 8 * 1024 * 1024

/**
 * The events of a `text/event-stream` body, as its bytes arrive: lines end in
 * "\n", "\r\n" or "\r", a blank line ends an event, ":" lines are comments,
 * and fields other than event and data are ignored. A character split across
 * two chunks is decoded whole. A last event left without its blank line is
 * still given when the body ends after a whole line; a last line cut short
 * is dropped, as half a JSON chunk is no chunk.
 *
 * Linear in the body's length: each chunk is scanned once, and the start of a
 * line still open is kept as pieces, joined once when its end comes. A line,
 * or an event's data, past `maxLineLength` characters throws SseLineTooLongError.
 */
export async function* sseEvents(body: AsyncIterable<Uint8Array>, maxLineLength = DEFAULT_MAX_LINE_LENGTH): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder()
  let pending: string[] = [] // the start of a line whose end has not arrived, in pieces
  let pendingLength = 0
  let event = ""
  let data: string[] = []
  let dataLength = 0
  let afterCr = false // a "\r" ended the last chunk: a "\n" starting the next one belongs to it
  // Its own regex: a shared one's lastIndex would be moved by another stream read while this one waits at a yield.
  const lineBreak = /\r\n|\r|\n/g
  for await (const chunk of body) {
    let text = decoder.decode(chunk, { stream: true })
    if (text === "") continue
    if (afterCr && text.startsWith("\n")) text = text.slice(1)
    afterCr = text.endsWith("\r")
    let start = 0
    lineBreak.lastIndex = 0
    for (let found = lineBreak.exec(text); found !== null; found = lineBreak.exec(text)) {
      let line = text.slice(start, found.index)
      if (pending.length > 0) {
        pending.push(line)
        line = pending.join("")
        pending = []
        pendingLength = 0
      }
      start = found.index + found[0].length
      if (line.length > maxLineLength) throw new SseLineTooLongError(maxLineLength)
      if (line !== "") {
        field(line)
        continue
      }
      if (data.length > 0) yield { event: event || "message", data: data.join("\n") }
      event = ""
      data = []
      dataLength = 0
    }
    if (start < text.length) {
      pending.push(start === 0 ? text : text.slice(start))
      pendingLength += text.length - start
      if (pendingLength > maxLineLength) throw new SseLineTooLongError(maxLineLength)
    }
  }
  if (data.length > 0) yield { event: event || "message", data: data.join("\n") }

  function field(line: string): void {
    if (line.startsWith(":")) return
    const colon = line.indexOf(":")
    const name = colon === -1 ? line : line.slice(0, colon)
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "")
    if (name === "event") event = value
    else if (name === "data") {
      // Many data lines make one event: their sum is bounded as one line is.
      dataLength += value.length + 1
      if (dataLength > maxLineLength) throw new SseLineTooLongError(maxLineLength)
      data.push(value)
    }
  }
}
