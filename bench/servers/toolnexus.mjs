// Server A/B: toolnexus serve() with an agent that answers at once (an in-process client).
// argv: <store selector: "memory" | "file:<dir>"> <logging: "off" | "devnull"> [<"bindings">]
// With "bindings", gRPC is asked for too (serve()'s `grpc` option, on a free port of its own; or else the plugin's
// `app.toolnexusGrpc.listen()`), and the child reports where each binding is served: `rest` (the HTTP+JSON base URL
// the card declares, on the JSON-RPC port) and `grpc` ("host:port": the card's, else serve()'s `grpc`), each left out
// when this build does not serve it.
import { pino } from "pino"
import { createLocalClient, createLogger, serve } from "../../dist/index.js"
import { reportStartFailure, serveParent } from "../child.mjs"

const [store = "memory", logging = "off", extra] = process.argv.slice(2)
const bindings = extra === "bindings"

try {
  // "devnull" is serve()'s default logger (info, redaction, sync writes) pointed at /dev/null instead of stdout.
  const logger = logging === "devnull" ? createLogger({}, pino.destination({ dest: "/dev/null", sync: true })) : false
  const client = createLocalClient(({ messages }) => `echo: ${messages.at(-1)?.content ?? ""}`)
  const served = await serve("127.0.0.1:0", { client, logger, a2a: { name: "bench", store }, ...(bindings && { grpc: "127.0.0.1:0" }) })
  serveParent(
    {
      // The time on the clock a --cpu-prof profile uses, so the analysis can leave out start-up and warm-up.
      mark: async () => ({ atUs: Number(process.hrtime.bigint() / 1000n) }),
    },
    () => served.stop(),
  )
  process.send?.({ ready: true, url: served.url, port: Number(new URL(served.url).port), ...(bindings && (await servedBindings(served))) })
} catch (err) {
  reportStartFailure(err)
}

/**
 * The 1.0 HTTP+JSON and gRPC interfaces the served card declares (the card lists every served interface). When
 * serve() did not start gRPC but the app has the plugin's gRPC binding, it is started here, as a plugin user does.
 * @param {Awaited<ReturnType<typeof serve>>} served
 */
async function servedBindings(served) {
  const res = await fetch(`${served.url}/.well-known/agent-card.json`, { headers: { "a2a-version": "1.0" } })
  /** @type {{ supportedInterfaces?: { protocolBinding: string, protocolVersion: string, url: string }[] }} */
  const card = await res.json()
  /** @param {string} binding */
  const declared = (binding) => card.supportedInterfaces?.find((i) => i.protocolBinding === binding && i.protocolVersion === "1.0")?.url
  const grpc = declared("GRPC") ?? (typeof served.grpc === "string" ? served.grpc : undefined) ?? (served.app.toolnexusGrpc ? await served.app.toolnexusGrpc.listen("127.0.0.1:0") : undefined)
  return { rest: declared("HTTP+JSON"), grpc }
}
