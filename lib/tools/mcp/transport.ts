import { stat } from "node:fs/promises"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { SSEClientTransport, SseError } from "@modelcontextprotocol/sdk/client/sse.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { withoutPassword } from "../../url-credentials.js"
import { boundedFetch } from "./bounded-fetch.js"
import { fieldOf, startTimeoutMs, type McpServerSettings } from "./config.js"
import { lenientOutputValidator } from "./schema.js"

/** A client connected to one MCP server: over the process it started, or over HTTP. */
export interface OpenedServer {
  client: Client
  /** The last of what the server's process wrote to stderr (empty for HTTP), for errors. */
  stderr(): string
  /** Ends the session and the process (stdin closed, then SIGTERM, then SIGKILL, as the SDK does) or the HTTP connection. */
  close(): Promise<void>
}

export interface ServerEvents {
  /** The connection ended, by the server going (a process that exited, an HTTP stream that broke) or by close(). */
  onClose(): void
  /** The server sent notifications/tools/list_changed. */
  onToolsChanged(): void
}

/** How much of a server's stderr is kept for error messages. */
const STDERR_TAIL = 2000
/** How long a closing HTTP session may take to say goodbye (DELETE) before it is dropped. */
const GOODBYE_MS = 2000

/** Who we say we are in `initialize`. */
const CLIENT_INFO = { name: "toolnexus", version: "0.1.0" }

/**
 * Starts or reaches one MCP server and initializes a session, within its start timeout (or until
 * `signal` aborts). A failure says which field of the server's entry to look at.
 */
export async function openServer(settings: McpServerSettings, events: ServerEvents, signal: AbortSignal): Promise<OpenedServer> {
  if (settings.transport === "stdio") return openProcess(settings, events, signal)
  if (settings.transport === "sse") return openHttp(settings, "sse", events, signal)
  try {
    return await openHttp(settings, "http", events, signal)
  } catch (err) {
    // An older server answers a streamable HTTP POST with 4xx (404, 405): it speaks HTTP+SSE, as the SDK's docs say to try next.
    const code = (err as Error).cause instanceof StreamableHTTPError ? ((err as Error).cause as StreamableHTTPError).code : undefined
    if (code === undefined || code < 400 || code > 499 || signal.aborted) throw err
    try {
      return await openHttp(settings, "sse", events, signal)
    } catch (sseErr) {
      throw new Error(`${(err as Error).message}; the HTTP+SSE transport failed too: ${(sseErr as Error).message}`, { cause: sseErr })
    }
  }
}

async function openProcess(settings: Extract<McpServerSettings, { transport: "stdio" }>, events: ServerEvents, signal: AbortSignal): Promise<OpenedServer> {
  const { name, command, args, env, cwd } = settings
  if (cwd !== undefined) {
    const dir = await stat(cwd).catch((err: NodeJS.ErrnoException) => err)
    if (dir instanceof Error || !dir.isDirectory()) {
      throw new Error(`MCP server ${JSON.stringify(name)}: ${fieldOf(name, "cwd")} ${JSON.stringify(cwd)} should be a directory (${dir instanceof Error ? (dir.code ?? dir.message) : "not a directory"})`)
    }
  }
  const transport = new StdioClientTransport({ command, args, env, ...(cwd !== undefined && { cwd }), stderr: "pipe" })
  let tail = ""
  transport.stderr?.on("data", (chunk: Buffer) => (tail = (tail + chunk.toString("utf8")).slice(-STDERR_TAIL)))
  const stderr = () => tail.trim()
  const client = await connect(transport, settings, events, signal, (err) => {
    if ((err as NodeJS.ErrnoException).syscall?.startsWith("spawn")) {
      return `${fieldOf(name, "command")} ${JSON.stringify(command)} could not be started (${(err as NodeJS.ErrnoException).code ?? err.message}): check that it is installed and on PATH`
    }
    return `${fieldOf(name, "command")} ${JSON.stringify([command, ...args].join(" "))} did not start an MCP server: ${err.message}${stderr() ? `; it wrote: ${stderr()}` : ""}`
  })
  return { client, stderr, close: () => client.close() }
}

async function openHttp(settings: Extract<McpServerSettings, { transport: "http" | "sse" }>, kind: "http" | "sse", events: ServerEvents, signal: AbortSignal): Promise<OpenedServer> {
  const { name, url, headers } = settings
  const requestInit = { headers }
  // Every answer bounded per message: a huge result or an endless line ends the connection, not the server's memory.
  const fetch = boundedFetch(settings.maxMessageBytes)
  const transport = kind === "http" ? new StreamableHTTPClientTransport(url, { requestInit, fetch }) : new SSEClientTransport(url, { requestInit, fetch })
  const client = await connect(transport, settings, events, signal, (err) => {
    const reason = err.cause instanceof Error ? `${err.message} (${(err.cause as NodeJS.ErrnoException).code ?? err.cause.message})` : withStatus(err)
    return `${fieldOf(name, "url")} ${withoutPassword(url.href)} did not answer as an MCP server over ${kind === "http" ? "streamable HTTP" : "HTTP+SSE"}: ${reason}`
  })
  return {
    client,
    stderr: () => "",
    async close() {
      if (transport instanceof StreamableHTTPClientTransport) {
        // Tell the server the session is over, but do not wait on a server that hangs.
        let timer: NodeJS.Timeout | undefined
        await Promise.race([transport.terminateSession().catch(() => {}), new Promise<void>((resolve) => (timer = setTimeout(resolve, GOODBYE_MS).unref()))])
        clearTimeout(timer)
      }
      await client.close()
    },
  }
}

/** An HTTP transport's error with the status the server answered, when there was one. */
export function withStatus(err: Error): string {
  const status = err instanceof StreamableHTTPError || err instanceof SseError ? err.code : undefined
  return status !== undefined && status > 0 ? `HTTP ${status}: ${err.message}` : err.message
}

/** Connects a fresh client over `transport`; on failure, closes it and throws `explain(err)` with the SDK's error as the cause. */
async function connect(transport: Transport, settings: McpServerSettings, events: ServerEvents, signal: AbortSignal, explain: (err: Error) => string): Promise<Client> {
  const client = new Client(CLIENT_INFO, { capabilities: {}, jsonSchemaValidator: lenientOutputValidator() })
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => events.onToolsChanged())
  try {
    await client.connect(transport, { timeout: startTimeoutMs(settings), signal })
  } catch (err) {
    await client.close().catch(() => {})
    const reason = signal.aborted ? "closed while starting" : explain(err instanceof Error ? err : new Error(String(err)))
    throw new Error(`MCP server ${JSON.stringify(settings.name)}: ${reason}`, { cause: err })
  }
  // Set once connected: a failed start is reported by the throw above, not as a lost connection.
  client.onclose = () => events.onClose()
  return client
}
