import type { Http2SecureServer, Http2ServerRequest, Http2ServerResponse, ServerHttp2Session } from "node:http2"
import { createSecureContext } from "node:tls"
import Fastify, { type FastifyBaseLogger, type FastifyHttp2SecureOptions, type FastifyInstance, type FastifyServerOptions } from "fastify"
import { pino, type DestinationStream, type Logger as PinoLogger, type LoggerOptions } from "pino"
import type { LogFormat } from "../lib/cli.js"
import type { Client } from "../lib/client/client.js"
import type { AgentFunction } from "../lib/a2a/agent.js"
import { splitAddress } from "../lib/grpc/address.js"
import { MAX_TIMER_MS } from "../lib/duration.js"
import { splitHostPort } from "../lib/host-port.js"
import { provideToolkitServer } from "../lib/tools/toolkit.js"
import type { Toolkit } from "../lib/tools/types.js"
import { toolnexusA2A, type ToolnexusA2AOptions } from "./a2a.js"
import { pluginTimeoutFor } from "./options.js"
import { endUnusedConnectionsOnClose } from "./unused-connections.js"
import { applyToSecureServer, timeoutOptions, type ServerTimeouts } from "./server-timeouts.js"

export interface ServeOptions {
  /** Your own agent, `async (ctx) => outcome` (docs/guides/own-agent.md); or `client`, not both. */
  agent?: AgentFunction
  /** Runs each task's built-in tool-calling loop; or `agent`, not both. */
  client?: Client
  /** The tools the client may call; `toolkit.serve()` fills it in. */
  toolkit?: Toolkit
  /** The agent card, the store and the limits: every plugin option but agent, client, toolkit and prefix. */
  a2a?: Omit<ToolnexusA2AOptions, "agent" | "client" | "toolkit" | "prefix">
  /** `false` for no logs, pino options, or a ready pino logger. Default: JSON lines at info on stdout. */
  logger?: boolean | LoggerOptions | PinoLogger
  /**
   * Fastify's trustProxy: which senders' X-Forwarded-* headers count (for the card's derived URL and
   * the client address). Default false: none do; set it only behind a proxy you run.
   */
  trustProxy?: FastifyServerOptions["trustProxy"]
  /** How long a peer may take to send a request's headers, its whole body, and how long an idle kept-alive connection stays open. */
  timeouts?: ServerTimeouts
  /** Listen with TLS: HTTP/2, and HTTP/1.1 for peers that speak only that. The card then advertises https:// URLs. */
  https?: HttpsOptions
  /** Also serve gRPC (the spec's A2AService) on this "host:port" (port 0 picks one), over TLS with `https`'s certificate when given. */
  grpc?: string
}

/** The server's certificate and key, as Node's tls takes them. */
export interface HttpsOptions {
  /** The private key, PEM. */
  key: string | Buffer
  /** The certificate, PEM, followed by any intermediates peers need to reach a CA they trust. */
  cert: string | Buffer
  /** CA certificates, PEM, as Node's tls `ca`: they override the trusted CAs (for client certificates) and can complete the chain sent. */
  ca?: string | Buffer | Array<string | Buffer>
  /** Decrypts an encrypted `key`. */
  passphrase?: string
}

/** The app serve() runs with `https`: HTTP/2 over TLS. An HTTP/1.1 peer's request.raw and reply.raw are Node's http ones at run time, whatever Fastify's types say. */
export type SecureFastifyInstance = FastifyInstance<Http2SecureServer, Http2ServerRequest, Http2ServerResponse>

export interface ServedAgent<App extends FastifyInstance | SecureFastifyInstance = FastifyInstance> {
  /** Where the agent listens, e.g. `http://127.0.0.1:41234`, or `https://...` with `https` (no trailing slash). */
  url: string
  /** The Fastify app, for adding routes or hooks: an HTTP/2 one with `https`. */
  app: App
  /** With `grpc`: the address gRPC listens on, "host:port", as a gRPC client dials it. */
  grpc?: string
  /**
   * Lets running tasks finish (or marks them failed after the grace period), closes the server and the store it opened.
   * With `drainMs`, drains first: readiness answers 503 at once while everything else keeps serving for that long
   * (docs/guides/deployment.md). Idempotent; a call while a drain waits skips the rest of the wait.
   */
  stop(options?: StopOptions): Promise<void>
  /** The same as stop(). */
  close(options?: StopOptions): Promise<void>
}

/** How serve()'s stop() goes about it. */
export interface StopOptions {
  /**
   * Drain first, for this many ms: `/readyz` answers 503 "draining" at once, every other route keeps serving (HTTP/1
   * answers with `connection: close`), so load balancers see it and move traffic away; then the server stops
   * accepting connections and, on a store whose event log other servers share, ends open streams so their
   * peers resume elsewhere with Last-Event-ID, while running Tasks get the shutdown grace to finish.
   */
  drainMs?: number
}

declare module "../lib/tools/types.js" {
  // toolkit.serve(addr, opts) takes serve()'s options (its toolkit filled in) and gives a ServedAgent.
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- declaration merging: `extends` adds the members to the lib's interface
  interface ToolkitServeOptions extends Omit<ServeOptions, "toolkit"> {}
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- declaration merging, as above
  interface ToolkitServedAgent extends ServedAgent<FastifyInstance | SecureFastifyInstance> {}
}

/** Header paths that carry credentials: pino writes "[Redacted]" in their place, whatever else the host redacts. */
const REDACTED_PATHS = [
  "req.headers.authorization",
  'req.headers["x-api-key"]',
  "req.headers.cookie",
  "headers.authorization",
  'headers["x-api-key"]',
  "headers.cookie",
]

/**
 * Boots a Fastify app serving the agent over A2A on `addr` ("host:port";
 * port 0 picks a free one; IPv6 as "[::1]:0"); with `opts.https`, over TLS.
 */
export async function serve(addr: string, opts: ServeOptions & { https: HttpsOptions }): Promise<ServedAgent<SecureFastifyInstance>>
export async function serve(addr: string, opts: ServeOptions & { https?: undefined }): Promise<ServedAgent>
export async function serve(addr: string, opts: ServeOptions): Promise<ServedAgent<FastifyInstance | SecureFastifyInstance>>
export async function serve(addr: string, opts: ServeOptions): Promise<ServedAgent<FastifyInstance | SecureFastifyInstance>> {
  const { host, port } = parseAddress(addr)
  if (opts.grpc !== undefined) splitAddress(opts.grpc) // a bad gRPC address is refused before anything listens
  const timeouts = timeoutOptions(opts.timeouts)
  // Checked and copied once: the same certificate is what the gRPC listener (opts.grpc) serves.
  const https = httpsOptions(opts.https)
  // The plugin logs one line per JSON-RPC call, so Fastify's own request lines would only repeat it.
  // Fastify ends each close hook after pluginTimeout: set it so the whole shutdown grace fits.
  const pluginTimeout = pluginTimeoutFor(opts.a2a?.shutdownGraceMs)
  const common = {
    ...loggerSetting(opts.logger),
    ...withoutRequestLogging(),
    trustProxy: opts.trustProxy ?? false,
    requestTimeout: timeouts.requestTimeout,
    keepAliveTimeout: timeouts.keepAliveTimeout,
    ...(pluginTimeout !== undefined && { pluginTimeout }),
  }
  let app: FastifyInstance | SecureFastifyInstance
  let grpc: string | undefined
  if (https) {
    // HTTP/1.1 stays allowed: the official JS client's fetch speaks only that. An HTTP/2 connection idle for idleMs is closed.
    const secureOptions: FastifyHttp2SecureOptions<Http2SecureServer> = { ...common, http2: true, https: { ...https, allowHTTP1: true }, http2SessionTimeout: timeouts.keepAliveTimeout }
    const secure = Fastify(secureOptions)
    applyToSecureServer(secure.server, timeouts)
    app = secure
  } else {
    app = Fastify({ ...common, http: timeouts.http })
  }
  try {
    // The plugin is typed for Fastify's default server; its raw writes (SSE, a peer's close) work on HTTP/2's compat objects as well (test/plugins/https.test.ts).
    await (app as FastifyInstance).register(toolnexusA2A, { ...opts.a2a, ...(opts.agent !== undefined && { agent: opts.agent }), client: opts.client, toolkit: opts.toolkit })
    if (https) closeSessionsOnClose(app as SecureFastifyInstance)
    else endUnusedConnectionsOnClose(app as FastifyInstance)
    await app.listen({ host, port })
    if (opts.grpc !== undefined) grpc = await app.toolnexusGrpc.listen(opts.grpc, https && { tls: https })
  } catch (err) {
    await app.close()
    throw err
  }
  const address = app.server.address()
  if (address === null || typeof address === "string") throw new Error(`serve: the server did not report a TCP address`)
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address
  let stopping: Promise<void> | undefined
  let skipDrain: (() => void) | undefined
  const stop = (options?: StopOptions): Promise<void> => {
    if (stopping) {
      skipDrain?.()
      return stopping
    }
    const drainMs = options?.drainMs
    if (drainMs === undefined) return (stopping = app.close())
    if (!(Number.isFinite(drainMs) && drainMs >= 0 && drainMs <= MAX_TIMER_MS)) {
      return Promise.reject(new TypeError(`serve: stop()'s drainMs should be a number of milliseconds from 0 to ${MAX_TIMER_MS}`))
    }
    app.toolnexusReadiness.drain()
    const drained = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, drainMs)
      skipDrain = () => {
        clearTimeout(timer)
        resolve()
      }
    })
    return (stopping = drained.then(async () => {
      // No new connection from here on, while the agent's close lets running Tasks finish; Fastify's own
      // server.close() later finds the server closed already, so this one waits for the last connections.
      const lastConnections = new Promise<void>((resolve) => app.server.close(() => resolve()))
      await app.close()
      await lastConnections
    }))
  }
  return { url: `${https ? "https" : "http"}://${shownHost}:${address.port}`, app, ...(grpc !== undefined && { grpc }), stop, close: stop }
}

/**
 * Node before 24 leaves HTTP/2 connections open on close, and the close waits on them: each is told to go away
 * (GOAWAY; what it still has open finishes) after the agent's own preClose (added before this one) has ended its streams.
 */
function closeSessionsOnClose(app: SecureFastifyInstance): void {
  const sessions = new Set<ServerHttp2Session>()
  app.server.on("session", (session) => {
    sessions.add(session)
    session.once("close", () => sessions.delete(session))
  })
  app.addHook("preClose", (done) => {
    for (const session of sessions) session.close()
    done()
  })
}

/** serve()'s `https` checked (each field's type, then that the key and certificate load and match) and copied; undefined without it. */
function httpsOptions(value: unknown): HttpsOptions | undefined {
  if (value === undefined) return undefined
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeError(`toolnexus: serve() https should be an object { key, cert, ca?, passphrase? }`)
  const { key, cert, ca, passphrase } = value as Record<string, unknown>
  if (!isPem(key)) throw new TypeError(`toolnexus: serve() https.key should be a PEM string or Buffer`)
  if (!isPem(cert)) throw new TypeError(`toolnexus: serve() https.cert should be a PEM string or Buffer`)
  if (ca !== undefined && !(Array.isArray(ca) ? ca.length > 0 && ca.every(isPem) : isPem(ca))) {
    throw new TypeError(`toolnexus: serve() https.ca should be a PEM string or Buffer, or an array of them`)
  }
  if (passphrase !== undefined && typeof passphrase !== "string") throw new TypeError(`toolnexus: serve() https.passphrase should be a string`)
  const https: HttpsOptions = { key, cert, ...(ca !== undefined && { ca: ca as HttpsOptions["ca"] }), ...(passphrase !== undefined && { passphrase }) }
  try {
    createSecureContext(https)
  } catch (err) {
    // OpenSSL's reason (bad decrypt, key values mismatch, no start line), never the material itself.
    throw new TypeError(`toolnexus: serve() https.key and https.cert should be a PEM private key and its certificate: ${(err as Error).message}`, { cause: err })
  }
  return https
}

function isPem(material: unknown): material is string | Buffer {
  return (typeof material === "string" || Buffer.isBuffer(material)) && material.length > 0
}

/**
 * Fastify's per-request lines off, on any Fastify 5 (a peer dependency): through a LogController where
 * Fastify has one (5.12 on, where the top-level option is deprecated), else the top-level option.
 * Read from the default export: a named import of an export Fastify lacks fails the whole module.
 */
function withoutRequestLogging(): Pick<FastifyServerOptions, "logController" | "disableRequestLogging"> {
  const { LogController } = Fastify as { LogController?: typeof Fastify.LogController }
  return LogController ? { logController: new LogController({ disableRequestLogging: true }) } : { disableRequestLogging: true }
}

/** Splits "host:port" / "[v6]:port" / ":port"; the host defaults to 127.0.0.1. */
export function parseAddress(addr: string): { host: string; port: number } {
  if (typeof addr !== "string") throw new TypeError(`serve: addr should be a "host:port" string, e.g. "127.0.0.1:8080"`)
  const split = splitHostPort(addr)
  if (split === undefined) {
    throw new TypeError(`serve: addr ${JSON.stringify(addr)} should be "host:port" with a port 0-65535, e.g. "127.0.0.1:8080" or "[::1]:0"`)
  }
  return { host: split.host, port: split.port }
}

function loggerSetting(logger: ServeOptions["logger"]): { logger?: boolean | LoggerOptions; loggerInstance?: FastifyBaseLogger } {
  if (logger === false) return { logger: false }
  if (logger === undefined || logger === true) return { logger: { level: "info", redact: REDACTED_PATHS } }
  if (isPinoLogger(logger)) return { loggerInstance: logger }
  return { logger: { ...logger, redact: withCredentialPaths(logger.redact) } }
}

function isPinoLogger(value: LoggerOptions | PinoLogger): value is PinoLogger {
  return typeof (value as PinoLogger).child === "function" && typeof (value as PinoLogger).info === "function"
}

/** The host's redaction plus ours: a host's own `redact` never switches off the credential paths. */
function withCredentialPaths(redact: LoggerOptions["redact"]): LoggerOptions["redact"] {
  if (redact === undefined) return REDACTED_PATHS
  if (Array.isArray(redact)) return [...new Set([...redact, ...REDACTED_PATHS])]
  return { ...redact, paths: [...new Set([...redact.paths, ...REDACTED_PATHS])] }
}

/** A pino logger with the credential redaction serve() uses, for hosts that build their own. */
export function createLogger(options: LoggerOptions = {}, destination?: DestinationStream): PinoLogger {
  const settings = { level: "info", ...options, redact: withCredentialPaths(options.redact) }
  return destination ? pino(settings, destination) : pino(settings)
}

provideToolkitServer((addr, opts, toolkit) => serve(addr, { ...opts, toolkit }))

/** Where the command's log lines go: through pino-pretty (loaded only then) for "pretty", else pino's own JSON lines on stdout. */
export async function logDestination(format: LogFormat): Promise<DestinationStream | undefined> {
  if (format === "json") return undefined
  const { default: pinoPretty } = await import("pino-pretty")
  // Synchronous, so the lines written just before process.exit() are not lost.
  return pinoPretty({ sync: true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname" })
}
