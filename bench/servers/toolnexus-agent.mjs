// The ownAgent phase's servers: server A (serve(), memory store, logger: false) answering at once, two ways:
//   loop   the built-in tool-calling loop with createLocalClient (as server A)
//   agent  an agent function of your own (`agent` in place of `client`) returning the same answer
// argv: <"loop" | "agent">
import { createLocalClient, serve } from "../../dist/index.js"
import { reportStartFailure, serveParent } from "../child.mjs"

const [mode = "loop"] = process.argv.slice(2)

try {
  if (mode !== "loop" && mode !== "agent") throw new Error(`toolnexus-agent.mjs: no mode ${mode} (loop, agent)`)
  const a2a = { name: "bench", store: "memory" }
  /** @param {{ kind: string, text?: string }[]} parts */
  const said = (parts) => parts.map((part) => (part.kind === "text" ? part.text : "")).join("\n")
  const runs =
    mode === "loop"
      ? { client: createLocalClient(({ messages }) => `echo: ${messages.at(-1)?.content ?? ""}`) }
      : { agent: /** @type {import("../../dist/index.js").AgentFunction} */ (async (ctx) => `echo: ${said(ctx.message.parts)}`) }
  const served = await serve("127.0.0.1:0", { ...runs, logger: false, a2a })
  serveParent({}, () => served.stop())
  process.send?.({ ready: true, url: served.url, port: Number(new URL(served.url).port) })
} catch (err) {
  reportStartFailure(err)
}
