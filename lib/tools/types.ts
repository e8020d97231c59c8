import type { JsonObject } from "../types.js"

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
  stop(): Promise<void>
  close(): Promise<void>
}
