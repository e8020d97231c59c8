import type { ValidateFunction } from "ajv"
import type { JsonObject } from "../types.js"
import { openA2AAgents } from "./a2a-agents.js"
import { builtinTools } from "./builtins.js"
import { toolSchemaCompiler } from "./schema-compiler.js"
import { TOOL_NAME } from "./tool-names.js"
import type { Tool, Toolkit, ToolkitOptions, ToolkitServedAgent, ToolkitServeOptions, ToolSource } from "./types.js"

export type * from "./types.js"

/** Serves a toolkit over A2A; the Fastify layer provides it when it loads, so the toolkit never loads a web server itself. */
type ToolkitServer = (addr: string, opts: ToolkitServeOptions, toolkit: Toolkit) => Promise<ToolkitServedAgent>

let server: ToolkitServer | undefined

/** Called once by plugins/serve.ts as it loads. */
export function provideToolkitServer(serve: ToolkitServer): void {
  server = serve
}

/** Defaults of ToolkitOptions' limits: far above a useful tool's, far below what bloats every model request. */
export const DEFAULT_MAX_TOOL_RESULT_BYTES = 1024 * 1024
export const DEFAULT_MAX_TOOL_LISTING_BYTES = 256 * 1024

export async function createToolkit(opts: ToolkitOptions = {}): Promise<Toolkit> {
  const maxResultBytes = positiveLimit(opts.maxToolResultBytes, "maxToolResultBytes", DEFAULT_MAX_TOOL_RESULT_BYTES)
  const maxListingBytes = positiveLimit(opts.maxToolListingBytes, "maxToolListingBytes", DEFAULT_MAX_TOOL_LISTING_BYTES)
  const sources = [...(opts.sources ?? [])]
  let own: Tool[]
  try {
    own = [...chooseBuiltins(opts.builtins ?? true), ...(opts.extraTools ?? [])]
    if (opts.a2aAgents !== undefined) sources.push(...(await openA2AAgents(opts.a2aAgents)))
    if (opts.mcpServers !== undefined) {
      // Loaded here only: a program without MCP servers never loads the MCP SDK.
      const { openMcpServers } = await import("./mcp/open.js")
      sources.push(...(await openMcpServers(opts.mcpServers, opts.logger)))
    }
  } catch (err) {
    await closeSources(sources)
    throw err
  }
  const ajv = toolSchemaCompiler(opts.logger)
  /** Each tool's compiled schema, kept while the same tool object is listed. */
  const compiled = new WeakMap<Tool, ValidateFunction>()
  const compile = (tool: Tool): ValidateFunction => {
    let validate = compiled.get(tool)
    if (validate) return validate
    checkTool(tool)
    try {
      validate = ajv.compile(tool.inputSchema)
    } catch (err) {
      throw new Error(`Tool ${JSON.stringify(tool.name)} has an invalid inputSchema: ${(err as Error).message}`, { cause: err })
    }
    compiled.set(tool, validate)
    return validate
  }

  let byName = new Map<string, { tool: Tool; validate: ValidateFunction }>()
  let tools: readonly Tool[] = []
  /**
   * Lists every tool again. On the first listing a bad or repeated tool is thrown; after a
   * source's change it is left out instead (the running agent keeps the others), and a call to
   * it answers that it is unknown.
   */
  const list = (first: boolean): void => {
    const next = new Map<string, { tool: Tool; validate: ValidateFunction }>()
    const add = (tool: Tool, from?: ToolSource) => {
      try {
        if (next.has(tool?.name)) {
          throw new Error(`Tool name ${JSON.stringify(tool.name)}${from ? ` from ${from.name}` : ""} is used twice; tool names must be unique`)
        }
        const listing = listingBytes(tool)
        if (listing > maxListingBytes) {
          const why = `Tool ${JSON.stringify(tool.name)}${from ? ` from ${from.name}` : ""} is ${listing} bytes listed (name, description, input schema), past opts.maxToolListingBytes (${maxListingBytes})`
          // A source's tool is left out, the others kept; a tool of your own is a mistake to fix.
          if (!from) throw new Error(`${why}: shorten it or raise the limit`)
          opts.logger?.warn({ tool: tool.name.slice(0, 64), source: from.name, bytes: listing, limit: maxListingBytes }, "tool left out: its listing is too large")
          return
        }
        next.set(tool.name, { tool, validate: compile(tool) })
      } catch (err) {
        if (first || !from) throw err
      }
    }
    for (const tool of own) add(tool)
    for (const source of sources) for (const tool of source.tools()) add(tool, source)
    byName = next
    tools = Object.freeze([...next.values()].map((entry) => entry.tool))
  }
  try {
    list(true)
  } catch (err) {
    await closeSources(sources)
    throw err
  }
  for (const source of sources) source.onChange?.(() => list(false))
  const served = new Set<ToolkitServedAgent>()

  const toolkit: Toolkit = {
    tools: () => tools,
    get: (name) => byName.get(name)?.tool,
    async execute(name, args, ctx = {}) {
      const entry = byName.get(name)
      if (!entry) {
        return { output: `Unknown tool ${JSON.stringify(name)}; available tools: ${[...byName.keys()].join(", ") || "none"}`, isError: true }
      }
      const input = args ?? {}
      if (!entry.validate(input)) {
        return { output: `Invalid arguments for ${name}: ${ajv.errorsText(entry.validate.errors, { dataVar: "args" })}`, isError: true }
      }
      try {
        const output = await entry.tool.execute(input as JsonObject, ctx)
        return { output: cutToBytes(typeof output === "string" ? output : (JSON.stringify(output) ?? ""), maxResultBytes), isError: false }
      } catch (err) {
        return { output: cutToBytes(`Tool ${name} failed: ${err instanceof Error ? err.message : String(err)}`, maxResultBytes), isError: true }
      }
    },
    toOpenAI: () => tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.inputSchema } })),
    toAnthropic: () => tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema })),
    async serve(addr, serveOpts) {
      if (!server) throw new Error('toolkit.serve() needs the server: import "toolnexus/fastify" (or "toolnexus") once in your program')
      const agent = await server(addr, serveOpts, toolkit)
      served.add(agent)
      return agent
    },
    async close() {
      await Promise.all([...served].map((agent) => agent.stop()))
      served.clear()
      await Promise.all(sources.splice(0).map((source) => source.close()))
    },
  }
  return toolkit
}

function positiveLimit(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback
  if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`createToolkit: opts.${name} should be a whole number of bytes, 1 or more, got ${JSON.stringify(value)}`)
  return value
}

/** A tool's listing as model requests carry it: name, description and input schema. */
function listingBytes(tool: Tool): number {
  return Buffer.byteLength(tool.name) + Buffer.byteLength(String(tool.description ?? "")) + Buffer.byteLength(JSON.stringify(tool.inputSchema) ?? "")
}

/** `text` in at most `max` UTF-8 bytes, then a note saying it was cut; a short text as it is, without counting its bytes. */
function cutToBytes(text: string, max: number): string {
  // A UTF-16 unit is at most 3 UTF-8 bytes: most results need no count at all.
  if (text.length * 3 <= max) return text
  const bytes = Buffer.byteLength(text)
  if (bytes <= max) return text
  // Decoding the cut bytes drops a character split in two as U+FFFD: remove it.
  const kept = Buffer.from(text).subarray(0, max).toString("utf8").replace(/\uFFFD$/, "")
  return `${kept}\n[cut: the result was ${bytes} bytes; the toolkit keeps ${max} (maxToolResultBytes)]`
}

/** The toolkit was to own the sources: when it cannot be made, none is left running. */
async function closeSources(sources: readonly ToolSource[]): Promise<void> {
  await Promise.allSettled(sources.map((source) => source.close()))
}

function chooseBuiltins(choice: boolean | string[]): Tool[] {
  if (choice === false) return []
  if (choice === true) return builtinTools()
  if (!Array.isArray(choice)) throw new TypeError(`opts.builtins should be true, false or a list of tool names`)
  const available = builtinTools()
  return choice.map((name) => {
    const tool = available.find((t) => t.name === name)
    if (!tool) throw new Error(`Unknown builtin tool ${JSON.stringify(name)}; builtins are: ${available.map((t) => t.name).join(", ")}`)
    return tool
  })
}

function checkTool(tool: Tool): void {
  if (!tool || typeof tool.name !== "string" || !TOOL_NAME.test(tool.name)) {
    throw new TypeError(`A tool needs a name of 1-64 letters, digits, "_" or "-", got ${JSON.stringify(tool?.name)}`)
  }
  if (typeof tool.execute !== "function") throw new TypeError(`Tool ${tool.name} needs an execute(args, ctx) function`)
  if (typeof tool.inputSchema !== "object" || tool.inputSchema === null) throw new TypeError(`Tool ${tool.name} needs an inputSchema object`)
}
