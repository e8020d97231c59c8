import type { FastifyReply } from "fastify"
import type { JsonRpcResponse } from "../lib/a2a/jsonrpc.js"

/**
 * Writes each response as a server-sent event, waiting for the socket to
 * drain when the peer reads slowly, and ends the response when the stream
 * ends or the peer goes away.
 */
export async function writeEvents(reply: FastifyReply, stream: AsyncIterable<JsonRpcResponse>, peerGone: AbortSignal): Promise<void> {
  const raw = reply.raw
  raw.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" })
  try {
    for await (const message of stream) {
      if (peerGone.aborted) break
      if (!raw.write(`data: ${JSON.stringify(message)}\n\n`)) await drained(raw, peerGone)
    }
  } catch (err) {
    reply.log.error({ err }, "a2a stream failed")
  } finally {
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

