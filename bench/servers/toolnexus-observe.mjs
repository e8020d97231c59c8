// The observe phase's servers: server A (serve(), memory store, logger: false, an agent that answers at once) from the
// build at <dist> (default: this checkout's), observed as <mode> says:
//   off      no SDK registered, metrics off: the OpenTelemetry API alone, what every user runs by default
//   metrics  metrics: true (prom-client), no SDK
//   traces   the OpenTelemetry Node SDK registered: every span sampled, a BatchSpanProcessor, an exporter that drops them
//   on       both, as a user who wants to see inside runs it
//   on10     both, the SDK sampling 10% of the traces (ParentBased(TraceIdRatioBased(0.1))), as a busy production runs it
//   als      off, with an AsyncLocalStorage run once at start, as the SDK's context manager's first context.with does:
//            on Node 20 every promise after pays for its propagation (what "traces" pays that no span does)
//   bare     the Node SDK registered without a context manager (register({ contextManager: null })): its span work
//            without AsyncLocalStorage (spans then do not nest: a probe of cost, not a way to run)
// argv: <mode> [<dist index.js>]
import { AsyncLocalStorage } from "node:async_hooks"
import path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { reportStartFailure, serveParent } from "../child.mjs"

const here = path.dirname(fileURLToPath(import.meta.url))
const [mode = "off", dist = path.join(here, "..", "..", "dist", "index.js")] = process.argv.slice(2)

try {
  const modes = ["off", "metrics", "traces", "on", "on10", "als", "bare"]
  if (!modes.includes(mode)) throw new Error(`toolnexus-observe.mjs: no mode ${mode} (${modes.join(", ")})`)
  /** @type {import("@opentelemetry/sdk-trace-node").NodeTracerProvider | undefined} */
  let provider
  if (mode === "als") new AsyncLocalStorage().run(true, () => {})
  if (["traces", "on", "on10", "bare"].includes(mode)) {
    // Registered before the server starts, as OpenTelemetry asks: the server then observes its store too.
    const { NodeTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler } = await import("@opentelemetry/sdk-trace-node")
    /** @type {import("@opentelemetry/sdk-trace-node").SpanExporter} */
    const dropping = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {}, forceFlush: async () => {} }
    const sampler = mode === "on10" ? { sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.1) }) } : {}
    provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropping)], ...sampler })
    provider.register(mode === "bare" ? { contextManager: null } : undefined)
  }
  /** @type {typeof import("../../dist/index.js")} */
  const { createLocalClient, serve } = await import(pathToFileURL(dist).href)
  const client = createLocalClient(({ messages }) => `echo: ${messages.at(-1)?.content ?? ""}`)
  const metrics = mode === "metrics" || mode === "on" || mode === "on10"
  const served = await serve("127.0.0.1:0", { client, logger: false, a2a: { name: "bench", store: "memory", ...(metrics && { metrics: true }) } })
  serveParent({}, async () => {
    await served.stop()
    await provider?.shutdown()
  })
  process.send?.({ ready: true, url: served.url, port: Number(new URL(served.url).port) })
} catch (err) {
  reportStartFailure(err)
}
