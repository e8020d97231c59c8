import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { errorFields, type Logger } from "../../log.js"
import type { JsonObject } from "../../types.js"
import { startTimeoutMs, type McpServerSettings } from "./config.js"
import { resultText } from "./results.js"
import { openServer, withStatus, type OpenedServer } from "./transport.js"

export type { McpTool }

/** The SDK's codes for a request it gave up on: no answer in time, or the connection closed under it. */
const REQUEST_TIMEOUT: number = ErrorCode.RequestTimeout
const CONNECTION_CLOSED: number = ErrorCode.ConnectionClosed

/** A server that pages its tools list for ever is cut off here. */
const MAX_TOOL_PAGES = 100

/**
 * One MCP server over its lifetime in the toolkit: connected when started or at the first call after
 * it was lost, listed again on `tools/list_changed`, dropped when it exits or stops answering (a call
 * past callTimeoutMs) so the next call starts it afresh, and closed for good by close().
 */
export class McpConnection {
  /** The open (or opening) session; undefined when there is none, so the next use opens one. */
  private session?: Promise<OpenedServer>
  /** What `session` resolved to, while it is current. */
  private current?: OpenedServer
  /** Sessions being closed after they were dropped; close() waits for them, so no process outlives the toolkit. */
  private readonly dropped = new Set<Promise<void>>()
  /** Aborts an opening under way when the toolkit closes. */
  private readonly closing = new AbortController()
  /** Counts tools/list requests, so an older answer never replaces a newer one. */
  private listings = 0
  private applied = 0

  constructor(
    readonly settings: McpServerSettings,
    private readonly onTools: (tools: readonly McpTool[]) => void,
    private readonly log?: Logger,
  ) {}

  /** Opens the session and lists the tools, unless that is done; rejects with what went wrong. */
  async start(): Promise<void> {
    await this.open()
  }

  /** Calls a tool of the server with the run's signal; the text for the model, or a throw the toolkit makes an error result of. */
  async call(tool: string, args: JsonObject, signal?: AbortSignal): Promise<string> {
    const server = await this.open()
    const { name, callTimeoutMs } = this.settings
    let result
    try {
      result = await followed(signal, (callSignal) => server.client.callTool({ name: tool, arguments: args }, undefined, { signal: callSignal, timeout: callTimeoutMs }))
    } catch (err) {
      // Canceled by the run (the SDK sent notifications/cancelled), or the server's own error answer: the session is fine.
      if (signal?.aborted || (err instanceof McpError && err.code !== REQUEST_TIMEOUT && err.code !== CONNECTION_CLOSED)) throw err
      this.drop(server)
      if (err instanceof McpError && err.code === REQUEST_TIMEOUT) {
        throw new Error(`MCP server ${JSON.stringify(name)} did not answer within ${callTimeoutMs} ms (callTimeoutMs); the call was canceled and the server is restarted at the next call`, { cause: err })
      }
      const said = server.stderr()
      throw new Error(`MCP server ${JSON.stringify(name)} went away during the call (${withStatus(err as Error)})${said ? `; it wrote: ${said}` : ""}; it is restarted at the next call`, { cause: err })
    }
    return resultText(result, tool)
  }

  /** Ends the session and any opening under way; the connection is not used again. */
  async close(): Promise<void> {
    this.closing.abort()
    const session = this.session
    this.session = this.current = undefined
    await Promise.all([session?.then((server) => server.close(), () => {}), ...this.dropped])
  }

  private open(): Promise<OpenedServer> {
    if (this.closing.signal.aborted) return Promise.reject(new Error(`MCP server ${JSON.stringify(this.settings.name)} is closed (the toolkit was closed)`))
    if (this.session) return this.session
    const session: Promise<OpenedServer> = (async () => {
      let opened: OpenedServer | undefined
      const events = {
        onClose: () => {
          if (this.session !== session) return
          this.session = this.current = undefined
          const said = opened?.stderr()
          this.log?.warn({ mcpServer: this.settings.name, ...(said && { stderr: said }) }, "MCP server went away; it is restarted at the next call")
        },
        onToolsChanged: () => void (opened && this.relist(opened)),
      }
      const server = (opened = await followed(this.closing.signal, (signal) => openServer(this.settings, events, signal)))
      try {
        await this.list(server, startTimeoutMs(this.settings))
      } catch (err) {
        await server.close()
        throw new Error(`MCP server ${JSON.stringify(this.settings.name)} did not list its tools: ${(err as Error).message}`, { cause: err })
      }
      return server
    })()
    this.session = session
    session.then(
      (server) => {
        if (this.session === session) this.current = server
      },
      () => {
        if (this.session === session) this.session = undefined
      },
    )
    return session
  }

  /** Lists the tools again after list_changed; a failure is logged, the last list stays. */
  private async relist(server: OpenedServer): Promise<void> {
    try {
      await this.list(server, this.settings.callTimeoutMs)
    } catch (err) {
      this.log?.warn({ mcpServer: this.settings.name, ...errorFields(err) }, "MCP server said its tools changed, but listing them failed; the last list stays")
    }
  }

  /** tools/list, every page; the answer replaces the list unless a later listing was answered first. */
  private async list(server: OpenedServer, timeoutMs: number): Promise<void> {
    const listing = ++this.listings
    const tools: McpTool[] = []
    let cursor: string | undefined
    for (let page = 0; page < MAX_TOOL_PAGES; page++) {
      const answer = await followed(this.closing.signal, (signal) =>
        server.client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: timeoutMs, signal }),
      )
      tools.push(...answer.tools)
      cursor = answer.nextCursor
      if (cursor === undefined) break
    }
    if (listing < this.applied) return
    this.applied = listing
    this.onTools(tools)
  }

  /** Leaves a session that failed a call (no answer in time, a broken connection): closed in the background, the next call opens another. */
  private drop(server: OpenedServer): void {
    if (this.current !== server) return
    this.session = this.current = undefined
    this.log?.warn({ mcpServer: this.settings.name }, "MCP server failed a call; it is closed and restarted at the next call")
    const closing = server.close().catch((err: unknown) => this.log?.warn({ mcpServer: this.settings.name, ...errorFields(err) }, "closing an MCP server failed"))
    this.dropped.add(closing)
    void closing.finally(() => this.dropped.delete(closing))
  }
}

/**
 * Runs one SDK request with a signal of its own that follows `signal`: the SDK never takes its abort listener
 * off the signal it is given, and a run's (or the connection's) signal lives for many requests.
 */
async function followed<T>(signal: AbortSignal | undefined, request: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const own = new AbortController()
  const abort = () => own.abort(signal?.reason)
  if (signal?.aborted) abort()
  signal?.addEventListener("abort", abort, { once: true })
  try {
    return await request(own.signal)
  } finally {
    signal?.removeEventListener("abort", abort)
  }
}
