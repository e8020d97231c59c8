import { parseArgs } from "node:util"
import { createClient, createLocalClient, type Client, type ClientOptions } from "./client/client.js"
import { parseDuration, type RetentionOptions } from "./stores/retention.js"
import { isPlainHttpUrl, withoutPassword } from "./url-credentials.js"

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
  /** The model to call; absent means the offline echo agent. */
  model?: Pick<ClientOptions, "baseUrl" | "style" | "model" | "apiKey">
  /** secret → principal, from TOOLNEXUS_TOKENS; absent means no authentication. */
  tokens?: Record<string, string>
  logFormat: LogFormat
}

export const USAGE = `Usage: toolnexus [options]

Serves an A2A agent over JSON-RPC. Flags win over environment variables.

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
  --base-url URL       model endpoint, e.g. https://api.openai.com/v1 (TOOLNEXUS_BASE_URL)
  --style STYLE        "openai" or "anthropic" (TOOLNEXUS_STYLE, default openai)
  --model MODEL        model name (TOOLNEXUS_MODEL)
  --log-format FORMAT  "pretty" or "json" (TOOLNEXUS_LOG_FORMAT; default pretty on a terminal,
                       JSON lines otherwise)
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
      "base-url": { type: "string" },
      style: { type: "string" },
      model: { type: "string" },
      "log-format": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  })
  if (values.help) return "help"
  const portText = values.port ?? env.TOOLNEXUS_PORT ?? "4000"
  const port = Number(portText)
  if (!/^\d{1,5}$/.test(portText) || port > 65535) throw new Error(`--port should be a number 0-65535, got ${JSON.stringify(portText)}`)
  const baseUrl = values["base-url"] ?? env.TOOLNEXUS_BASE_URL
  const style = values.style ?? env.TOOLNEXUS_STYLE ?? "openai"
  if (style !== "openai" && style !== "anthropic") throw new Error(`--style should be "openai" or "anthropic", got ${JSON.stringify(style)}`)
  const model = values.model ?? env.TOOLNEXUS_MODEL
  if (baseUrl && !model) throw new Error("--base-url is set but no --model: name the model to call (or TOOLNEXUS_MODEL)")
  if (model && !baseUrl) throw new Error("--model is set but no --base-url: say where the model is served (or TOOLNEXUS_BASE_URL)")
  const publicUrl = values["public-url"] ?? env.TOOLNEXUS_PUBLIC_URL
  if (publicUrl !== undefined && publicUrl !== "" && !isPlainHttpUrl(publicUrl)) {
    throw new Error(`--public-url should be the http(s) URL peers reach the agent at, without a user or password, got ${JSON.stringify(withoutPassword(publicUrl))}`)
  }
  const retentionText = values.retention ?? env.TOOLNEXUS_RETENTION ?? DEFAULT_RETENTION
  if (retentionText !== "off" && parseDuration(retentionText) === undefined) {
    throw new Error(`--retention should be a duration such as 30d, 12h or 90m, or "off" to keep finished Tasks, got ${JSON.stringify(retentionText)}`)
  }
  const logFormat = values["log-format"] ?? env.TOOLNEXUS_LOG_FORMAT ?? (stdoutIsTTY ? "pretty" : "json")
  if (logFormat !== "pretty" && logFormat !== "json") throw new Error(`--log-format should be "pretty" or "json", got ${JSON.stringify(logFormat)}`)
  return {
    host: values.host ?? env.TOOLNEXUS_HOST ?? "127.0.0.1",
    port,
    store: values.store ?? env.TOOLNEXUS_STORE ?? "file:./.toolnexus/tasks",
    ...(retentionText !== "off" ? { retention: { terminalTtl: retentionText } } : {}),
    name: values.name ?? env.TOOLNEXUS_NAME ?? "toolnexus agent",
    ...(publicUrl ? { publicUrl } : {}),
    ...(baseUrl && model ? { model: { baseUrl, style, model, apiKey: env.TOOLNEXUS_API_KEY } } : {}),
    ...(env.TOOLNEXUS_TOKENS ? { tokens: parseTokens(env.TOOLNEXUS_TOKENS) } : {}),
    logFormat,
  }
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
export function clientFor(config: CliConfig): Client {
  if (config.model) return createClient(config.model)
  return createLocalClient(({ messages }) => `echo: ${messages.filter((m) => m.role === "user").at(-1)?.content ?? ""}`, { model: "offline-echo" })
}
