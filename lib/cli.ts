import { readFileSync } from "node:fs"
import path from "node:path"
import { createSecureContext } from "node:tls"
import { parseArgs } from "node:util"
import { createClient, createLocalClient, type Client, type ClientOptions } from "./client/client.js"
import { MAX_TIMER_MS, parseDuration } from "./duration.js"
import { splitAddress } from "./grpc/address.js"
import { splitHostPort } from "./host-port.js"
import { allowList } from "./push/guard.js"
import type { PushOptions } from "./push/options.js"
import { readSigningKey } from "./signing-key.js"
import type { McpServers } from "./tools/mcp/config.js"
import { mcpServersIn } from "./tools/mcp/config-file.js"
import type { RetentionOptions } from "./stores/retention.js"
import { isHttpUrl, isPlainHttpUrl, withoutPassword } from "./url-credentials.js"

/** How the command writes its logs: pino-pretty's lines for a person, or pino's JSON lines for a collector. */
export type LogFormat = "pretty" | "json"

/** What the `toolnexus` command runs with, from flags first, then environment variables, then defaults. */
interface CliConfig {
  host: string
  port: number
  store: string
  /** How long finished Tasks are kept; absent ("off"), for ever. */
  retention?: RetentionOptions
  name: string
  /** The endpoint URL the agent card advertises; absent, it follows each request's Host header. */
  publicUrl?: string
  /** The module whose default export is the agent (--agent), resolved against the working directory; absent, the built-in loop. */
  agentModule?: string
  /** The model to call; absent means the offline echo agent. */
  model?: Pick<ClientOptions, "baseUrl" | "style" | "model" | "apiKey" | "maxResponseBytes" | "maxLineLength" | "turnTimeoutMs">
  /** secret → principal, from TOOLNEXUS_TOKENS; absent means no authentication. */
  tokens?: Record<string, string>
  /** The principal that owns the Tasks created before authentication was on; absent, nobody does. */
  unownedTasksBelongTo?: string
  /** serve()'s timeouts in ms, those the flags set; absent ones keep serve()'s defaults. */
  timeouts?: { requestMs?: number; headersMs?: number; idleMs?: number }
  /** Plugin limits on streams, those the flags set (named as the plugin options); absent ones keep the plugin's defaults. */
  streams?: { maxStreams?: number; maxStreamsPerPrincipal?: number; streamHeartbeatMs?: number }
  /** Push notifications' settings from the flags; absent ones keep the plugin's defaults. */
  push?: PushOptions
  /** The agent card's signing key, from --card-signing-key; absent, the card is unsigned. */
  cardSigning?: { privateKey: string }
  /** The TLS certificate and key files' text, for serve()'s `https`; absent, plain HTTP. */
  https?: { cert: string; key: string }
  /** Where gRPC listens, "host:port", for serve()'s `grpc`; absent, no gRPC. */
  grpc?: string
  /** Other A2A agents the model may call as tools, by URL (base or card URL); absent, none. */
  a2aAgents?: string[]
  /** MCP servers whose tools the model may call: the `mcpServers` of the --mcp-config file, checked; absent, none. */
  mcpServers?: McpServers
  /** createToolkit's limits the flags set; absent ones keep its defaults. */
  toolLimits?: { maxToolResultBytes?: number; maxToolListingBytes?: number }
  /** Serve the task inspector page at /inspector/; absent, not served. */
  inspector?: true
  /** Prometheus metrics, as the plugin's `metrics` option: at /metrics, or on an address of their own; absent, off. */
  metrics?: true | { listen: string }
  logFormat: LogFormat
  /** On SIGTERM, how long /readyz answers 503 while everything else keeps serving, before the server closes (ms). */
  drainDelayMs: number
}

/** The command's drain on SIGTERM: long enough for a balancer checking every second or two to see /readyz fail twice. */
export const DEFAULT_DRAIN_DELAY = "5s"

export const USAGE = `Usage: toolnexus [options]

Serves an A2A agent (A2A 1.0 and 0.3) over JSON-RPC and HTTP+JSON, and gRPC with --grpc.
Flags win over environment variables.

  --host HOST          listen address (TOOLNEXUS_HOST, default 127.0.0.1)
  --port PORT          listen port, 0 for any free one (TOOLNEXUS_PORT, default 4000)
  --store STORE        where Tasks are kept (TOOLNEXUS_STORE, default file:./.toolnexus/tasks):
                         memory                   in this process only
                         file:<dir>               one JSON file per Task in <dir>
                         postgres://USER@HOST/DB  PostgreSQL; ?table=NAME (needs the pg package)
                         nats://HOST:4222         NATS JetStream KV; ?bucket=NAME (needs the nats package)
  --retention DURATION finished Tasks older than this are deleted, e.g. 30d, 12h, 90m; "off"
                       keeps them all (TOOLNEXUS_RETENTION, default 30d)
  --name NAME          agent name on the agent card (TOOLNEXUS_NAME)
  --public-url URL     the URL peers reach the agent at, advertised on the agent card
                       (TOOLNEXUS_PUBLIC_URL; default: taken from each request's Host header)
  --tls-cert FILE      serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate (chain)
                       (TOOLNEXUS_TLS_CERT; default: plain HTTP)
  --tls-key FILE       ... and this PEM private key, unencrypted; both or neither (TOOLNEXUS_TLS_KEY)
  --grpc HOST:PORT     also serve gRPC (the spec's A2AService) on this address, over TLS with
                       the --tls-cert certificate when set (TOOLNEXUS_GRPC; default: no gRPC)
  --agent FILE         serve your own agent: a module whose default export is the agent function,
                       async (ctx) => answer, instead of the built-in loop (TOOLNEXUS_AGENT;
                       not with the model and tool flags below)
  --base-url URL       model endpoint, e.g. https://api.openai.com/v1 (TOOLNEXUS_BASE_URL)
  --style STYLE        "openai" or "anthropic" (TOOLNEXUS_STYLE, default openai)
  --model MODEL        model name (TOOLNEXUS_MODEL)
  --model-max-response SIZE
                       the most bytes of one model answer read, streamed or whole; past it the
                       Task fails saying so (TOOLNEXUS_MODEL_MAX_RESPONSE, default 64MiB)
  --model-max-line SIZE
                       the longest line of a streamed model answer, in characters
                       (TOOLNEXUS_MODEL_MAX_LINE, default 8MiB)
  --model-turn-timeout D
                       the longest one model turn may take in all, retries and a stream's
                       every chunk included (TOOLNEXUS_MODEL_TURN_TIMEOUT, default 10m)
  --a2a-agent URL      another A2A agent the model may call as a tool: its base URL or its card's
                       URL; repeat for more (TOOLNEXUS_A2A_AGENTS, comma-separated; default none)
  --mcp-config FILE    an mcp.json: the MCP servers in its "mcpServers" object, by name, each
                       { "command", "args", "env", "cwd" } or { "url", "headers" }; their tools
                       join the agent's (TOOLNEXUS_MCP_CONFIG; default none)
  --max-tool-result SIZE
                       the most bytes of one tool result the model reads; a longer one is cut
                       with a note (TOOLNEXUS_MAX_TOOL_RESULT, default 1MiB)
  --max-tool-listing SIZE
                       the most bytes of one tool's name, description and schema; an MCP tool
                       past it is left out (TOOLNEXUS_MAX_TOOL_LISTING, default 256KiB)
  --log-format FORMAT  "pretty" or "json" (TOOLNEXUS_LOG_FORMAT; default pretty on a terminal,
                       JSON lines otherwise)
  --inspector          serve the task inspector, a page to read Tasks and talk to the agent, at
                       /inspector/ (TOOLNEXUS_INSPECTOR=1; default off)
  --metrics            serve Prometheus metrics at /metrics, behind TOOLNEXUS_TOKENS when set
                       (TOOLNEXUS_METRICS=1; default off)
  --metrics-listen HOST:PORT
                       serve the metrics on this address of their own instead, without
                       authentication: bind it where only your scraper reaches (TOOLNEXUS_METRICS_LISTEN)

Limits (durations in ms, or with a unit: "30s", "2m", "500ms"):
  --request-timeout D  a whole request, headers and body, must arrive within D or gets 408
                       (TOOLNEXUS_REQUEST_TIMEOUT, default 30s)
  --headers-timeout D  its headers within D, at most the request timeout
                       (TOOLNEXUS_HEADERS_TIMEOUT, default 10s)
  --idle-timeout D     a kept-alive connection idle for D is closed (TOOLNEXUS_IDLE_TIMEOUT, default 72s)
  --max-streams N      SSE streams open at once, in total (TOOLNEXUS_MAX_STREAMS, default 1000)
  --max-streams-per-principal N
                       ... per principal, or per client address without tokens
                       (TOOLNEXUS_MAX_STREAMS_PER_PRINCIPAL, default 100)
  --stream-heartbeat D a ": keep-alive" comment on each open stream every D
                       (TOOLNEXUS_STREAM_HEARTBEAT, default 15s)
  --unowned-tasks-belong-to PRINCIPAL
                       with TOOLNEXUS_TOKENS: the principal that owns the Tasks saved before
                       authentication was on (TOOLNEXUS_UNOWNED_TASKS_BELONG_TO; default: nobody,
                       they answer "task not found" to every principal)
  --push-allow HOST[:PORT],...
                       webhook hosts push notifications may reach though they resolve to
                       loopback or private addresses; a port narrows it to that port
                       (TOOLNEXUS_PUSH_ALLOW; default none)
  --push-signing-key FILE
                       sign every push notification with this private key (PEM or JWK;
                       Ed25519, P-256 or RSA); its public half is served at
                       /.well-known/jwks.json (TOOLNEXUS_PUSH_SIGNING_KEY; default unsigned)
  --card-signing-key FILE
                       sign the agent card with this private key (PEM or JWK; Ed25519, P-256
                       or RSA); its public half is served at /.well-known/jwks.json
                       (TOOLNEXUS_CARD_SIGNING_KEY; default unsigned)
  --push-timeout D     a webhook must answer within D, or the POST is retried
                       (TOOLNEXUS_PUSH_TIMEOUT, default 10s)
  --push-max-age D     an undelivered notification older than D goes to the dead letters
                       (TOOLNEXUS_PUSH_MAX_AGE, default 24h)
  --push-max-attempts N
                       ... and so does one that failed N times (TOOLNEXUS_PUSH_MAX_ATTEMPTS;
                       default: no limit, its age decides)
  --drain-delay D      on SIGTERM, /readyz answers 503 for D while everything else keeps serving,
                       then the server closes; 0 for none (TOOLNEXUS_DRAIN_DELAY, default 5s)
  -h, --help           this text

Secrets come from the environment only (never flags, so they stay out of ps):
  TOOLNEXUS_API_KEY    the model endpoint's key
  TOOLNEXUS_TOKENS     peers' credentials as secret=principal pairs, comma-separated;
                       set, every request needs Authorization: Bearer <secret> (or x-api-key)
With no --base-url the server runs an offline echo agent, so a first run needs no key.`

/**
 * The command's retention: a server left running on the file store grows by about 4 KB per Task for ever
 * otherwise; 30 days still answers follow-ups to a finished Task and keeps a month to audit.
 */
export const DEFAULT_RETENTION = "30d"

/** Flags, then environment, then defaults; `stdoutIsTTY` picks the default log format. Throws naming the flag on a bad value. */
export function parseCli(argv: string[], env: NodeJS.ProcessEnv, stdoutIsTTY = false): CliConfig | "help" {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: "string" },
      port: { type: "string" },
      store: { type: "string" },
      retention: { type: "string" },
      name: { type: "string" },
      "public-url": { type: "string" },
      "tls-cert": { type: "string" },
      "tls-key": { type: "string" },
      grpc: { type: "string" },
      agent: { type: "string" },
      "base-url": { type: "string" },
      style: { type: "string" },
      model: { type: "string" },
      "model-max-response": { type: "string" },
      "model-max-line": { type: "string" },
      "model-turn-timeout": { type: "string" },
      "max-tool-result": { type: "string" },
      "max-tool-listing": { type: "string" },
      "log-format": { type: "string" },
      "request-timeout": { type: "string" },
      "headers-timeout": { type: "string" },
      "idle-timeout": { type: "string" },
      "max-streams": { type: "string" },
      "max-streams-per-principal": { type: "string" },
      "stream-heartbeat": { type: "string" },
      "unowned-tasks-belong-to": { type: "string" },
      "push-allow": { type: "string" },
      "push-signing-key": { type: "string" },
      "card-signing-key": { type: "string" },
      "push-timeout": { type: "string" },
      "push-max-age": { type: "string" },
      "push-max-attempts": { type: "string" },
      "a2a-agent": { type: "string", multiple: true },
      "mcp-config": { type: "string" },
      inspector: { type: "boolean" },
      metrics: { type: "boolean" },
      "metrics-listen": { type: "string" },
      "drain-delay": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  })
  if (values.help) return "help"
  /** A flag's value, else its TOOLNEXUS_* variable's; an empty one counts as unset. */
  const setting = (flag: keyof typeof values) => {
    const text = (values[flag] as string | undefined) ?? env[`TOOLNEXUS_${flag.replaceAll("-", "_").toUpperCase()}`]
    return text === "" ? undefined : text
  }
  const portText = values.port ?? env.TOOLNEXUS_PORT ?? "4000"
  const port = Number(portText)
  if (!/^\d{1,5}$/.test(portText) || port > 65535) throw new Error(`--port should be a number 0-65535, got ${JSON.stringify(portText)}`)
  const baseUrl = values["base-url"] ?? env.TOOLNEXUS_BASE_URL
  const style = values.style ?? env.TOOLNEXUS_STYLE ?? "openai"
  if (style !== "openai" && style !== "anthropic") throw new Error(`--style should be "openai" or "anthropic", got ${JSON.stringify(style)}`)
  const model = values.model ?? env.TOOLNEXUS_MODEL
  if (baseUrl && !model) throw new Error("--base-url is set but no --model: name the model to call (or TOOLNEXUS_MODEL)")
  if (model && !baseUrl) throw new Error("--model is set but no --base-url: say where the model is served (or TOOLNEXUS_BASE_URL)")
  const modelLimits = definedOnly({
    maxResponseBytes: sizeFlag("model-max-response", setting("model-max-response")),
    maxLineLength: sizeFlag("model-max-line", setting("model-max-line")),
    turnTimeoutMs: durationFlag("model-turn-timeout", setting("model-turn-timeout")),
  })
  const toolLimits = definedOnly({
    maxToolResultBytes: sizeFlag("max-tool-result", setting("max-tool-result")),
    maxToolListingBytes: sizeFlag("max-tool-listing", setting("max-tool-listing")),
  })
  const publicUrl = values["public-url"] ?? env.TOOLNEXUS_PUBLIC_URL
  if (publicUrl !== undefined && publicUrl !== "" && !isPlainHttpUrl(publicUrl)) {
    throw new Error(`--public-url should be the http(s) URL peers reach the agent at, without a user or password, got ${JSON.stringify(withoutPassword(publicUrl))}`)
  }
  const retentionText = setting("retention") ?? DEFAULT_RETENTION
  if (retentionText !== "off" && parseDuration(retentionText) === undefined) {
    throw new Error(`--retention should be a duration such as 30d, 12h or 90m, or "off" to keep finished Tasks, got ${JSON.stringify(retentionText)}`)
  }
  const logFormat = values["log-format"] ?? env.TOOLNEXUS_LOG_FORMAT ?? (stdoutIsTTY ? "pretty" : "json")
  if (logFormat !== "pretty" && logFormat !== "json") throw new Error(`--log-format should be "pretty" or "json", got ${JSON.stringify(logFormat)}`)
  const timeouts = definedOnly({
    requestMs: durationFlag("request-timeout", setting("request-timeout")),
    headersMs: durationFlag("headers-timeout", setting("headers-timeout")),
    idleMs: durationFlag("idle-timeout", setting("idle-timeout")),
  })
  if (timeouts?.headersMs !== undefined && timeouts.requestMs !== undefined && timeouts.headersMs > timeouts.requestMs) {
    throw new Error(`--headers-timeout (${timeouts.headersMs} ms) should be at most --request-timeout (${timeouts.requestMs} ms)`)
  }
  const streams = definedOnly({
    maxStreams: countFlag("max-streams", setting("max-streams")),
    maxStreamsPerPrincipal: countFlag("max-streams-per-principal", setting("max-streams-per-principal")),
    streamHeartbeatMs: durationFlag("stream-heartbeat", setting("stream-heartbeat")),
  })
  const tokens = env.TOOLNEXUS_TOKENS ? parseTokens(env.TOOLNEXUS_TOKENS) : undefined
  const unownedTasksBelongTo = setting("unowned-tasks-belong-to")
  if (unownedTasksBelongTo !== undefined && !(tokens && Object.values(tokens).includes(unownedTasksBelongTo))) {
    throw new Error(
      `--unowned-tasks-belong-to should name a principal of TOOLNEXUS_TOKENS (${tokens ? [...new Set(Object.values(tokens))].join(", ") : "not set: without authentication every peer sees every Task"}), got ${JSON.stringify(unownedTasksBelongTo)}`,
    )
  }
  const pushAllow = setting("push-allow")?.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
  if (pushAllow !== undefined) {
    try {
      allowList(pushAllow)
    } catch (err) {
      throw new Error(`--push-allow: ${(err as Error).message}`, { cause: err })
    }
  }
  const push = definedOnly({
    ...(pushAllow !== undefined && pushAllow.length > 0 ? { allow: pushAllow } : {}),
    signingKey: signingKeyFile("push-signing-key", setting("push-signing-key")),
    timeoutMs: durationFlag("push-timeout", setting("push-timeout")),
    maxAge: maxAgeFlag(setting("push-max-age")),
    maxAttempts: countFlag("push-max-attempts", setting("push-max-attempts")),
  })
  const a2aAgents = a2aAgentUrls(values["a2a-agent"], env.TOOLNEXUS_A2A_AGENTS)
  const mcpServers = mcpConfigFile(setting("mcp-config"))
  const agentModule = setting("agent")
  if (agentModule !== undefined) {
    // The model and the tools are the built-in loop's: an agent module brings its own.
    const loopOnly = { "--base-url": baseUrl, "--model": model, "--style": values.style, "--model-* limits": modelLimits, "--a2a-agent": a2aAgents[0], "--mcp-config": mcpServers, "--max-tool-* limits": toolLimits }
    const clash = Object.entries(loopOnly).find(([, value]) => value !== undefined)
    if (clash) throw new Error(`--agent serves your own agent module, and ${clash[0]} is for the built-in tool-calling loop: give one or the other (your agent calls its own model and tools)`)
  }
  const https = tlsFiles(setting("tls-cert"), setting("tls-key"))
  const grpc = setting("grpc")
  if (grpc !== undefined) {
    try {
      splitAddress(grpc)
    } catch {
      throw new Error(`--grpc should be HOST:PORT with a port 0-65535, e.g. 127.0.0.1:50051, got ${JSON.stringify(grpc)}`)
    }
  }
  return {
    host: values.host ?? env.TOOLNEXUS_HOST ?? "127.0.0.1",
    port,
    store: values.store ?? env.TOOLNEXUS_STORE ?? "file:./.toolnexus/tasks",
    ...(retentionText !== "off" ? { retention: { terminalTtl: retentionText } } : {}),
    name: values.name ?? env.TOOLNEXUS_NAME ?? "toolnexus agent",
    ...(publicUrl ? { publicUrl } : {}),
    ...(agentModule !== undefined ? { agentModule: path.resolve(agentModule) } : {}),
    ...(baseUrl && model ? { model: { baseUrl, style, model, apiKey: env.TOOLNEXUS_API_KEY, ...modelLimits } } : {}),
    ...(tokens ? { tokens } : {}),
    ...(unownedTasksBelongTo !== undefined ? { unownedTasksBelongTo } : {}),
    ...(timeouts ? { timeouts } : {}),
    ...(streams ? { streams } : {}),
    ...(push ? { push: push } : {}),
    ...cardSigningFlag(setting("card-signing-key")),
    ...(https ? { https } : {}),
    ...(grpc !== undefined ? { grpc } : {}),
    ...(a2aAgents.length > 0 ? { a2aAgents } : {}),
    ...(mcpServers ? { mcpServers } : {}),
    ...(toolLimits ? { toolLimits } : {}),
    ...(values.inspector || switchVariable("TOOLNEXUS_INSPECTOR", env.TOOLNEXUS_INSPECTOR) ? { inspector: true as const } : {}),
    ...metricsFlags(values.metrics, setting("metrics-listen"), env),
    logFormat,
    drainDelayMs: durationFlag("drain-delay", setting("drain-delay") ?? DEFAULT_DRAIN_DELAY, 0)!,
  }
}

/**
 * A duration flag in whole milliseconds, `min` (1 ms unless 0 is allowed) to ~24.8 days: digits are ms, or digits with
 * ms, s, m, h or d. Throws naming the flag.
 */
function durationFlag(flag: string, text: string | undefined, min: 0 | 1 = 1): number | undefined {
  if (text === undefined) return undefined
  const ms = /^\s*\d+\s*$/.test(text) ? Number(text) : parseDuration(text)
  if (ms === undefined || !Number.isInteger(ms) || ms < min || ms > MAX_TIMER_MS) {
    throw new Error(`--${flag} should be a duration from ${min === 0 ? "0" : "1 ms"} to 24 days: milliseconds, or with a unit such as "30s", "2m", "500ms", got ${JSON.stringify(text)}`)
  }
  return ms
}

/** --push-max-age: a duration, no upper bound (it is compared with ages, never set as a timer). Throws naming the flag. */
function maxAgeFlag(text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  const ms = /^\s*\d+\s*$/.test(text) ? Number(text) : parseDuration(text)
  if (ms === undefined || !(ms >= 1)) throw new Error(`--push-max-age should be a duration such as "24h", "90m" or "7d", got ${JSON.stringify(text)}`)
  return ms
}

/** --card-signing-key: the card's signing key, read and checked as --push-signing-key's is. */
function cardSigningFlag(file: string | undefined): { cardSigning?: { privateKey: string } } {
  const privateKey = signingKeyFile("card-signing-key", file)
  return privateKey === undefined ? {} : { cardSigning: { privateKey } }
}

/** A signing key flag: the key file's text, checked to be a signing key; its content never appears in an error. */
function signingKeyFile(flag: string, file: string | undefined): string | undefined {
  if (file === undefined) return undefined
  const text = readFlagFile(flag, file)
  try {
    readSigningKey(text, `--${flag}`)
  } catch (err) {
    throw new Error(`${(err as Error).message} (file ${JSON.stringify(file)})`, { cause: err })
  }
  return text
}

/** --tls-cert and --tls-key: both files' text, checked to load as a certificate and its key; neither, undefined. Never a key's content in an error. */
function tlsFiles(certFile: string | undefined, keyFile: string | undefined): { cert: string; key: string } | undefined {
  if (certFile === undefined && keyFile === undefined) return undefined
  if (keyFile === undefined) throw new Error("--tls-cert is set but no --tls-key: give the certificate's private key too (or TOOLNEXUS_TLS_KEY)")
  if (certFile === undefined) throw new Error("--tls-key is set but no --tls-cert: give the certificate too (or TOOLNEXUS_TLS_CERT)")
  const cert = readFlagFile("tls-cert", certFile)
  const key = readFlagFile("tls-key", keyFile)
  try {
    createSecureContext({ cert, key })
  } catch (err) {
    // OpenSSL's reason: no start line (not PEM), bad decrypt (an encrypted key), key values mismatch.
    throw new Error(`--tls-cert ${JSON.stringify(certFile)} and --tls-key ${JSON.stringify(keyFile)} should be a PEM certificate and its unencrypted private key: ${(err as Error).message}`, { cause: err })
  }
  return { cert, key }
}

/** A file a flag names, as text; an error names the flag and the file. */
function readFlagFile(flag: string, file: string): string {
  try {
    return readFileSync(file, "utf8")
  } catch (err) {
    throw new Error(`--${flag} ${JSON.stringify(file)} could not be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err })
  }
}

const SIZE_UNITS: Readonly<Record<string, number>> = { "": 1, b: 1, kb: 1000, kib: 1024, mb: 1000 ** 2, mib: 1024 ** 2, gb: 1000 ** 3, gib: 1024 ** 3 }

/** A size flag: a whole number of 1 or more, of bytes or with a unit ("64MiB", "500kb"). Throws naming the flag. */
function sizeFlag(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  const match = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(text)
  const unit = match ? SIZE_UNITS[match[2].toLowerCase()] : undefined
  const size = match && unit !== undefined ? Number(match[1]) * unit : NaN
  if (!Number.isSafeInteger(size) || size < 1) throw new Error(`--${flag} should be a size of 1 or more: bytes, or with a unit such as "64MiB", "500KiB", "1GB", got ${JSON.stringify(text)}`)
  return size
}

/** A count flag: a whole number of 1 or more. Throws naming the flag. */
function countFlag(flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  const count = Number(text)
  if (!/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(count) || count < 1) throw new Error(`--${flag} should be a whole number of 1 or more, got ${JSON.stringify(text)}`)
  return count
}

/** --metrics (TOOLNEXUS_METRICS) and --metrics-listen (TOOLNEXUS_METRICS_LISTEN), which turns them on at its address. Throws naming the flag. */
function metricsFlags(flag: boolean | undefined, listen: string | undefined, env: NodeJS.ProcessEnv): { metrics?: true | { listen: string } } {
  if (listen !== undefined) {
    if (splitHostPort(listen) === undefined) throw new Error(`--metrics-listen should be HOST:PORT with a port 0-65535, e.g. 127.0.0.1:9464, got ${JSON.stringify(listen)}`)
    return { metrics: { listen } }
  }
  return flag || switchVariable("TOOLNEXUS_METRICS", env.TOOLNEXUS_METRICS) ? { metrics: true } : {}
}

/** An on/off environment variable: 1 or true is on; 0, false or empty is off; anything else is refused, naming it. */
function switchVariable(name: string, text: string | undefined): boolean {
  const value = text?.trim().toLowerCase() ?? ""
  if (value === "1" || value === "true") return true
  if (value === "" || value === "0" || value === "false") return false
  throw new Error(`${name} should be 1 or true to turn it on (0, false or unset for off), got ${JSON.stringify(text)}`)
}

/** --a2a-agent URL (repeated), else TOOLNEXUS_A2A_AGENTS (comma-separated): each an http(s) URL. Throws naming the flag. */
function a2aAgentUrls(flags: string[] | undefined, variable: string | undefined): string[] {
  const urls = flags ?? (variable ?? "").split(",").map((url) => url.trim()).filter((url) => url !== "")
  for (const url of urls) {
    if (!isHttpUrl(url)) throw new Error(`--a2a-agent should be an A2A agent's http(s) base URL or its card's URL, got ${JSON.stringify(withoutPassword(url))}`)
  }
  return urls
}

/** --mcp-config FILE: the `mcpServers` object of an mcp.json, checked as readMcpConfig checks it. Throws naming the flag and the file. */
function mcpConfigFile(file: string | undefined): McpServers | undefined {
  if (file === undefined) return undefined
  return mcpServersIn(readFlagFile("mcp-config", file), `--mcp-config ${JSON.stringify(file)}`)
}

/** The object without its undefined fields; undefined when none is left. */
function definedOnly<T extends Record<string, unknown>>(fields: T): Partial<T> | undefined {
  const set = Object.entries(fields).filter(([, value]) => value !== undefined)
  return set.length === 0 ? undefined : (Object.fromEntries(set) as Partial<T>)
}

/** "secret=principal,secret2=principal2" as a table; the secrets never appear in an error. */
function parseTokens(text: string): Record<string, string> {
  const tokens: Record<string, string> = {}
  text.split(",").forEach((pair, i) => {
    const at = pair.lastIndexOf("=")
    if (at <= 0 || at === pair.length - 1) throw new Error(`TOOLNEXUS_TOKENS entry ${i + 1} should be secret=principal`)
    tokens[pair.slice(0, at).trim()] = pair.slice(at + 1).trim()
  })
  return tokens
}

/** The configured model's client, or the offline echo agent. */
export function clientFor(config: Partial<CliConfig>): Client {
  if (config.model) return createClient(config.model)
  return createLocalClient(({ messages }) => `echo: ${messages.filter((m) => m.role === "user").at(-1)?.content ?? ""}`, { model: "offline-echo" })
}
