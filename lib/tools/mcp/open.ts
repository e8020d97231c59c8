import type { Logger } from "../../log.js"
import type { ToolSource } from "../types.js"
import { checkMcpServers } from "./config.js"
import { McpToolSource } from "./source.js"

/**
 * Opens the `mcpServers` of createToolkit: checks every entry, then starts the servers together (a lazy
 * one in the background). When one fails, all are closed and the error names the server and the field;
 * several failures are told in one error, one per line.
 */
export async function openMcpServers(servers: unknown, log?: Logger): Promise<ToolSource[]> {
  const sources = checkMcpServers(servers).map((settings) => new McpToolSource(settings, log))
  const started = await Promise.allSettled(sources.map((source) => source.start()))
  const failures = started.flatMap((outcome) => (outcome.status === "rejected" ? [outcome.reason as Error] : []))
  if (failures.length === 0) return sources
  await Promise.allSettled(sources.map((source) => source.close()))
  if (failures.length === 1) throw failures[0]
  throw new Error(failures.map((err) => err.message).join("\n"), { cause: failures[0] })
}
