import { Writable } from "node:stream"
import { pino } from "pino"
import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { serve } from "../../plugins/serve.js"
import { callRpc, rpc, tmpDir } from "../fixtures/helpers.js"

/** An id the file store cannot hold (it has a NUL) names no Task: "not found", not an internal error. */

t.test("GetTask and CancelTask of an id with a NUL on a file store answer -32001 and log no error", async (t) => {
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)))
      done()
    },
  })
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "ok"), a2a: { store: `file:${tmpDir(t)}` }, logger: pino({ level: "info" }, stream) })
  t.teardown(() => srv.stop())

  for (const method of ["GetTask", "CancelTask"]) {
    const answer = await callRpc(srv.url, rpc(method, { id: "a\u0000b" }))
    t.equal(answer.error?.code, -32001, `${method}: task not found`)
    t.match(answer.error?.message, /Task not found/, method)
  }
  t.same(
    lines.filter((l) => (l.level as number) >= 50),
    [],
    "no error line",
  )
})
