import { Ajv } from "ajv"
import type { Logger } from "../log.js"

/**
 * The Ajv that checks a tool's arguments against its inputSchema: Ajv's default draft-07, strict off (tool
 * schemas come from MCP servers and other people's code), and no schema kept by its $id (two servers'
 * tools, or one tool listed again after a change, may share one). Ajv's warnings (such as "unknown format
 * "uri" ignored") go to `logger`, never to the console: a server logging one JSON object per line must
 * not get a stray line on stderr. Without a logger they are dropped: a format Ajv does not know is only
 * left unchecked, and the tool's own server still checks it.
 */
export function toolSchemaCompiler(logger?: Logger): Ajv {
  const say = (level: "info" | "warn" | "error") => (...words: unknown[]) => logger?.[level]({ source: "tool input schema" }, words.map(String).join(" "))
  return new Ajv({ allErrors: true, strict: false, addUsedSchema: false, logger: logger ? { log: say("info"), warn: say("warn"), error: say("error") } : false })
}
