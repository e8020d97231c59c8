import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js"

/** The largest MCP message read from a server over HTTP, by default: far above any honest one. */
export const DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024

/** An MCP server's answer past its message limit: the stream is cut instead of buffered without end. */
export class McpMessageTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`the MCP server sent a message larger than ${limit} bytes (maxMessageBytes)`)
    this.name = "McpMessageTooLargeError"
  }
}

const NEWLINE = 0x0a

/**
 * `fetch` whose answers are bounded per message: a JSON answer is one message, so its whole body; an
 * event stream carries many, each ending at a blank line, so the bytes since the last blank line. Past
 * `maxMessageBytes` the body errors with McpMessageTooLargeError (and the connection is dropped), so an
 * endless line or a huge result costs the server that many bytes, not all of them.
 */
export function boundedFetch(maxMessageBytes: number, base: FetchLike = fetch): FetchLike {
  return async (url, init) => {
    const response = await base(url, init)
    if (response.body === null) return response
    const eventStream = response.headers.get("content-type")?.toLowerCase().startsWith("text/event-stream") ?? false
    let size = 0
    let lastWasNewline = false
    const limiter = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        if (!eventStream) {
          size += chunk.byteLength
        } else {
          // Counted from the last blank line ("\n\n"); one pass over the bytes, no copy.
          for (let i = 0; i < chunk.byteLength; i++) {
            const newline = chunk[i] === NEWLINE
            size = newline && lastWasNewline ? 0 : size + 1
            lastWasNewline = newline
          }
        }
        if (size > maxMessageBytes) return controller.error(new McpMessageTooLargeError(maxMessageBytes))
        controller.enqueue(chunk)
      },
    })
    return new Response(response.body.pipeThrough(limiter), { status: response.status, statusText: response.statusText, headers: response.headers })
  }
}
