// The observe phase's servers: server A (serve(), memory store, logger: false, an agent that answers at once) from the
// build at <dist> (default: this checkout's), observed as <mode> says:
//   off      no SDK registered, metrics off: the OpenTelemetry API alone, what every user runs by default
//   metrics  metrics: true (prom-client), no SDK
//   traces   the OpenTelemetry Node SDK registered: every span sampled, a BatchSpanProcessor, an exporter that drops them
//   on       both, as a user who wants to see inside runs it
//   on10     both, the SDK sampling 10% of the traces (ParentBased(TraceIdRatioBased(0.1))), as a busy production runs it
// argv: <mode> [<dist index.js>]
import path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { reportStartFailure, serveParent } from "../child.mjs"

const here = path.dirname(fileURLToPath(import.meta.url))
const [mode = "off", dist = path.join(here, "..", "..", "dist", "index.js")] = process.argv.slice(2)

try {
  if (!["off", "metrics", "traces", "on", "on10"].includes(mode)) throw new Error(`toolnexus-observe.mjs: no mode ${mode} (off, metrics, traces, on, on10)`)
  let provider
  if (mode !== "off" && mode !== "metrics") {
    // Registered before the server starts, as OpenTelemetry asks: the server then observes its store too.
    const { NodeTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler } = await import("@opentelemetry/sdk-trace-node")
    const dropping = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {}, forceFlush: async () => {} }
    const sampler = mode === "on10" ? { sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.1) }) } : {}
    provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)], ...sampler })
    provider.register()
  }
  const { createLocalClient, serve } = await import(pathToFileURL(dist).href)
  const client = createLocalClient(({ messages }) => `echo: ${messages.at(-1)?.content ?? ""}`)
  const metrics = mode === "metrics" || mode === "on" || mode === "on10"
  const served = await serve("127.0.0.1:0", { client, logger: false, a2a: { name: "bench", store: "memory", ...(metrics && { metrics: true }) } })
  serveParent({}, async () => {
    await served.stop()
    await provider?.shutdown()
  })
  process.send({ ready: true, url: served.url, port: Number(new URL(served.url).port) })
} catch (err) {
  reportStartFailure(err)
}
