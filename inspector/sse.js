// Server-sent events read from a fetch() body. EventSource cannot send an Authorization header,
// so the page reads the stream itself: lines end with CRLF, LF or CR; a blank line ends an event;
// `data:` lines join with "\n"; a line starting with ":" is a comment (the server's keep-alive).

/**
 * The events of a text/event-stream body, as `{ id, event, data }` (`data` the joined text;
 * `event` "message" when unnamed; `id` the last `id:` seen, as the spec's reader keeps it).
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<{ id: string | undefined, event: string, data: string }>}
 */
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ""
  let lastId
  let event = ""
  let data = []
  try {
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      buffer += value
      // A CR at the end may be the first half of a CRLF: it waits for the next chunk.
      const lines = buffer.split(/\r\n|\n|\r(?!$)/)
      buffer = lines.pop() // split gives at least one piece: the unfinished line
      for (const line of lines) {
        if (line === "") {
          if (data.length > 0) yield { id: lastId, event: event || "message", data: data.join("\n") }
          event = ""
          data = []
          continue
        }
        if (line.startsWith(":")) continue
        const colon = line.indexOf(":")
        const field = colon === -1 ? line : line.slice(0, colon)
        let text = colon === -1 ? "" : line.slice(colon + 1)
        if (text.startsWith(" ")) text = text.slice(1)
        if (field === "data") data.push(text)
        else if (field === "event") event = text
        else if (field === "id" && !text.includes("\0")) lastId = text
      }
    }
  } finally {
    // A reader that stops early (the page moved on) closes the response too.
    await reader.cancel().catch(() => {})
  }
}
