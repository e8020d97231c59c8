// A replica for the replicas phase: toolnexus serve() on a shared store, logger: false, with an agent that answers at
// once ("echo: …"), except for a prompt "wait <tag>": that one works until its Task is canceled (its signal aborts),
// and the time of the abort is kept by tag (`aborts` answers them: ms since the epoch, performance's clock).
// argv: <store selector>
import { createLocalClient, serve } from "../../dist/index.js"
import { reportStartFailure, serveParent } from "../child.mjs"

const [store] = process.argv.slice(2)
/** @type {Record<string, number>} */
const aborts = {}
const now = () => performance.timeOrigin + performance.now()

try {
  const client = createLocalClient(({ messages, signal }) => {
    const prompt = String(messages.at(-1)?.content ?? "")
    if (!prompt.startsWith("wait ")) return `echo: ${prompt}`
    const tag = prompt.slice("wait ".length)
    return new Promise((_, reject) => {
      const stop = () => {
        aborts[tag] = now()
        reject(signal?.reason ?? new Error("aborted"))
      }
      if (signal?.aborted) stop()
      else signal?.addEventListener("abort", stop, { once: true })
    })
  })
  const served = await serve("127.0.0.1:0", { client, logger: false, a2a: { name: "bench", store } })
  serveParent({ aborts: async () => ({ aborts }) }, () => served.stop())
  process.send?.({ ready: true, url: served.url, port: Number(new URL(served.url).port) })
} catch (err) {
  reportStartFailure(err)
}
