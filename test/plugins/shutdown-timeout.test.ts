import { Writable } from "node:stream"
import Fastify from "fastify"
import { pino } from "pino"
import t from "tap"
import type { Client } from "../../lib/client/client.js"
import { toolnexusA2A } from "../../plugins/a2a.js"
import { serve } from "../../plugins/serve.js"
import { RecordingStore, rpc, userMessage, waitFor } from "../fixtures/helpers.js"

/**
 * Fastify gives each preClose hook `pluginTimeout` ms (avvio's timeout,
 * 10 s by default). The plugin's hook waits the grace, then 1 s for aborted
 * work, then saves: it must fit, or close() rejects and the Task stays working.
 */

/** A client that never answers and ignores the abort: only the shutdown's "failed" can end its Task. */
const stuck: Client = { model: "stuck", run: () => new Promise(() => {}) }

async function startStuckTask(url: string, store: RecordingStore): Promise<string> {
  const res = await fetch(url + "/", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(rpc("SendMessage", { message: userMessage("x"), configuration: { blocking: false } })) })
  const answer = (await res.json()) as { result: { id: string } }
  const id = answer.result.id
  await waitFor(() => store.statesOf(id).includes("working"), 5000, "the task to be working")
  return id
}

t.test("on a host's Fastify whose pluginTimeout is shorter than grace + abort wait, the grace is cut to fit: close() resolves and the Task is failed", async (t) => {
  const store = new RecordingStore()
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)))
      done()
    },
  })
  const app = Fastify({ pluginTimeout: 1500, loggerInstance: pino(stream) })
  // Grace 1000 + the 1 s abort wait passes the 1500 ms a preClose hook may take.
  await app.register(toolnexusA2A, { client: stuck, store, shutdownGraceMs: 1000 })
  t.match(
    lines.find((l) => /shutdownGraceMs cut/.test(String(l.msg))),
    { level: 40, shutdownGraceMs: 1000, pluginTimeout: 1500, graceMs: 0, msg: /pluginTimeout, which must be at least the grace \+ 2000 ms/ },
    "the host is told its grace was cut, and what pluginTimeout it needs",
  )
  await app.listen({ host: "127.0.0.1", port: 0 })
  const address = app.server.address() as { port: number }
  const id = await startStuckTask(`http://127.0.0.1:${address.port}`, store)

  await t.resolves(app.close(), "close() ends within Fastify's timeout")
  t.equal((await store.get(id))?.status.state, "failed", "the stuck Task is saved failed")
})

t.test("serve() with the default grace (10 s) and a Task that never finishes: stop() resolves and the Task is failed", { timeout: 60_000 }, async (t) => {
  const store = new RecordingStore()
  const srv = await serve("127.0.0.1:0", { client: stuck, a2a: { store }, logger: false })
  const id = await startStuckTask(srv.url, store)
  const began = performance.now()
  await t.resolves(srv.stop(), "stop() ends within Fastify's timeout")
  t.ok(performance.now() - began >= 10_000, "the Task had its whole 10 s grace")
  t.equal((await store.get(id))?.status.state, "failed", "the stuck Task is saved failed")
})

t.test("serve() sets Fastify's pluginTimeout to fit the grace it is given, never below Fastify's 10 s", async (t) => {
  for (const [shutdownGraceMs, expected] of [[undefined, 12_000], [100, 10_000], [30_000, 32_000], [2 ** 31, 0]] as const) {
    const srv = await serve("127.0.0.1:0", { client: stuck, a2a: { shutdownGraceMs }, logger: false })
    t.equal(srv.app.initialConfig.pluginTimeout, expected, `grace ${shutdownGraceMs}`)
    await srv.stop()
  }
  await t.rejects(serve("127.0.0.1:0", { client: stuck, a2a: { shutdownGraceMs: -1 }, logger: false }), /opts\.shutdownGraceMs should be a number of milliseconds >= 0/, "a bad grace is still the plugin's clear error")
})
