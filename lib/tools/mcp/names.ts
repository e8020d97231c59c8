import { createHash } from "node:crypto"
import { MAX_TOOL_NAME, TOOL_NAME } from "../tool-names.js"


/** Room kept for the suffix: "_" and 8 hex digits. */
const SUFFIX_LENGTH = 9

/**
 * The toolkit name of an MCP server's tool: `<server>__<tool>`. When that is not a valid name (a
 * character other than letters, digits, "_" and "-", or longer than 64), every other character becomes
 * "_", the name is cut to 55 characters and "_" plus the first 8 hex digits of the SHA-256 of
 * `<server>__<tool>` is added: the same tool gets the same name at every start, and two tools whose
 * names were changed differently do not meet (nor meet a name that needed no change), so no toolkit
 * has to compare the names of sources it does not know.
 */
export function mcpToolName(server: string, tool: string): string {
  const name = `${server}__${tool}`
  if (TOOL_NAME.test(name)) return name
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 8)
  return `${name.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, MAX_TOOL_NAME - SUFFIX_LENGTH)}_${hash}`
}
