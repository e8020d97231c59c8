// Streaming server: toolnexus serve(), memory store, logger: false, with a model that streams its answer.
// argv: <model> [arg] [a2a options as JSON]
//   openai <baseUrl>  createClient({ style: "openai" }) against a (fake) OpenAI-style endpoint that streams
//   chunks <N>        createLocalClient returning an async iterable of the bench's N chunks (streamChunks), yielded at once
//   wait              createLocalClient whose iterable waits until the parent asks `release`, then yields one chunk
// Besides `cpu`, answers `memory` (heap and RSS after gc when run with --expose-gc) and `release`.
import { createClient, createLocalClient, serve } from "../../dist/index.js"
import { reportStartFailure, serveParent } from "../child.mjs"
import { streamChunks } from "../fixtures.mjs"

const [mode = "chunks", arg = "200", optionsJson = "{}"] = process.argv.slice(2)

/** What a waiting model waits for: resolved by `release`. */
/** @type {() => void} */
let release = () => {}
/** @type {Promise<void>} */
const released = new Promise((resolve) => (release = resolve))

function clientFor() {
  if (mode === "openai") return createClient({ style: "openai", baseUrl: arg, model: "m", apiKey: "x" })
  if (mode === "chunks") {
    const chunks = streamChunks(Number(arg))
    return createLocalClient(async function* () {
      yield* chunks
    })
  }
  if (mode === "wait") {
    return createLocalClient(async function* () {
      await released
      yield "done"
    })
  }
  throw new Error(`unknown model mode ${mode}`)
}

try {
  const served = await serve("127.0.0.1:0", { client: clientFor(), logger: false, a2a: { name: "bench", store: "memory", ...JSON.parse(optionsJson) } })
  serveParent(
    {
      memory: async () => {
        // Several passes: a weak callback or a finalizer can free more on the next one.
        if (typeof globalThis.gc === "function") for (let i = 0; i < 4; i++) globalThis.gc()
        const { heapUsed, rss, external, arrayBuffers } = process.memoryUsage()
        return { heapUsed, rss, external, arrayBuffers, gc: typeof globalThis.gc === "function" }
      },
      release: async () => {
        release()
        return {}
      },
      // The time on the clock a --cpu-prof profile uses, so the analysis can leave out start-up and warm-up.
      mark: async () => ({ atUs: Number(process.hrtime.bigint() / 1000n) }),
    },
    async () => {
      release()
      await served.stop()
    },
  )
  process.send?.({ ready: true, url: served.url, port: Number(new URL(served.url).port) })
} catch (err) {
  reportStartFailure(err)
}
