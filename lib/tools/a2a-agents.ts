import { connectRemoteAgent, type RemoteAgent } from "../a2a-client/remote-agent.js"
import type { RemoteMessage, RemoteTask } from "../a2a-client/remote-task.js"
import { credentialRedactor } from "../redact.js"
import { withoutPassword } from "../url-credentials.js"
import { MAX_TOOL_NAME } from "./tool-names.js"
import type { A2AAgentOptions, JsonSchema, Tool, ToolSource } from "./types.js"

/**
 * Other A2A agents as tools: each agent of `createToolkit({ a2aAgents })` is one tool that sends the
 * model's message to the agent and returns its answer. The model keeps a conversation going by passing
 * back the contextId the answer names, and answers the agent's question with the taskId it names.
 */

/** Tool descriptions longer than this are cut: some model APIs refuse long ones, and every turn pays for it. */
const MAX_DESCRIPTION = 2000

const INPUT_SCHEMA: JsonSchema = {
  type: "object",
  properties: {
    message: { type: "string", minLength: 1, description: "What to say to the agent, in plain language." },
    contextId: { type: "string", description: "To continue an earlier conversation with this agent: the contextId its answer gave." },
    taskId: { type: "string", description: "Only to answer a question the agent asked: the taskId it gave with the question." },
  },
  required: ["message"],
}

/** Opens every agent (cards read in parallel); one that fails fails them all, naming it. */
export async function openA2AAgents(list: readonly A2AAgentOptions[]): Promise<ToolSource[]> {
  // Not Array.isArray(list) as a guard: it would narrow the list to any[].
  const isList: boolean = Array.isArray(list)
  if (!isList) throw new TypeError("opts.a2aAgents should be an array of { url, name?, headers? }")
  list.forEach(checkAgentOptions)
  const settled = await Promise.allSettled(list.map((opts) => connectRemoteAgent(opts)))
  const failed = settled.findIndex((outcome) => outcome.status === "rejected")
  if (failed >= 0) {
    await Promise.all(settled.flatMap((outcome) => (outcome.status === "fulfilled" ? [outcome.value.close()] : [])))
    const reason = (settled[failed] as PromiseRejectedResult).reason as Error
    throw new Error(`opts.a2aAgents[${failed}] (${withoutPassword(list[failed].url)}): ${reason.message}`, { cause: reason })
  }
  const taken = new Set<string>()
  return settled.map((outcome, i) => {
    const agent = (outcome as PromiseFulfilledResult<RemoteAgent>).value
    const name = uniqueName(toolName(list[i].name ?? agent.card.name), taken)
    return agentSource(agent, name, list[i].url, credentialRedactor(list[i].headers ?? {}))
  })
}

function checkAgentOptions(opts: A2AAgentOptions, i: number): void {
  const where = `opts.a2aAgents[${i}]`
  if (opts === null || typeof opts !== "object") throw new TypeError(`${where} should be { url, name?, headers? }`)
  if (typeof opts.url !== "string") throw new TypeError(`${where}.url should be the agent's base URL or its card's URL`)
  if (opts.name !== undefined && (typeof opts.name !== "string" || opts.name === "")) throw new TypeError(`${where}.name should be a non-empty string`)
  if (opts.headers !== undefined && (opts.headers === null || typeof opts.headers !== "object" || Object.values(opts.headers).some((v) => typeof v !== "string"))) {
    throw new TypeError(`${where}.headers should be an object of header names to string values`)
  }
  for (const key of ["timeoutMs", "taskTimeoutMs"] as const) {
    const value = opts[key]
    if (value !== undefined && !(Number.isInteger(value) && value > 0)) throw new TypeError(`${where}.${key} should be a whole number of ms, 1 or more`)
  }
}

/** A name both model APIs take: runs of anything else become "_", at most 64 characters. */
export function toolName(text: string): string {
  const name = text.replace(/[^a-zA-Z0-9_-]+/g, "_").replace(/^_+|_+$/g, "").slice(0, MAX_TOOL_NAME)
  return name === "" ? "a2a_agent" : name
}

/** `name`, or `name_2`, `name_3`... when it is taken; added to `taken`. */
function uniqueName(name: string, taken: Set<string>): string {
  let unique = name
  for (let n = 2; taken.has(unique); n++) unique = `${name.slice(0, MAX_TOOL_NAME - String(n).length - 1)}_${n}`
  taken.add(unique)
  return unique
}

/** The card's description, then its skills: name, description and a few examples each. */
export function describeAgent(agent: RemoteAgent): string {
  const { card } = agent
  const lines = [`Sends a message to the A2A agent "${card.name}" and returns its answer.${card.description ? ` ${card.description}` : ""}`]
  const skills = Array.isArray(card.skills) ? card.skills.filter((skill) => skill !== null && typeof skill === "object") : []
  if (skills.length > 0) lines.push("Its skills:")
  for (const skill of skills) {
    const examples = Array.isArray(skill.examples) ? skill.examples.filter((e) => typeof e === "string").slice(0, 3) : []
    lines.push(`- ${skill.name ?? "(unnamed)"}: ${skill.description ?? ""}${examples.length > 0 ? ` (e.g. ${examples.map((e) => JSON.stringify(e)).join(", ")})` : ""}`)
  }
  const text = lines.join("\n")
  return text.length > MAX_DESCRIPTION ? `${text.slice(0, MAX_DESCRIPTION - 1)}…` : text
}

/**
 * The tool of one agent. Whatever the agent answers reaches the model, and an agent may echo the
 * headers it received (into an error or an answer): `redact` blanks our credentials out of both.
 */
function agentSource(agent: RemoteAgent, name: string, url: string, redact: (text: string) => string): ToolSource {
  const closing = new AbortController()
  /** Calls in flight: close() waits for them to cancel their remote Tasks before it closes the connection. */
  const asking = new Set<Promise<unknown>>()
  const tool: Tool = {
    name,
    description: describeAgent(agent),
    inputSchema: INPUT_SCHEMA,
    async execute(args, ctx) {
      const signal = ctx.signal ? AbortSignal.any([ctx.signal, closing.signal]) : closing.signal
      const input = { text: String(args.message), ...(typeof args.contextId === "string" && args.contextId !== "" && { contextId: args.contextId }), ...(typeof args.taskId === "string" && args.taskId !== "" && { taskId: args.taskId }) }
      const asked = agent.ask(input, signal)
      asking.add(asked)
      try {
        return redact(answerText(await asked, name))
      } catch (err) {
        const message = err instanceof Error ? redact(err.message) : undefined
        // A new error without the old as its cause: the cause would still hold the credential.
        // eslint-disable-next-line preserve-caught-error -- the cause would carry the credential along
        if (message !== undefined && message !== (err as Error).message) throw new Error(message)
        throw err
      } finally {
        asking.delete(asked)
      }
    },
  }
  return {
    name: `A2A agent ${withoutPassword(url)}`,
    tools: () => [tool],
    async close() {
      closing.abort(new Error(`the A2A agent tool ${name} was closed`))
      await Promise.allSettled(asking)
      await agent.close()
    },
  }
}

/** The model's way back to the same conversation. */
const followUp = (contextId: string | undefined, tool: string) => (contextId ? `\n\n(contextId "${contextId}": pass it to ${tool} to continue this conversation.)` : "")

/**
 * What the model reads: the answer (artifacts' text, else the status message, else the last agent message);
 * the agent's question with how to answer it; a Task that failed, was rejected, canceled or needs
 * authorization is thrown, the toolkit making it an error result.
 */
export function answerText(answer: RemoteTask | RemoteMessage, tool: string): string {
  if (answer.kind === "message") return answer.text + followUp(answer.contextId, tool)
  switch (answer.state) {
    case "completed":
      return (answer.artifactText || answer.statusText || answer.lastAgentText || "(the agent completed the task without any text)") + followUp(answer.contextId, tool)
    case "input-required":
      return (
        `The agent needs more input before it can finish; it asks:\n${answer.statusText || "(no question given)"}\n\n` +
        `To answer, call ${tool} again with your answer as message, taskId "${answer.id}"${answer.contextId ? ` and contextId "${answer.contextId}"` : ""}.`
      )
    case "auth-required":
      throw new Error(`the agent's task ${answer.id} needs authorization it cannot get through this tool (auth-required): ${answer.statusText || "no reason given"}`)
    default:
      throw new Error(`the agent's task ${answer.id} ended ${answer.state}: ${answer.statusText || "no reason given"}`)
  }
}
