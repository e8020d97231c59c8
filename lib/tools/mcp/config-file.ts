import { readFileSync } from "node:fs"
import { checkMcpServers, type McpServers } from "./config.js"

/**
 * Reads an mcp.json, as desktop clients and IDEs write it (`{ "mcpServers": { "files": { "command": "npx", "args": [...] } } }`),
 * and returns its `mcpServers` object, checked as `createToolkit` checks it, to pass as `createToolkit({ mcpServers })`.
 * The file's other fields are left alone; `${VAR}` in it is not expanded.
 *
 * @param file The path of the mcp.json.
 * @throws Error naming the file when it cannot be read, is not JSON, has no `mcpServers`, or has a bad entry
 * (then also the server and the field: `mcpServers.files.args should be a list of strings`).
 * @example
 * const toolkit = await createToolkit({ mcpServers: readMcpConfig("mcp.json") })
 */
export function readMcpConfig(file: string): McpServers {
  const source = `MCP config ${JSON.stringify(file)}`
  let text: string
  try {
    text = readFileSync(file, "utf8")
  } catch (err) {
    throw new Error(`${source} could not be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err })
  }
  return mcpServersIn(text, source)
}

/**
 * The checked `mcpServers` object of an mcp.json's text. `source` names the file in errors: the command says
 * `--mcp-config "x.json"`, readMcpConfig `MCP config "x.json"`.
 */
export function mcpServersIn(text: string, source: string): McpServers {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    throw new Error(`${source} is not JSON: ${(err as Error).message}`, { cause: err })
  }
  const servers = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as { mcpServers?: unknown }).mcpServers : undefined
  if (servers === undefined) throw new Error(`${source} should hold an object with "mcpServers", as desktop clients write it: { "mcpServers": { "files": { "command": "npx", "args": [...] } } }`)
  try {
    checkMcpServers(servers)
  } catch (err) {
    throw new Error(`${source}: ${(err as Error).message}`, { cause: err })
  }
  return servers as McpServers
}
