import { MAX_TIMER_MS } from "../../duration.js"
import { isHttpUrl, withoutPassword } from "../../url-credentials.js"
import { DEFAULT_MAX_MESSAGE_BYTES } from "./bounded-fetch.js"

/** What every MCP server entry may say besides how to reach the server. */
export interface McpServerOptions {
  /**
   * Start in the background instead of in `createToolkit`: the server's tools join the toolkit once it
   * is up, and a server that cannot start is tried again (1 s, 2 s, … up to a minute apart) until the toolkit closes.
   */
  lazy?: boolean
  /** How long one call to the server (a tool call, a tools list) may take, in ms; 60000 unless set. A start may take this or a minute, the longer. */
  callTimeoutMs?: number
}

/** A server run as a process that speaks MCP on its stdin and stdout. */
export interface McpStdioServerConfig extends McpServerOptions {
  /** Written by some clients' mcp.json; when present, it must agree with `command`. */
  type?: "stdio"
  command: string
  args?: string[]
  /** Added to the few variables every server gets (PATH, HOME, USER, LOGNAME, SHELL, TERM); the rest of our environment is not passed. */
  env?: Record<string, string>
  cwd?: string
}

/** A server reached over streamable HTTP (falling back to the older HTTP+SSE transport), or over SSE only. */
export interface McpHttpServerConfig extends McpServerOptions {
  /** `"http"` (or `"streamable-http"`): streamable HTTP, with the SSE fallback; `"sse"`: the HTTP+SSE transport only. */
  type?: "http" | "streamable-http" | "sse"
  url: string
  /** Sent with every request (an `authorization` header, say); never shown in errors or logs. */
  headers?: Record<string, string>
  /** The largest message read from the server, in bytes; 32 MiB unless set. A larger one (or an endless line) ends the connection. */
  maxMessageBytes?: number
}

export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig

/** The MCP servers by name, as the `mcpServers` object of an mcp.json. */
export type McpServers = Record<string, McpServerConfig>

/** One server's checked settings, with its defaults filled in. */
export type McpServerSettings = {
  name: string
  lazy: boolean
  callTimeoutMs: number
} & (
  | { transport: "stdio"; command: string; args: string[]; env: Record<string, string>; cwd?: string }
  | { transport: "http" | "sse"; url: URL; headers: Record<string, string>; maxMessageBytes: number }
)

/** A minute: long enough for a tool that searches or builds, short enough that a hung server does not hold a run for ever. */
export const DEFAULT_CALL_TIMEOUT_MS = 60_000

/** A start (the process or connection, initialize, the first tools list) may take callTimeoutMs, but never less than the default: `npx` may be fetching the server. */
export function startTimeoutMs(settings: McpServerSettings): number {
  return Math.max(settings.callTimeoutMs, DEFAULT_CALL_TIMEOUT_MS)
}

const STDIO_KEYS = ["type", "command", "args", "env", "cwd", "lazy", "callTimeoutMs"]
const HTTP_KEYS = ["type", "url", "headers", "lazy", "callTimeoutMs", "maxMessageBytes"]

/** How a field of a server's entry is named in errors: `mcpServers.github.command`. */
export function fieldOf(name: string, field?: string): string {
  const server = /^[\w-]+$/.test(name) ? name : JSON.stringify(name)
  return `mcpServers.${server}${field ? `.${field}` : ""}`
}

/** Checks the `mcpServers` option (or an mcp.json's `mcpServers` object); throws a TypeError naming the server and the field. */
export function checkMcpServers(value: unknown): McpServerSettings[] {
  if (!isPlainObject(value)) throw new TypeError(`mcpServers should be an object of MCP servers by name, such as { "files": { "command": "npx", "args": [...] } }, got ${typeName(value)}`)
  return Object.entries(value).map(([name, entry]) => checkServer(name, entry))
}

function checkServer(name: string, entry: unknown): McpServerSettings {
  const field = (key?: string) => fieldOf(name, key)
  if (name.trim() === "") throw new TypeError(`mcpServers has a server with an empty name: give each server a name of letters, digits, "_" or "-"`)
  if (!isPlainObject(entry)) throw new TypeError(`${field()} should be an object with "command" (a process to start) or "url" (a server to reach), got ${typeName(entry)}`)
  const hasCommand = entry.command !== undefined
  const hasUrl = entry.url !== undefined
  if (hasCommand && hasUrl) throw new TypeError(`${field()} has both "command" and "url": a server is either a process to start or a URL to reach, keep one`)
  if (!hasCommand && !hasUrl) throw new TypeError(`${field()} needs "command" (a process to start) or "url" (a server to reach)`)
  const allowed = hasCommand ? STDIO_KEYS : HTTP_KEYS
  const unknown = Object.keys(entry).filter((key) => !allowed.includes(key))
  if (unknown.length > 0) {
    throw new TypeError(`${field(unknown[0])} is not a setting of ${hasCommand ? "a command" : "a URL"} server; it may have ${allowed.map((key) => `"${key}"`).join(", ")}`)
  }
  const common = { name, lazy: checkLazy(entry.lazy, field("lazy")), callTimeoutMs: checkTimeout(entry.callTimeoutMs, field("callTimeoutMs")) }
  if (hasCommand) {
    if (entry.type !== undefined && entry.type !== "stdio") throw new TypeError(`${field("type")} should be "stdio" for a server with a command, got ${JSON.stringify(entry.type)}`)
    if (typeof entry.command !== "string" || entry.command.trim() === "") throw new TypeError(`${field("command")} should be the program to start, such as "npx" or "node", got ${typeName(entry.command)}`)
    if (entry.args !== undefined && !(Array.isArray(entry.args) && entry.args.every((arg) => typeof arg === "string"))) {
      throw new TypeError(`${field("args")} should be a list of strings, got ${typeName(entry.args)}`)
    }
    if (entry.cwd !== undefined && (typeof entry.cwd !== "string" || entry.cwd === "")) throw new TypeError(`${field("cwd")} should be a directory, got ${typeName(entry.cwd)}`)
    return {
      ...common,
      transport: "stdio",
      command: entry.command,
      args: entry.args ?? [],
      env: checkStrings(entry.env, field("env"), "environment variables"),
      ...(entry.cwd !== undefined && { cwd: entry.cwd }),
    }
  }
  if (entry.type !== undefined && !["http", "streamable-http", "sse"].includes(entry.type as string)) {
    throw new TypeError(`${field("type")} should be "http", "streamable-http" or "sse" for a server with a url, got ${JSON.stringify(entry.type)}`)
  }
  if (!isHttpUrl(entry.url)) {
    throw new TypeError(`${field("url")} should be an http(s) URL, got ${typeof entry.url === "string" ? JSON.stringify(withoutPassword(entry.url)) : typeName(entry.url)}`)
  }
  const maxMessageBytes = entry.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
  if (typeof maxMessageBytes !== "number" || !Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < 1) {
    throw new TypeError(`${field("maxMessageBytes")} should be a whole number of bytes, 1 or more, got ${typeName(entry.maxMessageBytes)}`)
  }
  return { ...common, transport: entry.type === "sse" ? "sse" : "http", url: new URL(entry.url), headers: checkStrings(entry.headers, field("headers"), "headers"), maxMessageBytes }
}

function checkLazy(value: unknown, field: string): boolean {
  if (value !== undefined && typeof value !== "boolean") throw new TypeError(`${field} should be true or false, got ${typeName(value)}`)
  return value ?? false
}

function checkTimeout(value: unknown, field: string): number {
  if (value === undefined) return DEFAULT_CALL_TIMEOUT_MS
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_TIMER_MS) {
    throw new TypeError(`${field} should be a whole number of milliseconds from 1 to ${MAX_TIMER_MS}, got ${typeName(value)}`)
  }
  return value
}

/** An object of string values (env, headers); the values may be secrets, so an error shows only a key and a type. */
function checkStrings(value: unknown, field: string, what: string): Record<string, string> {
  if (value === undefined) return {}
  if (!isPlainObject(value)) throw new TypeError(`${field} should be an object of ${what} (names to strings), got ${typeName(value)}`)
  for (const [key, text] of Object.entries(value)) {
    if (typeof text !== "string") throw new TypeError(`${field}.${key} should be a string, got ${typeName(text)}`)
  }
  return { ...(value as Record<string, string>) }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value)
}

/** What a refused value was, without its content when that could be long or secret. */
function typeName(value: unknown): string {
  if (value === null) return "null"
  if (Array.isArray(value)) return "a list"
  if (typeof value === "string") return value === "" ? "an empty string" : "a string"
  if (typeof value === "number" || typeof value === "boolean") return String(value)
  return typeof value === "object" ? "an object" : typeof value
}
