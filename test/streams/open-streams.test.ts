import { EventEmitter } from "node:events"
import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { OpenStreams } from "../../lib/streams/open-streams.js"
import { serve } from "../../plugins/serve.js"
import { readSse, rpc, userMessage, waitFor } from "../fixtures/helpers.js"

/** Many concurrent streams: no MaxListenersExceededWarning, and closing the server still ends each one. */

t.test("20 concurrent streams print no warning, and stopping the server ends them all", async (t) => {
  const warnings: Error[] = []
  const onWarning = (warning: Error) => warnings.push(warning)
  process.on("warning", onWarning)
  t.teardown(() => void process.off("warning", onWarning))

  // A model that answers only when aborted: every stream stays open until the server stops.
  const client = createLocalClient(({ signal }) => new Promise((_resolve, reject) => signal?.addEventListener("abort", () => reject(signal.reason), { once: true })))
  const srv = await serve("127.0.0.1:0", { client, a2a: { shutdownGraceMs: 50 }, logger: false })
  t.teardown(() => srv.stop())

  const streams = await Promise.all(
    Array.from({ length: 20 }, async () => {
      const res = await fetch(srv.url + "/", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(rpc("message/stream", { message: userMessage("wait") })),
      })
      return readSse(res.body!)
    }),
  )
  await waitFor(() => streams.every((s) => s.messages.some((m) => m.result?.status?.state === "working")), 10_000, "every stream to see its task working")
  // A warning is emitted on the next tick; a round trip to the server lets it land.
  await fetch(srv.url + "/.well-known/agent-card.json")
  t.same(warnings.map((w) => `${w.name}: ${w.message}`), [], "no warning while 20 streams are open")

  await srv.stop()
  const ended = await Promise.all(streams.map((s) => s.done))
  t.equal(ended.length, 20, "every stream ended")
  t.same(warnings.map((w) => w.name), [], "none on stopping either")
})

t.test("OpenStreams: the closing signal ends every open stream through one listener; a stream gone early leaves the set", async (t) => {
  const closing = new AbortController()
  const streams = new OpenStreams(closing.signal)
  const responses = Array.from({ length: 20 }, () => new EventEmitter())
  const signals = responses.map((raw) => streams.endedWhenGoneOrClosing(raw))
  t.equal(streams.size, 20)

  responses[0].emit("close") // this peer went away
  t.ok(signals[0].aborted, "a stream whose peer is gone ends")
  t.equal(streams.size, 19, "and is forgotten")
  t.notOk(signals[1].aborted)

  closing.abort()
  t.ok(signals.every((s) => s.aborted), "closing ends all the others")
  t.equal(streams.size, 0)
  t.ok(streams.endedWhenGoneOrClosing(new EventEmitter()).aborted, "a stream opened after closing is ended at once")
  t.equal(streams.size, 0)
})
