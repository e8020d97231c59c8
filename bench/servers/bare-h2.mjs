// The floor under the gRPC rows: node:http2 alone answering every stream with a gRPC frame of fixed bytes (the same
// answers as servers/bare-grpc.mjs) and grpc-status 0, no gRPC library: what Node's HTTP/2 costs per unary call, so a
// gRPC server written straight on node:http2 could not be cheaper than this.
import http2 from "node:http2"
import { portOf, reportStartFailure, serveParent } from "../child.mjs"

/**
 * A gRPC length-prefixed message: a 0 byte (not compressed), the length as 4 bytes big-endian, the bytes.
 * @param {Buffer} bytes
 */
function framed(bytes) {
  const frame = Buffer.allocUnsafe(5 + bytes.length)
  frame[0] = 0
  frame.writeUInt32BE(bytes.length, 1)
  bytes.copy(frame, 5)
  return frame
}
/** @type {Record<string, Buffer>} */
const frames = { GetTask: framed(Buffer.alloc(0)), SendMessage: framed(Buffer.alloc(0)) }
/** @type {Record<string, string | undefined>} */
const PATHS = { "/lf.a2a.v1.A2AService/GetTask": "GetTask", "/lf.a2a.v1.A2AService/SendMessage": "SendMessage" }

try {
  const server = http2.createServer()
  server.on("stream", (stream, headers) => {
    const name = PATHS[headers[":path"] ?? ""]
    // The request is read to its end, not decoded.
    stream.on("data", () => {})
    stream.on("end", () => {
      if (name === undefined) {
        stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "12" }, { endStream: true })
        return
      }
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true })
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }))
      stream.end(frames[name])
    })
  })
  await new Promise((/** @type {(value?: undefined) => void} */ resolve, reject) => server.once("error", reject).listen(0, "127.0.0.1", resolve))
  serveParent(
    {
      // { GetTask, SendMessage }: base64 of the answers to give.
      payload: async (/** @type {Record<string, string | undefined>} */ given) => {
        for (const name of Object.keys(frames)) {
          const text = given[name]
          if (text !== undefined) frames[name] = framed(Buffer.from(text, "base64"))
        }
        return {}
      },
    },
    () => new Promise((resolve) => server.close(() => resolve())),
  )
  process.send?.({ ready: true, grpc: `127.0.0.1:${portOf(server)}` })
} catch (err) {
  reportStartFailure(err)
}
