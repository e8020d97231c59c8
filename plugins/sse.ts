import type { FastifyReply } from "fastify"
import type { StreamFrame } from "../lib/a2a/jsonrpc.js"
import type { SseFrame } from "../lib/a2a/rest.js"

/**
 * Writes each event (a JSON-RPC response, or a REST StreamResponse or error
 * with its `event:` name) as a server-sent event (with `id:` its position in
 * the Task's event log, which a peer sends back as `Last-Event-ID` to resume), waiting for the socket to
 * drain when the peer reads slowly, and ends the response when the stream
 * ends or the peer goes away. Every `heartbeatMs` it writes a comment line,
 * which SSE clients ignore: proxies see traffic and keep the stream, and a
 * write to a dead peer fails, which closes the connection and ends the stream.
 */
export async function writeEvents(reply: FastifyReply, stream: AsyncIterable<StreamFrame | SseFrame>, peerGone: AbortSignal, heartbeatMs: number, cutOff?: AbortSignal): Promise<void> {
  const raw = reply.raw
  // A reader too far behind is dropped at once, what waits unread included: it resumes from the last id it has.
  const cut = () => {
    reply.log.warn("a2a stream reader fell too far behind; its connection was dropped (it can resume with Last-Event-ID)")
    raw.destroy()
  }
  cutOff?.addEventListener("abort", cut, { once: true })
  // HTTP/2 forbids connection headers (Node drops it with a warning): only an HTTP/1 peer is told to keep the connection.
  const keepAlive = reply.request.raw.httpVersionMajor === 1 && { connection: "keep-alive" }
  raw.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", ...keepAlive, "x-accel-buffering": "no" })
  const heartbeat = setInterval(() => {
    if (!raw.writableEnded && !peerGone.aborted) raw.write(": keep-alive\n\n")
  }, heartbeatMs)
  heartbeat.unref()
  try {
    for await (const event of stream) {
      if (peerGone.aborted) break
      const { id } = event
      const named = "event" in event && event.event !== undefined ? `event: ${event.event}\n` : ""
      const frame = `${id === undefined ? "" : `id: ${id}\n`}${named}data: ${JSON.stringify("response" in event ? event.response : event.data)}\n\n`
      if (!raw.write(frame)) await drained(raw, peerGone)
    }
  } catch (err) {
    reply.log.error({ err }, "a2a stream failed")
  } finally {
    cutOff?.removeEventListener("abort", cut)
    clearInterval(heartbeat)
    if (!raw.writableEnded) raw.end()
  }
}

function drained(raw: FastifyReply["raw"], peerGone: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      raw.off("drain", done)
      peerGone.removeEventListener("abort", done)
      resolve()
    }
    raw.once("drain", done)
    peerGone.addEventListener("abort", done, { once: true })
  })
}

