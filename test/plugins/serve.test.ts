import { Writable } from "node:stream"
import { pino } from "pino"
import t from "tap"
import { createClient, createLocalClient } from "../../lib/client/client.js"
import { createLogger, parseAddress, serve } from "../../plugins/serve.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { createToolkit } from "../../lib/tools/toolkit.js"
import { callRpc, deferred, modelServer, postRpc, RecordingStore, rpc, tmpDir, userMessage, waitFor } from "../fixtures/helpers.js"

/** A pino logger writing JSON lines into an array. */
function capturedLogger() {
  const lines: Array<Record<string, unknown>> = []
  const raw: string[] = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      raw.push(String(chunk))
      lines.push(JSON.parse(String(chunk)))
      done()
    },
  })
  return { logger: pino({ level: "info" }, stream), lines, raw }
}

t.test("parseAddress", async (t) => {
  t.same(parseAddress("127.0.0.1:0"), { host: "127.0.0.1", port: 0 })
  t.same(parseAddress("[::1]:8080"), { host: "::1", port: 8080 })
  t.same(parseAddress("localhost:4000"), { host: "localhost", port: 4000 })
  t.same(parseAddress(":4000"), { host: "127.0.0.1", port: 4000 })
  for (const bad of ["127.0.0.1", "host:99999", "::1:80", "a:b", ""]) t.throws(() => parseAddress(bad), /should be "host:port"/, bad)
  t.throws(() => parseAddress(42 as never), /addr should be a "host:port" string/)
})

t.test("serve() listens, answers, logs one line per request and per transition, and stops", async (t) => {
  const { logger, lines } = capturedLogger()
  const tk = await createToolkit({ builtins: false })
  const store = new RecordingStore()
  const srv = await tk.serve("127.0.0.1:0", { client: createLocalClient(() => "served"), a2a: { name: "logged", store }, logger })
  t.teardown(() => srv.stop())
  t.match(srv.url, /^http:\/\/127\.0\.0\.1:\d+$/)

  const sent = await callRpc(srv.url, rpc("SendMessage", { message: userMessage("hi") }))
  const id = sent.result.id
  await waitFor(() => store.statesOf(id).includes("completed"))
  const got = await callRpc(srv.url, rpc("GetTask", { id }))
  t.equal(got.result.status.state, "completed")
  const missing = await callRpc(srv.url, rpc("GetTask", { id: "nope" }))
  t.equal(missing.error.code, -32001)

  const requests = lines.filter((l) => l.msg === "a2a request")
  t.equal(requests.length, 3, "one line per request")
  t.match(requests[0], { reqId: String, method: "SendMessage", taskId: id, outcome: "ok", durationMs: Number })
  t.match(requests[2], { method: "GetTask", taskId: "nope", outcome: -32001 })
  const transitions = lines.filter((l) => l.msg === "task state changed" && l.taskId === id).map((l) => l.state)
  t.same(transitions, ["submitted", "working", "completed"], "one line per transition")
  t.notOk(lines.some((l) => l.msg === "incoming request"), "Fastify's own request lines are replaced by ours")

  await srv.stop()
  await srv.close()
  await t.rejects(fetch(srv.url + "/"), "the port is closed after stop()")
})

t.test("serve() on IPv6 loopback", async (t) => {
  const srv = await serve("[::1]:0", { client: createLocalClient(() => "v6"), logger: false })
  t.teardown(() => srv.stop())
  t.match(srv.url, /^http:\/\/\[::1\]:\d+$/)
  const sent = await callRpc(srv.url, rpc("SendMessage", { message: userMessage("x"), configuration: { blocking: true } }))
  t.equal(sent.result.artifacts[0].parts[0].text, "v6")
})

t.test("credentials never reach the log", async (t) => {
  const { logger, raw } = capturedLogger()
  const llm = await modelServer(t, [{ status: 401, json: { error: { message: "Incorrect API key provided" } } }])
  const client = createClient({ baseUrl: llm.url, style: "openai", model: "m", apiKey: "sk-model-key-123" })
  const store = new RecordingStore()
  const srv = await serve("127.0.0.1:0", { client, a2a: { store }, logger })
  t.teardown(() => srv.stop())
  const sent = await callRpc(srv.url, rpc("SendMessage", { message: userMessage("x") }), { authorization: "Bearer peer-token-456", "x-api-key": "peer-key-789" })
  await waitFor(() => store.statesOf(sent.result.id).includes("failed"))
  const task = await store.get(sent.result.id)
  t.match(task?.status.message?.parts[0], { text: /401/ }, "the failure reason reaches the task")
  const all = raw.join("")
  t.match(all, /task failed/)
  for (const secret of ["sk-model-key-123", "peer-token-456", "peer-key-789"]) t.notMatch(all, secret, `${secret} is not logged`)
  t.notMatch(JSON.stringify(task), "sk-model-key-123", "nor stored")
})

t.test("pino options and logger: false are accepted; a host's redact keeps ours", async (t) => {
  const quiet = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: { level: "error", redact: ["req.body.secret"] } })
  t.equal(quiet.app.log.level, "error")
  await quiet.stop()
  const lines: string[] = []
  const logger = createLogger({ redact: ["token"] }, { write: (line: string) => void lines.push(line) })
  logger.info({ token: "t-1", headers: { authorization: "Bearer b-2" } }, "x")
  t.notMatch(lines.join(""), /t-1|b-2/, "both the host's path and the credential paths are redacted")
  const silent = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false })
  t.equal((await callRpc(silent.url, rpc("GetTask", { id: "x" }))).error.code, -32001)
  await silent.stop()
})

t.test("stop() lets an in-flight task finish", async (t) => {
  const gate = deferred<string>()
  const store = new RecordingStore()
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => gate.promise), a2a: { store }, logger: false })
  const sent = await callRpc(srv.url, rpc("SendMessage", { message: userMessage("x") }))
  await waitFor(() => store.statesOf(sent.result.id).includes("working"))
  const stopping = srv.stop()
  // Once stop() has begun, new requests get 503 while it waits for the task.
  await waitFor(async () => (await postRpc(srv.url, rpc("GetTask", { id: sent.result.id }))).status === 503, 5000, "stop() to begin")
  gate.resolve("made it")
  await stopping
  t.same(store.statesOf(sent.result.id), ["submitted", "working", "completed"])
})

t.test("stop() does not wait on a stream following a task of another server", async (t) => {
  const dir = tmpDir(t)
  const hold = deferred<string>()
  const a = await serve("127.0.0.1:0", { client: createLocalClient(() => hold.promise), a2a: { store: `file:${dir}` }, logger: false })
  t.teardown(async () => {
    hold.resolve("done")
    await a.stop()
  })
  const b = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), a2a: { store: `file:${dir}`, shutdownGraceMs: 50 }, logger: false })
  const sent = await callRpc(a.url, rpc("SendMessage", { message: userMessage("x") }))
  const files = new FileTaskStore(dir)
  await waitFor(async () => (await files.get(sent.result.id))?.status.state === "working")
  const following = await postRpc(b.url, rpc("SubscribeToTask", { id: sent.result.id }))
  const reading = following.text()
  const started = Date.now()
  await b.stop()
  t.ok(Date.now() - started < 5000, "stop() returned without waiting for A's task")
  t.match(await reading, /"state":"working"/, "the stream had sent the task, then ended")
})

t.test("serve() refuses a taken port with the listen error", async (t) => {
  const first = await serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false })
  t.teardown(() => first.stop())
  const port = new URL(first.url).port
  await t.rejects(serve(`127.0.0.1:${port}`, { client: createLocalClient(() => "x"), logger: false }), /EADDRINUSE/)
})

t.test("toolkit.close() stops what toolkit.serve() started", async (t) => {
  const tk = await createToolkit({ builtins: false })
  const srv = await tk.serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false })
  await tk.close()
  await t.rejects(fetch(srv.url + "/"))
})
