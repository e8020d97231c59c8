import type { Logger } from "../log.js"
import type { JsonObject } from "../types.js"
import type { McpServers } from "./mcp/config.js"

/**
 * The types of tools and toolkits, shared by the toolkit, the builtins, the
 * client loop and the model adapters.
 */

/** A JSON Schema object describing a tool's arguments. */
export type JsonSchema = JsonObject

/** What a tool's `execute` is handed besides its arguments. */
export interface ToolContext {
  /** Aborted when the run that called the tool is canceled. */
  signal?: AbortSignal
}

/** A tool's answer as the model sees it. */
export interface ToolResult {
  output: string
  isError: boolean
}

export interface Tool {
  name: string
  description: string
  inputSchema: JsonSchema
  /** Returns the output (a string, or anything JSON-serializable); a throw becomes an error result. */
  execute(args: JsonObject, ctx: ToolContext): unknown
}

export interface OpenAITool {
  type: "function"
  function: { name: string; description: string; parameters: JsonSchema }
}

export interface AnthropicTool {
  name: string
  description: string
  input_schema: JsonSchema
}

export interface ToolkitOptions {
  /**
   * The shipped tools: `true` (default) for all, `false` for none, or a list of names.
   * None of them touches the file system, the network or a shell.
   */
  builtins?: boolean | string[]
  /** Your own tools, added after the builtins; a name may not repeat. */
  extraTools?: Tool[]
  /**
   * Tools from outside the program, opened by the caller (an MCP server, another A2A agent):
   * their tools join after `extraTools`, follow the source's changes, and the toolkit's
   * `close()` closes the sources.
   */
  sources?: ToolSource[]
  /**
   * MCP servers whose tools join the toolkit, by name, as in an mcp.json's `mcpServers`: `{ command, args?,
   * env?, cwd? }` to start a process, or `{ url, headers? }` to reach one over HTTP. createToolkit starts them
   * (unless `lazy`) and fails naming the server and the field when one cannot start.
   */
  mcpServers?: McpServers
  /** Where the toolkit's sources say what happens while it runs: an MCP server that went away, a lazy one that cannot start. */
  logger?: Logger
  /**
   * The most bytes of one tool result the model reads; default 1 MiB. A longer result is cut there, with
   * a note the model can read saying how long it was. Every turn resends it, so this bounds what a tool
   * (an MCP server, another agent) can make the server send the model.
   */
  maxToolResultBytes?: number
  /**
   * The most bytes of one tool's listing (name, description and input schema as JSON); default 256 KiB.
   * A source's tool past it is left out with a warning (the others stay); a tool of your own past it throws.
   */
  maxToolListingBytes?: number
  /**
   * Other A2A agents, each one tool: its card is read at createToolkit (a card that cannot be read fails
   * it), and a call sends the model's message and returns the agent's answer. See lib/tools/a2a-agents.ts.
   */
  a2aAgents?: A2AAgentOptions[]
}

/** One A2A agent to use as a tool. */
export interface A2AAgentOptions {
  /** The agent's base URL (its card is at `.well-known/agent-card.json` under it), or its card's URL. */
  url: string
  /** The tool's name; default the card's name. Either is made a valid, unique tool name. */
  name?: string
  /** Sent with every call to the agent, the card's too: `authorization`, an API key. */
  headers?: Record<string, string>
  /** How long one call to the agent may take, in ms; default 30000. */
  timeoutMs?: number
  /** How long the agent's Task may run before it is canceled and the tool fails, in ms; default 15 minutes. */
  taskTimeoutMs?: number
}

/**
 * A set of tools that lives outside the program and may change while it runs (an MCP
 * server's tools, another A2A agent). The toolkit lists it again whenever it says so.
 */
export interface ToolSource {
  /** Names the source in errors and logs (the MCP server's name, the agent's URL). */
  readonly name: string
  /** The source's tools now: names already valid and unique within the source. */
  tools(): readonly Tool[]
  /** Calls `listener` after the source's tools changed; the toolkit then lists them again. */
  onChange?(listener: () => void): void
  /** Ends the source's processes and connections; called once, by the toolkit's close(). */
  close(): Promise<void>
}

export interface Toolkit {
  tools(): readonly Tool[]
  get(name: string): Tool | undefined
  /** Runs a tool after checking `args` against its inputSchema; never throws. */
  execute(name: string, args: unknown, ctx?: ToolContext): Promise<ToolResult>
  toOpenAI(): OpenAITool[]
  toAnthropic(): AnthropicTool[]
  /**
   * Serves this toolkit as an A2A agent; see `serve()` in "toolnexus/fastify". Loading that
   * entry (or "toolnexus") gives this method its full types and its server.
   */
  serve(addr: string, opts: ToolkitServeOptions): Promise<ToolkitServedAgent>
  close(): Promise<void>
}

/** serve()'s options; the Fastify layer (plugins/serve.ts) fills this in by declaration merging. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ToolkitServeOptions {}

/** What serving a toolkit gives back; completed by the Fastify layer like ToolkitServeOptions. */
export interface ToolkitServedAgent {
  url: string
  /** Stops serving; the Fastify layer's options (a drain) are its `StopOptions`. */
  stop(options?: { drainMs?: number }): Promise<void>
  close(options?: { drainMs?: number }): Promise<void>
}
