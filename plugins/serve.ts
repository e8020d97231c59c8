import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from "fastify"
import { pino, type DestinationStream, type Logger as PinoLogger, type LoggerOptions } from "pino"
import type { LogFormat } from "../lib/cli.js"
import type { Client } from "../lib/client/client.js"
import { provideToolkitServer } from "../lib/tools/toolkit.js"
import type { Toolkit } from "../lib/tools/types.js"
import { toolnexusA2A, type ToolnexusA2AOptions } from "./a2a.js"
import { pluginTimeoutFor } from "./options.js"
import { timeoutOptions, type ServerTimeouts } from "./server-timeouts.js"

export interface ServeOptions {
  /** Runs each task's tool-calling loop. */
  client: Client
  /** The tools the client may call; `toolkit.serve()` fills it in. */
  toolkit?: Toolkit
  /** The agent card, the store and the limits: every plugin option but client, toolkit and prefix. */
  a2a?: Omit<ToolnexusA2AOptions, "client" | "toolkit" | "prefix">
  /** `false` for no logs, pino options, or a ready pino logger. Default: JSON lines at info on stdout. */
  logger?: boolean | LoggerOptions | PinoLogger
  /**
   * Fastify's trustProxy: which senders' X-Forwarded-* headers count (for the card's derived URL and
   * the client address). Default false: none do; set it only behind a proxy you run.
   */
  trustProxy?: FastifyServerOptions["trustProxy"]
  /** How long a peer may take to send a request's headers, its whole body, and how long an idle kept-alive connection stays open. */
  timeouts?: ServerTimeouts
}

export interface ServedAgent {
  /** Where the agent listens, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  url: string
  /** The Fastify app, for adding routes or hooks. */
  app: FastifyInstance
  /** Lets running tasks finish (or marks them failed after the grace period), closes the server and the store it opened. Idempotent. */
  stop(): Promise<void>
  /** The same as stop(). */
  close(): Promise<void>
}

declare module "../lib/tools/types.js" {
  // toolkit.serve(addr, opts) takes serve()'s options (its toolkit filled in) and gives a ServedAgent.
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- declaration merging: `extends` adds the members to the lib's interface
  interface ToolkitServeOptions extends Omit<ServeOptions, "toolkit"> {}
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- declaration merging, as above
  interface ToolkitServedAgent extends ServedAgent {}
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
 * port 0 picks a free one; IPv6 as "[::1]:0").
 */
export async function serve(addr: string, opts: ServeOptions): Promise<ServedAgent> {
  const { host, port } = parseAddress(addr)
  const timeouts = timeoutOptions(opts.timeouts)
  // The plugin logs one line per JSON-RPC call, so Fastify's own request lines would only repeat it.
  // Fastify ends each close hook after pluginTimeout: set it so the whole shutdown grace fits.
  const pluginTimeout = pluginTimeoutFor(opts.a2a?.shutdownGraceMs)
  const app: FastifyInstance = Fastify({
    ...loggerSetting(opts.logger),
    ...withoutRequestLogging(),
    trustProxy: opts.trustProxy ?? false,
    ...timeouts,
    ...(pluginTimeout !== undefined && { pluginTimeout }),
  })
  try {
    await app.register(toolnexusA2A, { ...opts.a2a, client: opts.client, toolkit: opts.toolkit })
    await app.listen({ host, port })
  } catch (err) {
    await app.close()
    throw err
  }
  const address = app.server.address()
  if (address === null || typeof address === "string") throw new Error(`serve: the server did not report a TCP address`)
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address
  let stopping: Promise<void> | undefined
  const stop = () => (stopping ??= app.close())
  return { url: `http://${shownHost}:${address.port}`, app, stop, close: stop }
}

/**
 * Fastify's per-request lines off, on any Fastify 5 (a peer dependency): through a LogController where
 * Fastify has one (5.12 on, where the top-level option is deprecated), else the top-level option.
 * Read from the default export: a named import of an export Fastify lacks fails the whole module.
 */
function withoutRequestLogging(): FastifyServerOptions {
  const { LogController } = Fastify as { LogController?: typeof Fastify.LogController }
  return LogController ? { logController: new LogController({ disableRequestLogging: true }) } : { disableRequestLogging: true }
}

/** Splits "host:port" / "[v6]:port" / ":port"; the host defaults to 127.0.0.1. */
export function parseAddress(addr: string): { host: string; port: number } {
  if (typeof addr !== "string") throw new TypeError(`serve: addr should be a "host:port" string, e.g. "127.0.0.1:8080"`)
  const match = /^(?:\[([0-9a-fA-F:.%a-zA-Z]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(addr.trim())
  const port = match ? Number(match[3]) : NaN
  if (!match || port > 65535) {
    throw new TypeError(`serve: addr ${JSON.stringify(addr)} should be "host:port" with a port 0-65535, e.g. "127.0.0.1:8080" or "[::1]:0"`)
  }
  return { host: match[1] ?? (match[2] || "127.0.0.1"), port }
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
