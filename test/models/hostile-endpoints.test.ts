import type { ServerResponse } from "node:http"
import t, { type Test } from "tap"
import { createClient, type ClientOptions } from "../../lib/client/client.js"
import { serve } from "../../plugins/serve.js"
import { callRpc, localServer, rpc, waitFor } from "../fixtures/helpers.js"

/*
 * Model endpoints that misbehave without end: a stream line that never ends, an answer far too large
 * (whole or streamed), a stream of valid chunks that never finishes. Each turn fails naming the limit
 * and its option, soon, without reading the rest; each endpoint sees the client hang up.
 */

const FAST = { retryBaseDelayMs: 1, maxRetries: 0 } as const

/** Writes `chunk` until the client goes away (or `max` writes), each write waiting for the socket to drain. */
async function writeForever(res: ServerResponse, chunk: string, max = 100_000): Promise<number> {
  let written = 0
  while (!res.destroyed && written < max) {
    if (!res.write(chunk)) await new Promise<void>((resolve) => (res.once("drain", resolve), res.once("close", resolve)))
    written++
  }
  return written
}

/** An endpoint answering every request with `answer`; `hungUp` resolves when a client has gone away mid-answer. */
async function endpoint(t: Test, answer: (res: ServerResponse) => Promise<void>) {
  let hungUp!: () => void
  const gone = new Promise<void>((resolve) => (hungUp = resolve))
  const url = await localServer(t, (req, res) => {
    req.resume()
    req.on("end", () => {
      res.on("close", () => (res.writableEnded ? undefined : hungUp()))
      void answer(res).catch(() => undefined)
    })
  })
  return { url, gone }
}

const openai = (url: string, opts: Partial<ClientOptions> = {}) => createClient({ baseUrl: url, style: "openai", model: "m", timeoutMs: 5000, ...FAST, ...opts })
const chunk = (text: string) => `data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\n`

t.test("a stream line that never ends fails the turn at maxLineLength", async (t) => {
  const { url, gone } = await endpoint(t, async (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    await writeForever(res, "data: " + "x".repeat(64 * 1024))
  })
  const started = Date.now()
  await t.rejects(openai(url, { maxLineLength: 1024 * 1024 }).run("hi", { onText: () => {} }), /event stream held a line \(or an event\) longer than 1048576 characters; the limit is createClient's maxLineLength \(--model-max-line\)/)
  await gone
  t.ok(Date.now() - started < 30_000, "soon, not after the endpoint gives up")
})

t.test("a whole answer past maxResponseBytes fails without being read to its end", async (t) => {
  let written = 0
  const { url, gone } = await endpoint(t, async (res) => {
    res.writeHead(200, { "content-type": "application/json" })
    written = await writeForever(res, "[" + "0,".repeat(32 * 1024), 3200) // ~200 MB if read whole
  })
  await t.rejects(openai(url, { maxResponseBytes: 2 * 1024 * 1024 }).run("hi"), /answer ran past 2097152 bytes; the limit is createClient's maxResponseBytes \(--model-max-response\)/)
  await gone
  await waitFor(() => written > 0, 10_000, "the endpoint to stop writing")
  t.ok(written < 3200, `the endpoint stopped early (${written} of 3200 writes)`)
})

t.test("a streamed answer past maxResponseBytes fails too, after its text began", async (t) => {
  const { url, gone } = await endpoint(t, async (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    await writeForever(res, chunk("y".repeat(16 * 1024)))
  })
  let streamed = 0
  await t.rejects(openai(url, { maxResponseBytes: 1024 * 1024 }).run("hi", { onText: (text) => (streamed += text.length) }), /the limit is createClient's maxResponseBytes/)
  await gone
  t.ok(streamed > 0 && streamed <= 1024 * 1024, `some text streamed first (${streamed} characters), never more than the limit`)
})

t.test("valid chunks without end fail the turn at turnTimeoutMs, though no wait passed timeoutMs", async (t) => {
  const { url, gone } = await endpoint(t, async (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    while (!res.destroyed) {
      res.write(chunk("."))
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })
  await t.rejects(openai(url, { timeoutMs: 2000, turnTimeoutMs: 500 }).run("hi", { onText: () => {} }), /turn took longer than 500 ms in all; the limit is createClient's turnTimeoutMs \(--model-turn-timeout\)/)
  await gone
})

t.test("served: the Task fails naming the limit while the server keeps answering", async (t) => {
  const { url } = await endpoint(t, async (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    await writeForever(res, "data: " + "z".repeat(64 * 1024))
  })
  const srv = await serve("127.0.0.1:0", { client: openai(url, { maxLineLength: 4 * 1024 * 1024 }), logger: false })
  t.teardown(() => srv.stop())
  const sent = await callRpc(srv.url, rpc("SendMessage", { message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "hi" }] }, configuration: { returnImmediately: true } }), { "a2a-version": "1.0" })
  const id = sent.result.task.id as string
  const card = await fetch(`${srv.url}/.well-known/agent-card.json`)
  t.equal(card.status, 200, "the agent card answers during the attack")
  await waitFor(async () => (await callRpc(srv.url, rpc("GetTask", { id }), { "a2a-version": "1.0" })).result.status.state === "TASK_STATE_FAILED", 60_000, "the Task to fail")
  const failed = await callRpc(srv.url, rpc("GetTask", { id }), { "a2a-version": "1.0" })
  t.match(JSON.stringify(failed.result.status.message), /maxLineLength/, "its status names the limit")
})
