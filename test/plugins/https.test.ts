import { execFileSync } from "node:child_process"
import fs from "node:fs"
import http2, { type ClientHttp2Session, type IncomingHttpHeaders as Http2Headers } from "node:http2"
import https from "node:https"
import path from "node:path"
import tls from "node:tls"
import { GetTaskRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk"
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client"
import t, { type Test } from "tap"
import { Agent } from "undici"
import { createLocalClient, type ModelFunction } from "../../lib/client/client.js"
import { serve, type ServeOptions } from "../../plugins/serve.js"
import { kindsOf, rpc, selfSignedCertificate, sendStreamingRpc, sseMessages, userMessage, waitFor } from "../fixtures/helpers.js"

/**
 * serve() with `https`: one TLS listener speaking HTTP/2 and HTTP/1.1, each driven by a real client
 * trusting the test's own self-signed certificate.
 */

const CARD = "/.well-known/agent-card.json"
const V1 = { "a2a-version": "1.0" }

async function secureAgent(t: Test, respond: ModelFunction = ({ messages }) => `echo: ${messages.at(-1)?.content ?? ""}`, opts: Partial<ServeOptions> = {}) {
  const certificate = selfSignedCertificate(t)
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(respond), logger: false, https: { key: certificate.key, cert: certificate.cert }, ...opts })
  t.teardown(() => srv.stop())
  return { srv, ca: certificate.cert }
}

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
  /** "1.1" or "2.0": what the connection spoke. */
  httpVersion: string
}

/** An HTTP/1.1 request over TLS with node:https, trusting `ca`, on a kept-alive connection of `agent`. */
function http1(agent: https.Agent, url: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(url + path, { method: body === undefined ? "GET" : "POST", agent, headers: { "content-type": "application/json", ...headers } }, (res) => {
      let text = ""
      res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk))
      res.once("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text, httpVersion: res.httpVersion }))
    })
    req.once("error", reject)
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })
}

/** An HTTP/2 session trusting `ca`, closed when the test ends. */
function http2Session(t: Test, url: string, ca: string): ClientHttp2Session {
  const session = http2.connect(url, { ca })
  session.on("error", () => {})
  t.teardown(() => void session.destroy())
  return session
}

/** One HTTP/2 request on `session`, read to its end. */
function onHttp2(session: ClientHttp2Session, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": body === undefined ? "GET" : "POST", ":path": path, "content-type": "application/json", ...headers })
    let answered: Http2Headers = {}
    let text = ""
    stream.once("response", (responseHeaders) => (answered = responseHeaders))
    stream.setEncoding("utf8").on("data", (chunk: string) => (text += chunk))
    stream.once("end", () => resolve({ status: Number(answered[":status"]), headers: answered, text, httpVersion: "2.0" }))
    stream.once("error", reject)
    stream.end(body === undefined ? undefined : JSON.stringify(body))
  })
}

const sendMessage = (text: string) => rpc("SendMessage", { message: userMessage(text), configuration: { blocking: true } })

t.test("SendMessage over HTTPS, with HTTP/1.1 (node:https) and with HTTP/2 (node:http2) on the same listener", async (t) => {
  const { srv, ca } = await secureAgent(t)
  t.match(srv.url, /^https:\/\/127\.0\.0\.1:\d+$/, "the served URL says https")

  const agent = new https.Agent({ ca, keepAlive: true })
  t.teardown(() => agent.destroy())
  const overHttp1 = await http1(agent, srv.url, "/", sendMessage("over one"))
  t.equal(overHttp1.httpVersion, "1.1", "a peer without ALPN h2 is answered in HTTP/1.1")
  t.equal(overHttp1.status, 200)
  const task1 = JSON.parse(overHttp1.text).result
  t.equal(task1.status.state, "completed")
  t.equal(task1.artifacts[0].parts[0].text, "echo: over one")

  const session = http2Session(t, srv.url, ca)
  const overHttp2 = await onHttp2(session, "/", sendMessage("over two"))
  t.equal(session.alpnProtocol, "h2", "an HTTP/2 client is answered in HTTP/2")
  t.equal(overHttp2.status, 200)
  t.match(overHttp2.headers["content-type"], /^application\/json/)
  const task2 = JSON.parse(overHttp2.text).result
  t.equal(task2.status.state, "completed")
  t.equal(task2.artifacts[0].parts[0].text, "echo: over two")

  const got = JSON.parse((await onHttp2(session, "/", rpc("GetTask", { id: task1.id }))).text).result
  t.equal(got.id, task1.id, "a Task sent over HTTP/1.1 is read over HTTP/2")
})

t.test("SendStreamingMessage over HTTP/2: an SSE stream read to its end, without the HTTP/1 connection header", async (t) => {
  const { srv, ca } = await secureAgent(t)
  const warnings: Error[] = []
  const onWarning = (warning: Error) => warnings.push(warning)
  process.on("warning", onWarning)
  t.teardown(() => void process.off("warning", onWarning))

  const session = http2Session(t, srv.url, ca)
  const stream = await onHttp2(session, "/", sendStreamingRpc("stream me"), V1)
  t.equal(stream.status, 200)
  t.match(stream.headers["content-type"], /^text\/event-stream/)
  t.equal(stream.headers.connection, undefined, "no connection header: HTTP/2 forbids it")
  const results = sseMessages(stream.text).map((message) => message.result)
  t.same(kindsOf(results), ["task", "statusUpdate", "artifactUpdate", "statusUpdate"], "task first, then its updates; the stream ends at completion")
  t.equal(results.at(-1).statusUpdate.status.state, "TASK_STATE_COMPLETED")
  t.equal(results[2].artifactUpdate.artifact.parts[0].text, "echo: stream me")
  // A warning is emitted on the next tick: a round trip lets it land.
  await onHttp2(session, CARD)
  t.same(warnings.map((w) => `${w.name}: ${w.message}`), [], "and Node had nothing to warn about")

  const agent = new https.Agent({ ca })
  t.teardown(() => agent.destroy())
  const overHttp1 = await http1(agent, srv.url, "/", sendStreamingRpc("one"), V1)
  t.equal(overHttp1.headers.connection, "keep-alive", "an HTTP/1.1 stream still says keep-alive")
  t.equal(sseMessages(overHttp1.text).at(-1).result.statusUpdate.status.state, "TASK_STATE_COMPLETED")
})

t.test("the agent card advertises https:// URLs over both protocols; a2a.url given is left alone", async (t) => {
  const { srv, ca } = await secureAgent(t)
  const base = `${srv.url}/`
  const agent = new https.Agent({ ca })
  t.teardown(() => agent.destroy())
  const session = http2Session(t, srv.url, ca)
  for (const [how, answer] of [
    ["HTTP/1.1", await http1(agent, srv.url, CARD, undefined, V1)],
    ["HTTP/2", await onHttp2(session, CARD, undefined, V1)],
  ] as const) {
    const card = JSON.parse(answer.text)
    t.equal(card.url, base, `${how}: the card's url`)
    const httpInterfaces = card.supportedInterfaces.filter((face: { protocolBinding: string }) => face.protocolBinding !== "GRPC")
    t.ok(httpInterfaces.length > 0)
    t.same(new Set(httpInterfaces.map((face: { url: string }) => face.url)), new Set([base]), `${how}: every HTTP interface's url`)
  }

  const { srv: pinned, ca: pinnedCa } = await secureAgent(t, undefined, { a2a: { url: "http://agents.acme.test/desk/" } })
  const pinnedSession = http2Session(t, pinned.url, pinnedCa)
  const pinnedCard = JSON.parse((await onHttp2(pinnedSession, CARD)).text)
  t.equal(pinnedCard.url, "http://agents.acme.test/desk/", "an explicit URL is advertised as given, even http over a TLS listener")
})

t.test("the official @a2a-js/sdk client sends and gets over HTTPS (its fetch trusting the CA through an undici Agent)", async (t) => {
  const { srv, ca } = await secureAgent(t)
  const dispatcher = new Agent({ connect: { ca } })
  t.teardown(() => dispatcher.close())
  // Node's fetch takes undici's dispatcher option; its RequestInit type does not name it.
  const fetchImpl: typeof fetch = (input, init) => fetch(input, { ...init, dispatcher } as RequestInit)
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })], cardResolver: new DefaultAgentCardResolver({ fetchImpl }) }),
  )
  const sdk = await factory.createFromUrl(srv.url)
  const sent = (await sdk.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: "sdk-1", role: "ROLE_USER", parts: [{ text: "hello" }] } }))) as any
  t.equal(sent.status.state, TaskState.TASK_STATE_COMPLETED)
  const got = (await sdk.getTask(GetTaskRequest.fromJSON({ id: sent.id }))) as any
  t.equal(got.id, sent.id)
  t.equal(got.artifacts[0].parts[0].content.value, "echo: hello")
})

/** Whether an answer is an SSE stream (the slot was free) rather than a JSON refusal. */
const isStream = (contentType: unknown) => String(contentType).startsWith("text/event-stream")

/** A POST over HTTP/1.1 on `agent`, answered: whether with a stream, and a way to drop the connection as a peer going away would. */
function postHttp1(agent: https.Agent, url: string, body: unknown): Promise<{ stream: boolean; cut: () => void }> {
  return new Promise((resolve, reject) => {
    const req = https.request(url + "/", { method: "POST", agent, headers: { "content-type": "application/json", ...V1 } }, (res) => {
      const stream = isStream(res.headers["content-type"])
      if (!stream) res.resume()
      req.off("error", reject).on("error", () => {}) // a cut request errors
      resolve({ stream, cut: () => req.destroy() })
    })
    req.once("error", reject)
    req.end(JSON.stringify(body))
  })
}

/** A POST over HTTP/2 on `session`, answered: whether with a stream, its text so far, and its end. */
function postHttp2(session: ClientHttp2Session, body: unknown): Promise<{ stream: boolean; request: http2.ClientHttp2Stream; text: () => string; ended: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const request = session.request({ ":method": "POST", ":path": "/", "content-type": "application/json", ...V1 })
    let text = ""
    request.setEncoding("utf8").on("data", (chunk: string) => (text += chunk))
    const ended = new Promise<void>((resolveEnd, rejectEnd) => {
      request.once("end", resolveEnd)
      request.once("error", rejectEnd)
    })
    ended.catch(() => {})
    request.once("response", (headers) => resolve({ stream: isStream(headers["content-type"]), request, text: () => text, ended }))
    request.once("error", reject)
    request.end(JSON.stringify(body))
  })
}

t.test("a peer going away ends its stream, over HTTP/2 and over HTTP/1.1; stop() ends the streams still open, though their peers keep the connections", async (t) => {
  // The model answers only when aborted: the Task runs until the server stops.
  const waiting: ModelFunction = ({ signal }) => new Promise((_resolve, reject) => signal?.addEventListener("abort", () => reject(signal.reason), { once: true }))
  // One stream at a time: a subscription is answered with a stream only once the last one has ended.
  const { srv, ca } = await secureAgent(t, waiting, { a2a: { maxStreams: 1, shutdownGraceMs: 50 } })
  const session = http2Session(t, srv.url, ca)
  const agent = new https.Agent({ ca, keepAlive: true })
  t.teardown(() => agent.destroy())

  const first = await postHttp2(session, sendStreamingRpc("wait"))
  t.ok(first.stream)
  await waitFor(() => first.text().includes("TASK_STATE_WORKING"), 5000, "the task to be working")
  const subscribe = rpc("SubscribeToTask", { id: sseMessages(first.text())[0].result.task.id })
  const refused = await postHttp1(agent, srv.url, subscribe)
  t.notOk(refused.stream, "while the HTTP/2 stream is open, another is refused")

  first.request.close(http2.constants.NGHTTP2_CANCEL) // the HTTP/2 peer goes away
  let overHttp1: Awaited<ReturnType<typeof postHttp1>> | undefined
  await waitFor(async () => (overHttp1 = await postHttp1(agent, srv.url, subscribe)).stream, 5000, "the HTTP/2 stream's slot to be free")
  t.pass("the stream of the HTTP/2 peer that went away has ended")

  overHttp1!.cut() // the HTTP/1.1 peer goes away
  let last: Awaited<ReturnType<typeof postHttp2>> | undefined
  await waitFor(async () => (last = await postHttp2(session, subscribe)).stream, 5000, "the HTTP/1.1 stream's slot to be free")
  t.pass("the stream of the HTTP/1.1 peer that went away has ended")

  // An idle kept-alive HTTP/1.1 connection and the HTTP/2 one (with its stream open) stay with their peers: stop() does not wait on them.
  await http1(agent, srv.url, CARD)
  await srv.stop()
  await last!.ended
  t.match(sseMessages(last!.text()).at(-1), { result: { statusUpdate: { status: { state: "TASK_STATE_FAILED" } } } }, "the open stream got the Task's last state, then its end")
})

t.test("serve() https: a bad shape or material fails naming the option; Buffers and an encrypted key with its passphrase serve", async (t) => {
  const { key, cert, keyFile } = selfSignedCertificate(t)
  const other = selfSignedCertificate(t)
  const client = createLocalClient(() => "x")
  const refused = (https: unknown) => serve("127.0.0.1:0", { client, logger: false, https: https as ServeOptions["https"] })
  await t.rejects(refused("cert.pem"), { message: "toolnexus: serve() https should be an object { key, cert, ca?, passphrase? }" })
  await t.rejects(refused({ key }), { message: "toolnexus: serve() https.cert should be a PEM string or Buffer" })
  await t.rejects(refused({ key: 42, cert }), { message: "toolnexus: serve() https.key should be a PEM string or Buffer" })
  await t.rejects(refused({ key, cert: "" }), { message: "toolnexus: serve() https.cert should be a PEM string or Buffer" })
  await t.rejects(refused({ key, cert, ca: [cert, 7] }), { message: "toolnexus: serve() https.ca should be a PEM string or Buffer, or an array of them" })
  await t.rejects(refused({ key, cert, passphrase: 1234 }), { message: "toolnexus: serve() https.passphrase should be a string" })
  await t.rejects(refused({ key: other.key, cert }), { message: /^toolnexus: serve\(\) https\.key and https\.cert should be a PEM private key and its certificate: .*key values mismatch/ })
  await t.rejects(refused({ key: "not a key", cert }), { message: /^toolnexus: serve\(\) https\.key and https\.cert should be/ })

  // An encrypted key serves with its passphrase, and is refused without the right one.
  const encrypted = path.join(path.dirname(keyFile), "key.enc.pem")
  execFileSync("openssl", ["pkey", "-in", keyFile, "-aes256", "-passout", "pass:open-sesame", "-out", encrypted], { stdio: ["ignore", "ignore", "pipe"] })
  const encryptedKey = fs.readFileSync(encrypted)
  await t.rejects(refused({ key: encryptedKey, cert, passphrase: "wrong" }), { message: /^toolnexus: serve\(\) https\.key and https\.cert should be/ })
  const srv = await serve("127.0.0.1:0", { client, logger: false, https: { key: encryptedKey, cert: Buffer.from(cert), passphrase: "open-sesame" } })
  t.teardown(() => srv.stop())
  const session = http2Session(t, srv.url, cert)
  t.equal((await onHttp2(session, CARD)).status, 200, "Buffers and a passphrase serve")
})

t.test("the timeouts hold on the TLS listener: HTTP/1.1 headers and idle connections, an HTTP/2 body and idle session", async (t) => {
  const { srv, ca } = await secureAgent(t, undefined, { timeouts: { requestMs: 300, headersMs: 200, idleMs: 300 } })
  const { port } = new URL(srv.url)
  const within = <T>(what: string, promise: Promise<T>) => {
    const late = new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error(`${what}: still open after 8 s`)), 8000).unref())
    return Promise.race([promise, late])
  }

  // HTTP/1.1 headers that never finish: closed after headersMs (Node's own default there is 60 s).
  const slow = tls.connect({ host: "127.0.0.1", port: Number(port), ca, ALPNProtocols: ["http/1.1"] })
  slow.on("error", () => {})
  slow.resume() // read what comes (the 408), so the server's close is seen
  await new Promise((resolve) => slow.once("secureConnect", resolve))
  slow.write("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
  await within("unfinished HTTP/1.1 headers", new Promise((resolve) => slow.once("close", resolve)))
  t.pass("an HTTP/1.1 request whose headers never finish is closed")

  // An idle kept-alive HTTP/1.1 connection: closed after idleMs (no limit otherwise).
  const idle = tls.connect({ host: "127.0.0.1", port: Number(port), ca, ALPNProtocols: ["http/1.1"] })
  idle.on("error", () => {})
  let answered = ""
  idle.setEncoding("utf8").on("data", (chunk: string) => (answered += chunk))
  await new Promise((resolve) => idle.once("secureConnect", resolve))
  idle.write(`GET ${CARD} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`)
  await within("an idle HTTP/1.1 connection", new Promise((resolve) => idle.once("close", resolve)))
  t.match(answered, /^HTTP\/1\.1 200/, "it was answered, then closed once idle")

  // An HTTP/2 request body that never ends: its stream is reset after requestMs.
  const session = http2Session(t, srv.url, ca)
  const dribbled = session.request({ ":method": "POST", ":path": "/", "content-type": "application/json" })
  dribbled.on("error", () => {})
  dribbled.write("{")
  await within("an unfinished HTTP/2 body", new Promise((resolve) => dribbled.once("close", resolve)))
  t.equal(dribbled.rstCode, http2.constants.NGHTTP2_CANCEL, "reset by the server")
  t.notOk(session.closed || session.destroyed, "the connection's other streams are not touched")

  // The idle HTTP/2 connection itself: told to go away after idleMs.
  await within("an idle HTTP/2 session", new Promise((resolve) => session.once("goaway", resolve)))
  t.pass("an idle HTTP/2 connection is closed")
})

t.test("a refusal that closes the connection (401) ends an HTTP/2 session with a GOAWAY, and HTTP/1.1 with Connection: close", async (t) => {
  const { srv, ca } = await secureAgent(t, undefined, { a2a: { auth: { tokens: { "https-secret-0123456789": "alice" } } } })
  const warnings: string[] = []
  const onWarning = (warning: Error) => warnings.push(warning.message)
  process.on("warning", onWarning)
  t.teardown(() => void process.off("warning", onWarning))

  const session = http2Session(t, srv.url, ca)
  const goaway = new Promise<void>((resolve) => session.once("goaway", () => resolve()))
  const refused = await onHttp2(session, "/", sendMessage("hi"), V1)
  t.equal(refused.status, 401, "HTTP/2: refused without credentials")
  t.equal(refused.headers.connection, undefined, "with no connection header, which HTTP/2 forbids")
  await goaway
  t.pass("the server ended the session")
  t.notOk(warnings.some((warning) => /connection/i.test(warning)), "and Node warned of no connection header")

  const agent = new https.Agent({ ca, keepAlive: true })
  t.teardown(() => agent.destroy())
  const overHttp1 = await http1(agent, srv.url, "/", sendMessage("hi"), V1)
  t.equal(overHttp1.status, 401)
  t.equal(overHttp1.headers.connection, "close", "HTTP/1.1: Connection: close")
})
