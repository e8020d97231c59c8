import { pathToFileURL } from "node:url"
import type { AgentFunction } from "./a2a/agent.js"

/**
 * The agent of a module (the CLI's --agent): its default export, which
 * must be a function. Throws an Error naming the file and what it found.
 */
export async function loadAgentModule(file: string): Promise<AgentFunction> {
  let loaded: Record<string, unknown>
  try {
    loaded = (await import(pathToFileURL(file).href)) as Record<string, unknown>
  } catch (err) {
    throw new Error(`--agent ${JSON.stringify(file)} could not be loaded: ${(err as Error).message}`, { cause: err })
  }
  const agent = loaded.default
  if (typeof agent !== "function") {
    const found = agent === undefined ? `no default export (it exports ${Object.keys(loaded).join(", ") || "nothing"})` : `a default export of type ${agent === null ? "null" : typeof agent}`
    throw new Error(`--agent ${JSON.stringify(file)} has ${found}: its default export should be the agent function, export default async function (ctx) { ... }`)
  }
  return agent as AgentFunction
}
