// Server D, the ceiling: a bare Fastify POST route answering a task-sized JSON-RPC response.
import Fastify from "fastify"
import { portOf, reportStartFailure, serveParent } from "../child.mjs"

try {
  // What a GetTask answer of the toolnexus server looks like; the orchestrator replaces it with a real one.
  let payload = { jsonrpc: "2.0", id: 1, result: { id: "t", status: { state: "TASK_STATE_COMPLETED" } } }
  const app = Fastify({ logger: false })
  app.post("/", async () => payload)
  await app.listen({ host: "127.0.0.1", port: 0 })
  serveParent({ payload: async (/** @type {typeof payload} */ value) => void (payload = value) }, () => app.close())
  const port = portOf(app.server)
  process.send?.({ ready: true, url: `http://127.0.0.1:${port}`, port })
} catch (err) {
  reportStartFailure(err)
}
