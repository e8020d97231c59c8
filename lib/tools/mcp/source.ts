import { errorFields, type Logger } from "../../log.js"
import type { Tool, ToolSource } from "../types.js"
import type { McpServerSettings } from "./config.js"
import { McpConnection, type McpTool } from "./connection.js"
import { mcpToolName } from "./names.js"
import { toolInputSchema } from "./schema.js"

/** A lazy server's first retry comes after this; each next one waits twice as long, up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 1000
const RETRY_MAX_MS = 60_000

/** One MCP server's tools as a ToolSource: named for the toolkit, called through the server's connection. */
export class McpToolSource implements ToolSource {
  readonly name: string
  private readonly connection: McpConnection
  private readonly listeners: Array<() => void> = []
  private current: readonly Tool[] = []
  /** The Tool made for each MCP tool, by its definition: an unchanged tool keeps its object (and the toolkit its compiled schema). */
  private made = new Map<string, Tool>()
  private retry?: NodeJS.Timeout
  private closed = false

  constructor(
    private readonly settings: McpServerSettings,
    private readonly log?: Logger,
  ) {
    this.name = `MCP server ${JSON.stringify(settings.name)}`
    this.connection = new McpConnection(settings, (tools) => this.update(tools), log)
  }

  /** Connects and lists the tools; a lazy server connects in the background instead, trying again until it is up or closed. */
  async start(): Promise<void> {
    if (this.settings.lazy) this.startInBackground(RETRY_FIRST_MS)
    else await this.connection.start()
  }

  tools(): readonly Tool[] {
    return this.current
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener)
  }

  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.retry)
    await this.connection.close()
  }

  private startInBackground(delayMs: number): void {
    this.connection.start().catch((err: unknown) => {
      if (this.closed) return
      this.log?.warn({ mcpServer: this.settings.name, retryInMs: delayMs, ...errorFields(err) }, "lazy MCP server did not start; trying again later")
      this.retry = setTimeout(() => this.startInBackground(Math.min(delayMs * 2, RETRY_MAX_MS)), delayMs).unref()
    })
  }

  private update(listed: readonly McpTool[]): void {
    const made = new Map<string, Tool>()
    const names = new Set<string>()
    for (const tool of listed) {
      if (names.has(tool.name)) {
        this.log?.warn({ mcpServer: this.settings.name, tool: tool.name }, "MCP server lists a tool name twice; the first is kept")
        continue
      }
      names.add(tool.name)
      const key = JSON.stringify([tool.name, tool.title, tool.description, tool.inputSchema])
      made.set(key, this.made.get(key) ?? this.toolFor(tool))
    }
    const before = [...this.made.keys()]
    const unchanged = made.size === before.length && [...made.keys()].every((key, i) => before[i] === key)
    this.made = made
    if (unchanged) return
    this.current = Object.freeze([...made.values()])
    for (const listener of this.listeners) listener()
  }

  private toolFor(tool: McpTool): Tool {
    const { schema, note } = toolInputSchema(tool.inputSchema)
    const about = tool.description ?? tool.title ?? `The tool ${tool.name} of MCP server ${this.settings.name}.`
    return {
      name: mcpToolName(this.settings.name, tool.name),
      description: note ? `${about} (Note: ${note}.)` : about,
      inputSchema: schema,
      execute: (args, ctx) => this.connection.call(tool.name, args, ctx.signal),
    }
  }
}
