import { randomUUID } from "node:crypto"
import fs from "node:fs"
import type { IncomingMessage } from "node:http"
import path from "node:path"
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { Test } from "tap"
import type { McpStdioServerConfig } from "../lib/tools/mcp/config.js"
// @ts-expect-error: a plain .mjs fixture, run by node as it is (no types)
import { fixtureServer } from "./fixtures/mcp-tools.mjs"
import { localServer, tmpDir, waitFor } from "./helpers.js"

/*
 * The MCP servers the MCP tests talk to: test/fixtures/mcp-tools.mjs, a server made with the official SDK,
 * over stdio (a process per start) or over HTTP in this process (streamable HTTP, or the older HTTP+SSE).
 */

export const STDIO_SERVER = path.join(import.meta.dirname, "fixtures", "mcp-stdio-server.mjs")

type FixtureServer = { connect(transport: unknown): Promise<void>; close(): Promise<void> }
const makeServer = fixtureServer as (hooks: { event: (line: string) => void; headers?: (extra: { requestInfo?: { headers: Record<string, string> } }) => Record<string, string> }) => FixtureServer

/** The stdio fixture's entry and what its processes said (one file the processes append to). */
export function stdioServer(t: Test): { config: McpStdioServerConfig; events: () => string[]; pids: () => number[] } {
  const file = path.join(tmpDir(t, "tn-mcp-"), "events.log")
  const events = () => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : [])
  return {
    config: { command: process.execPath, args: [STDIO_SERVER], env: { MCP_EVENTS: file } },
    events,
    pids: () => events().flatMap((line) => (line.startsWith("start ") ? [Number(line.slice(6))] : [])),
  }
}

/** True while a process with this id exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH"
  }
}

/** Waits until none of `pids` is alive. */
export const gone = (pids: number[]) => waitFor(() => pids.every((pid) => !alive(pid)), 10_000, `processes ${pids.join(", ")} to end`)

export interface HttpMcpServer {
  url: string
  /** What the servers saw ("call echo", "canceled …", "authorization …"). */
  events: string[]
  /** Each HTTP request: method, path and session id. */
  requests: Array<{ method: string; path: string; session?: string }>
  /** Forgets every session, as a server that restarted would: the next request with an old session id gets 404. */
  forgetSessions(): void
}

/**
 * The fixture over HTTP on 127.0.0.1: streamable HTTP (one session per initialize), or with `sse`, the
 * older HTTP+SSE transport only (a GET opens the stream, POSTs go to the endpoint it names; a POST to
 * the URL itself is refused with 405, as such servers do).
 */
export async function httpMcpServer(t: Test, { sse = false } = {}): Promise<HttpMcpServer> {
  const events: string[] = []
  const requests: HttpMcpServer["requests"] = []
  const streamable = new Map<string, StreamableHTTPServerTransport>()
  const older = new Map<string, SSEServerTransport>()
  const servers: FixtureServer[] = []
  const newServer = () => {
    const server = makeServer({ event: (line) => events.push(line), headers: (extra) => extra.requestInfo?.headers ?? {} })
    servers.push(server)
    return server
  }
  t.teardown(() => Promise.allSettled(servers.map((server) => server.close())))
  const url = await localServer(t, (req, res) => {
    const session = (req.headers["mcp-session-id"] as string | undefined) ?? new URL(req.url ?? "/", "http://x").searchParams.get("sessionId") ?? undefined
    requests.push({ method: req.method ?? "", path: req.url ?? "", ...(session && { session }) })
    void handle(req).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500)
      res.end(String(err))
    })
    async function handle(req: IncomingMessage) {
      if (sse) {
        if (req.method === "GET" && req.url === "/mcp") {
          const transport = new SSEServerTransport("/messages", res)
          older.set(transport.sessionId, transport)
          return newServer().connect(transport)
        }
        const transport = older.get(session ?? "")
        if (!req.url?.startsWith("/messages") || !transport) return void res.writeHead(req.method === "POST" ? 405 : 404).end("this server speaks HTTP+SSE only")
        return transport.handlePostMessage(req, res)
      }
      let transport = session ? streamable.get(session) : undefined
      if (session && !transport) return void res.writeHead(404).end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }))
      if (!transport) {
        const fresh = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (id) => void streamable.set(id, fresh) })
        await newServer().connect(fresh)
        transport = fresh
      }
      return transport.handleRequest(req, res)
    }
  })
  return { url: `${url}/mcp`, events, requests, forgetSessions: () => streamable.clear() }
}
