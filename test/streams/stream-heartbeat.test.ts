import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { serve } from "../../plugins/serve.js"
import { deferred, postRpc, rpc, userMessage } from "../fixtures/helpers.js"

/** A client whose run waits until it is aborted: the stream stays open with nothing to send. */
const waitingClient = (started: () => void) =>
  createLocalClient(({ signal }) => {
    started()
    return new Promise((_resolve, reject) => signal?.addEventListener("abort", () => reject(signal.reason), { once: true }))
  })

t.test("an open stream with nothing to say gets a `: keep-alive` comment every streamHeartbeatMs", async (t) => {
  const running = deferred()
  const srv = await serve("127.0.0.1:0", { client: waitingClient(running.resolve), logger: false, a2a: { streamHeartbeatMs: 50, shutdownGraceMs: 0 } })
  t.teardown(() => srv.stop())
  const controller = new AbortController()
  t.teardown(() => controller.abort())
  const res = await fetch(srv.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(rpc("message/stream", { message: userMessage("wait") })),
    signal: controller.signal,
  })
  t.equal(res.status, 200)
  t.match(res.headers.get("content-type"), /text\/event-stream/)
  await running.promise
  // Read the raw stream until two comment lines have come: the task sends nothing more while it runs.
  const decoder = new TextDecoder()
  let text = ""
  for await (const chunk of res.body!) {
    text += decoder.decode(chunk, { stream: true })
    if ((text.match(/^: keep-alive\n\n/gm) ?? []).length >= 2) break
  }
  const events = text.split("\n\n").filter(Boolean)
  t.ok(events.filter((e) => e === ": keep-alive").length >= 2, "keep-alive comments arrived")
  t.ok(events.some((e) => e.startsWith("id: ")), "the task's own events came too")
  for (const e of events) t.match(e, /^(: keep-alive|id: \d+\ndata: \{.*\})$/s, "every event is a comment, or a JSON data line with its id")
})

t.test("streamHeartbeatMs must be a positive integer", async (t) => {
  await t.rejects(
    serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false, a2a: { streamHeartbeatMs: 0 } }),
    /opts\.streamHeartbeatMs should be a positive integer/,
  )
  // Past Node's longest timer, setInterval would fire every millisecond.
  await t.rejects(
    serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false, a2a: { streamHeartbeatMs: 2 ** 31 } }),
    /opts\.streamHeartbeatMs should be a positive integer number of milliseconds, at most 2147483647/,
  )
})

t.test("a stream that ends before the first interval carries no comment", async (t) => {
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "done"), logger: false, a2a: { streamHeartbeatMs: 60_000 } })
  t.teardown(() => srv.stop())
  const text = await (await postRpc(srv.url, rpc("message/stream", { message: userMessage("hi") }))).text()
  t.notMatch(text, /keep-alive/, "no comment before the first interval")
})
