// Server A/B: toolnexus serve() with an agent that answers at once (an in-process client).
// argv: <store selector: "memory" | "file:<dir>"> <logging: "off" | "devnull">
import { pino } from "pino"
import { createLocalClient, createLogger, serve } from "../../dist/index.js"
import { reportStartFailure, serveParent } from "../child.mjs"

const [store = "memory", logging = "off"] = process.argv.slice(2)

try {
  // "devnull" is serve()'s default logger (info, redaction, sync writes) pointed at /dev/null instead of stdout.
  const logger = logging === "devnull" ? createLogger({}, pino.destination({ dest: "/dev/null", sync: true })) : false
  const client = createLocalClient(({ messages }) => `echo: ${messages.at(-1)?.content ?? ""}`)
  const served = await serve("127.0.0.1:0", { client, logger, a2a: { name: "bench", store } })
  serveParent(
    {
      // The time on the clock a --cpu-prof profile uses, so the analysis can leave out start-up and warm-up.
      mark: async () => ({ atUs: Number(process.hrtime.bigint() / 1000n) }),
    },
    () => served.stop(),
  )
  process.send({ ready: true, url: served.url, port: Number(new URL(served.url).port) })
} catch (err) {
  reportStartFailure(err)
}
