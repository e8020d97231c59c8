import { connect, type Socket } from "node:net"
import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { serve } from "../../plugins/serve.js"
import { timeoutOptions } from "../../plugins/server-timeouts.js"

/** A raw TCP connection to a served agent, with everything it received and a promise of its close. */
function rawSocket(url: string): { socket: Socket; received: () => string; closed: Promise<void> } {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  let text = ""
  socket.on("data", (chunk) => (text += String(chunk)))
  socket.on("error", () => {})
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
  return { socket, received: () => text, closed }
}

t.test("timeouts: defaults, and bad values name the field", async (t) => {
  t.match(timeoutOptions(undefined), { requestTimeout: 30_000, keepAliveTimeout: 72_000, http: { headersTimeout: 10_000 } })
  t.match(timeoutOptions({ requestMs: 500 }), { requestTimeout: 500, http: { headersTimeout: 500 } })
  t.match(timeoutOptions({ headersMs: 45_000 }), { requestTimeout: 45_000, http: { headersTimeout: 45_000 } }, "headers alone longer than the default request time: the request gets as long")
  t.throws(() => timeoutOptions({ requestMs: 0 }), /timeouts\.requestMs should be a positive integer/)
  t.throws(() => timeoutOptions({ idleMs: 1.5 }), /timeouts\.idleMs should be a positive integer/)
  t.throws(() => timeoutOptions({ requestMs: 100, headersMs: 200 }), /timeouts\.headersMs \(200\) should be at most timeouts\.requestMs \(100\)/)
})

t.test("a body dribbled slower than timeouts.requestMs gets its connection closed", async (t) => {
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false, timeouts: { requestMs: 300, headersMs: 300 } })
  t.teardown(() => srv.stop())
  const { socket, received, closed } = rawSocket(srv.url)
  const started = performance.now()
  socket.write("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
  // The peer keeps the socket busy, one byte at a time, so only the whole-request deadline can end it.
  const dribble = setInterval(() => socket.writable && socket.write(" "), 20)
  t.teardown(() => clearInterval(dribble))
  await closed
  const elapsed = performance.now() - started
  t.ok(elapsed >= 250, `closed after the deadline, not before (${Math.round(elapsed)} ms)`)
  t.ok(elapsed < 10_000, `closed within a few check intervals of the deadline (${Math.round(elapsed)} ms)`)
  t.match(received(), /^HTTP\/1\.1 408/, "Node answers 408 Request Timeout")
})

t.test("a request whose headers never finish gets its connection closed after timeouts.headersMs", async (t) => {
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false, timeouts: { requestMs: 5000, headersMs: 200 } })
  t.teardown(() => srv.stop())
  const { socket, closed } = rawSocket(srv.url)
  const started = performance.now()
  socket.write("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
  await closed
  t.ok(performance.now() - started < 4000, "closed before the request deadline")
})

t.test("a 401 answer says connection: close and the socket closes", async (t) => {
  const srv = await serve("127.0.0.1:0", {
    client: createLocalClient(() => "x"),
    logger: false,
    a2a: { auth: { tokens: { "a-long-enough-secret-token": "alice" } } },
  })
  t.teardown(() => srv.stop())
  const { socket, received, closed } = rawSocket(srv.url)
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "x" } })
  socket.write(`POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  await closed
  t.match(received(), /^HTTP\/1\.1 401/)
  t.match(received(), /\r\nconnection: close\r\n/i)
})

t.test("a 413 answer says connection: close and the socket closes", async (t) => {
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false, a2a: { bodyLimit: 100 } })
  t.teardown(() => srv.stop())
  const { socket, received, closed } = rawSocket(srv.url)
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "x".repeat(200) } })
  socket.write(`POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  await closed
  t.match(received(), /^HTTP\/1\.1 413/)
  t.match(received(), /\r\nconnection: close\r\n/i)
})
