import type { Client, TextInfo } from "../client/client.js"
import type { RunObserver } from "../observe/telemetry.js"
import type { Toolkit } from "../tools/types.js"
import type { AgentFunction } from "./agent.js"
import { chatMessages, promptFrom } from "./conversation.js"

/**
 * The built-in agent: the tool-calling loop of `client` with `toolkit`'s
 * tools. The peer's message is the prompt, the history the turns before;
 * text the model streams goes to the answer as it comes (a new model turn,
 * after tool calls, starts the answer over), a turn answered whole is the
 * answer given at the end; a model that asks for input asks the peer.
 */
export function toolLoopAgent(client: Client, toolkit: Toolkit | undefined, observer: RunObserver): AgentFunction {
  return async (ctx) => {
    /** The model turn streaming now (0: none yet), and what it said so far. */
    let turn = 0
    let said = ""
    const onText = (delta: string, info: TextInfo) => {
      // A turn answered whole is the outcome below, sent whole with the state it ends in, not as a chunk.
      if (info.whole) return
      const anew = info.turn !== turn
      if (anew) {
        turn = info.turn
        said = ""
      }
      said += delta
      ctx.text(delta, { anew })
    }
    const result = await client.run(promptFrom(ctx.message), { toolkit, signal: ctx.signal, history: chatMessages(ctx.history), onText, observer })
    if (result.inputRequired) return { inputRequired: result.text }
    // The last turn streamed its answer: the chunks are it (the rest, if the final text says more).
    if (turn === result.turns && result.text.startsWith(said)) return result.text.slice(said.length)
    // Answered whole, or in other words than streamed: the final text replaces whatever was streamed.
    if (turn !== 0) ctx.text("", { anew: true })
    return result.text
  }
}
