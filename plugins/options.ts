import type { FastifyRequest } from "fastify"
import type { AuthSettings } from "../lib/a2a/auth.js"
import { checkCardOptions, type CardOptions } from "../lib/a2a/card.js"
import { readCardSigningOptions, type CardSigningOptions } from "../lib/a2a/card-signing.js"
import type { ExtendedCardSource } from "../lib/a2a/extended-card.js"
import { ABORT_WAIT_MS } from "../lib/a2a/runner.js"
import { MAX_TIMER_MS } from "../lib/duration.js"
import type { Client } from "../lib/client/client.js"
import type { AgentFunction } from "../lib/a2a/agent.js"
import { errorFields, type Logger } from "../lib/log.js"
import { checkPushOptions, type PushOptions } from "../lib/push/options.js"
import type { StoreErrorHandler } from "../lib/stores/background-errors.js"
import { retentionTtlMs, type RetentionOptions } from "../lib/stores/retention.js"
import { resolveStore, type StoreSelector } from "../lib/stores/resolve.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import type { Toolkit } from "../lib/tools/types.js"
import { isPlainHttpUrl } from "../lib/url-credentials.js"
import { splitHostPort } from "../lib/host-port.js"
import { checkHealthOptions, type HealthOptions } from "./health-routes.js"

export interface ToolnexusA2AOptions extends CardOptions {
  /**
   * Your own agent, `async (ctx) => outcome`: it answers each Task through its context (docs/guides/own-agent.md).
   * Give it or `client`, not both.
   */
  agent?: AgentFunction
  /**
   * Runs each task in the built-in tool-calling loop: `createClient(...)`, `createLocalClient(...)` or any
   * object with `run(prompt, opts)`. Give it or `agent`, not both.
   */
  client?: Client
  /** The tools the client may call (with `client` only). */
  toolkit?: Toolkit
  /** Where Tasks live: "memory" (default), "file:<dir>", or your own TaskStore. */
  store?: StoreSelector
  /**
   * Deletes finished Tasks whose status is older than `terminalTtl` ("30d", "12h" or ms) in the background,
   * for a store built from a selector. Omitted: finished Tasks are kept. A store object of your own is
   * given its retention when you build it; setting both is refused.
   */
  retention?: RetentionOptions
  /** Mounts the JSON-RPC route and the agent card under this path, e.g. "/agents/desk". */
  prefix?: string
  /**
   * The endpoint URL the agent card advertises. Omitted, it is taken from each request's Host (and from
   * X-Forwarded-Host/-Proto only when the Fastify app's trustProxy trusts the sender): set it on a public server.
   */
  url?: string
  /** Largest accepted request body in bytes (default 1 MiB); larger bodies get HTTP 413. */
  bodyLimit?: number
  /** On close, how long running tasks may go on before they are aborted and marked failed (default 10000 ms). */
  shutdownGraceMs?: number
  /**
   * Authentication: `{ tokens: { "<secret>": "<principal>" } }` (sent as `Authorization: Bearer` or
   * `x-api-key`) and/or `verify(request)` returning a principal. Each principal sees only its own
   * Tasks; those saved before authentication was on belong to nobody, or to `unownedTasksBelongTo`
   * alone. Omitted: no authentication, every peer sees every Task.
   */
  auth?: AuthSettings<FastifyRequest>
  /** Tasks run at once; more wait, still `submitted` (default 32). */
  maxRunningTasks?: number
  /** Tasks that may wait for a slot; beyond it a new task is refused (default 1000). */
  maxQueuedTasks?: number
  /**
   * Largest Task, in UTF-8 bytes of its JSON, for every store (default 4 MiB): a message that would make a Task
   * larger gets -32602; an answer that would is not kept, and the Task ends failed saying why.
   */
  maxTaskBytes?: number
  /** Requests per client address per time window on the JSON-RPC route, through @fastify/rate-limit; off when omitted. */
  rateLimit?: { max: number; timeWindow: number | string }
  /**
   * Fail the Tasks left submitted or working by a server that died (default true; needs a store with list):
   * at start, then while running: by pid on this host every recoveryIntervalMs; on a store with leases, by lease every leaseTtlMs.
   */
  recoverInterrupted?: boolean
  /** Without leases: how often a running server looks again, by pid, for Tasks of servers that died (default 5000 ms). */
  recoveryIntervalMs?: number
  /** On a store with leases: how long a server counts as alive after its last renewal (default 15000 ms). */
  leaseTtlMs?: number
  /** How often an open SSE stream gets a `: keep-alive` comment, so proxies keep it and a dead peer is found (default 15000 ms). */
  streamHeartbeatMs?: number
  /**
   * While the model streams its answer, the text so far is saved at most this often, so GetTask
   * mid-run shows it (default 250 ms; 0 saves after every chunk). Streams get every chunk at once either way.
   */
  progressSaveMs?: number
  /** Streams (SendStreamingMessage, SubscribeToTask) open at once; past it a new one is refused with -32603 (default 1000, about 20 MB). */
  maxStreams?: number
  /**
   * Streams open at once per principal, or per client address without `auth` (`request.ip`: behind a proxy,
   * set trustProxy or every peer shares the proxy's count); past it a new one is refused with -32603 (default 100).
   */
  maxStreamsPerPrincipal?: number
  /**
   * Push notifications (on when the store has the capability, as the four shipped stores do):
   * `{ allow: ["HOST", "HOST:PORT"] }` lets webhooks reach those hosts though they resolve to
   * private or loopback addresses; `false` turns push off (the push methods answer -32003).
   */
  push?: PushOptions | false
  /**
   * Prometheus metrics (docs/guides/observability.md lists them): `true` serves them at `<prefix>/metrics`,
   * behind `auth` when it is on; `{ listen: "HOST:PORT" }` serves them on an address of their own instead,
   * without authentication (bind it where only your scraper reaches). Off by default: prom-client is not loaded.
   */
  metrics?: boolean | MetricsOptions
  /**
   * Signs the agent card (and the extended card): `{ privateKey, kid?, alg? }`, the key as PEM text, JWK
   * text or a JWK object (Ed25519, P-256 or RSA). The card then carries `signatures`, a JWS over its
   * RFC 8785 canonical form as the official SDKs verify it; the public key is served in the JWKS at
   * `<prefix>/.well-known/jwks.json` under its `kid` (default: the key's RFC 7638 thumbprint).
   */
  cardSigning?: CardSigningOptions
  /**
   * The extended agent card GetExtendedAgentCard answers an authenticated peer with: `(principal) =>` the
   * fields (name, description, version, provider, skills) that replace the public card's, or undefined for
   * the public card; may be async. Needs `auth`. Set, the card says `capabilities.extendedAgentCard: true`.
   */
  extendedCard?: ExtendedCardSource
  /**
   * Serves the task inspector, a page for people, at `<prefix>/inspector/`: the Tasks, one Task's conversation,
   * artifacts and status as it runs, and a box to send a message. The page itself is public (it holds no data);
   * it calls the REST routes with the token its user types, so it shows what that principal may see. Default false.
   */
  inspector?: boolean
  /**
   * Liveness and readiness for load balancers and orchestrators: `GET <prefix>/healthz` and `GET <prefix>/readyz`,
   * unauthenticated (docs/guides/deployment.md). On by default; `{ livenessPath, readinessPath }` moves them
   * (`false` for either turns it off), `false` turns both off.
   */
  health?: HealthOptions | false
}

/** Metrics on an address of their own. */
export interface MetricsOptions {
  /** "host:port" ("[::1]:9464", ":9464"; port 0 picks one): `app.toolnexusMetrics.address` says which once ready. */
  listen: string
}

/** The defaults the plugin itself applies; the runner and recovery apply their own to the options they take. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000
export const DEFAULT_STREAM_HEARTBEAT_MS = 15_000

/** What the close needs beyond the grace: the runner's wait for aborted work, then a second to save what it fails. */
export const CLOSE_MARGIN_MS = ABORT_WAIT_MS + 1000
/** Fastify's own pluginTimeout default; serve() never sets less. */
export const FASTIFY_PLUGIN_TIMEOUT_MS = 10_000

/**
 * The grace the plugin's preClose hook can take: Fastify ends each preClose
 * hook after `pluginTimeout` ms (avvio's timeout; 0 for none) and close()
 * then rejects with the Task left working, so the grace asked for is cut
 * to leave CLOSE_MARGIN_MS inside that limit.
 */
export function graceWithin(pluginTimeout: number, askedMs: number): number {
  if (!(pluginTimeout > 0)) return askedMs
  return Math.max(0, Math.min(askedMs, pluginTimeout - CLOSE_MARGIN_MS))
}

/**
 * The pluginTimeout serve() gives the Fastify it owns, so the whole grace
 * fits the close: Fastify's default, or grace + margin when that is longer
 * (0, no limit, past Node's longest timer). Undefined for a grace the plugin
 * will refuse anyway, so its own error is the one reported.
 */
export function pluginTimeoutFor(graceMs: number | undefined): number | undefined {
  const grace = graceMs ?? DEFAULT_SHUTDOWN_GRACE_MS
  if (!(Number.isFinite(grace) && grace >= 0)) return undefined
  const needed = Math.ceil(grace + CLOSE_MARGIN_MS)
  if (needed > MAX_TIMER_MS) return 0
  return Math.max(FASTIFY_PLUGIN_TIMEOUT_MS, needed)
}

/** Throws at registration, naming the option and what it wanted, before anything is opened. */
export function checkOptions(opts: ToolnexusA2AOptions): void {
  checkAgentOption(opts)
  if (opts.toolkit !== undefined && typeof opts.toolkit?.execute !== "function") {
    throw new TypeError("toolnexus: opts.toolkit should be a toolkit from createToolkit()")
  }
  if (opts.prefix !== undefined && (typeof opts.prefix !== "string" || !/^\/[^?#]*$/.test(opts.prefix))) {
    throw new TypeError(`toolnexus: opts.prefix should be a path starting with "/", e.g. "/agents/desk"`)
  }
  if (opts.url !== undefined && !isPlainHttpUrl(opts.url)) {
    throw new TypeError(`toolnexus: opts.url should be the http(s) URL peers reach the agent at, without a user or password, e.g. "https://agents.example.com/desk/"`)
  }
  if (opts.bodyLimit !== undefined && !(Number.isInteger(opts.bodyLimit) && opts.bodyLimit > 0)) {
    throw new TypeError("toolnexus: opts.bodyLimit should be a positive integer number of bytes")
  }
  for (const key of ["maxRunningTasks", "maxQueuedTasks", "maxTaskBytes", "maxStreams", "maxStreamsPerPrincipal"] as const) {
    if (opts[key] !== undefined && !(Number.isInteger(opts[key]) && opts[key] > 0)) throw new TypeError(`toolnexus: opts.${key} should be a positive integer`)
  }
  // Timer periods: past Node's longest timer, an interval would fire every millisecond.
  for (const key of ["leaseTtlMs", "recoveryIntervalMs", "streamHeartbeatMs"] as const) {
    if (opts[key] !== undefined && !(Number.isInteger(opts[key]) && opts[key] > 0 && opts[key] <= MAX_TIMER_MS)) {
      throw new TypeError(`toolnexus: opts.${key} should be a positive integer number of milliseconds, at most ${MAX_TIMER_MS} (about 24.8 days)`)
    }
  }
  if (opts.progressSaveMs !== undefined && !(Number.isInteger(opts.progressSaveMs) && opts.progressSaveMs >= 0 && opts.progressSaveMs <= MAX_TIMER_MS)) {
    throw new TypeError(`toolnexus: opts.progressSaveMs should be a whole number of milliseconds from 0 to ${MAX_TIMER_MS} (how often the answer so far is saved while the model streams)`)
  }
  if (opts.rateLimit !== undefined && !(Number.isInteger(opts.rateLimit?.max) && opts.rateLimit.max > 0 && opts.rateLimit.timeWindow !== undefined)) {
    throw new TypeError('toolnexus: opts.rateLimit should be { max: <requests>, timeWindow: <ms or "1 minute"> }')
  }
  if (opts.retention !== undefined) {
    retentionTtlMs("toolnexus", opts.retention)
    if (typeof opts.store === "object" && opts.store !== null) {
      throw new TypeError("toolnexus: opts.retention applies to a store built from a selector (\"file:<dir>\", \"postgres://…\", …); give your own store object its retention when you build it, e.g. new FileTaskStore(dir, { retention })")
    }
  }
  if (opts.shutdownGraceMs !== undefined && !(Number.isFinite(opts.shutdownGraceMs) && opts.shutdownGraceMs >= 0)) {
    throw new TypeError("toolnexus: opts.shutdownGraceMs should be a number of milliseconds >= 0")
  }
  if (opts.inspector !== undefined && typeof opts.inspector !== "boolean") {
    throw new TypeError("toolnexus: opts.inspector should be true (serve the task inspector page at <prefix>/inspector/) or false")
  }
  checkPushOptions(opts.push)
  checkCardOptions(opts)
  if (opts.cardSigning !== undefined) readCardSigningOptions(opts.cardSigning)
  if (opts.extendedCard !== undefined) {
    if (typeof opts.extendedCard !== "function") throw new TypeError("toolnexus: opts.extendedCard should be a function (principal) => card fields ({ name, description, version, provider, skills }), or a promise of them")
    if (opts.auth === undefined) throw new TypeError("toolnexus: opts.extendedCard needs opts.auth: the extended card answers authenticated peers only, and without auth no peer is")
  }
  // The card's capabilities are derived; a card declaring an extended card the server cannot give (-32007) is refused here instead.
  for (const key of ["capabilities", "supportsAuthenticatedExtendedCard"]) {
    if (key in opts) throw new TypeError(`toolnexus: opts.${key} is not an option: the card's capabilities follow from the options (opts.extendedCard for the extended card, opts.push for push)`)
  }
  checkMetricsOption(opts.metrics)
  checkHealthOptions(opts.health)
}

/** Exactly one of opts.agent (your own) and opts.client (the built-in loop); a toolkit only with the client. */
function checkAgentOption(opts: ToolnexusA2AOptions): void {
  const hasAgent = opts?.agent !== undefined
  const hasClient = opts?.client !== undefined
  if (hasAgent && hasClient) {
    throw new TypeError("toolnexus: give opts.agent or opts.client, not both: opts.agent is your own agent function, opts.client runs the built-in tool-calling loop")
  }
  if (!hasAgent && !hasClient) {
    throw new TypeError("toolnexus: opts.agent or opts.client is required: your own agent, async (ctx) => answer, or a client for the built-in tool-calling loop, e.g. createClient({ baseUrl, style, model })")
  }
  if (hasAgent && typeof opts.agent !== "function") throw new TypeError("toolnexus: opts.agent should be a function, async (ctx) => answer (docs/guides/own-agent.md)")
  if (hasClient && typeof opts.client?.run !== "function") {
    throw new TypeError("toolnexus: opts.client should be a client with run(prompt, opts), e.g. createClient({ baseUrl, style, model })")
  }
  if (hasAgent && opts.toolkit !== undefined) {
    throw new TypeError("toolnexus: opts.toolkit goes with opts.client (the built-in loop calls its tools); with opts.agent, your agent calls the tools it needs itself")
  }
}

function checkMetricsOption(metrics: unknown): void {
  if (metrics === undefined || typeof metrics === "boolean") return
  const listen = typeof metrics === "object" && metrics !== null ? (metrics as { listen?: unknown }).listen : undefined
  if (splitHostPort(listen) === undefined) {
    throw new TypeError('toolnexus: opts.metrics should be true (GET <prefix>/metrics), false, or { listen: "HOST:PORT" } to serve them on an address of their own, e.g. { listen: "127.0.0.1:9464" }')
  }
}

/**
 * The store opts.store selects, and whether the plugin owns it: one it built from a selector is its to
 * close (and is opened here, so a directory or database that cannot be used stops the registration),
 * a host's object stays the host's. The store's background failures go to `log`; `retention` is the
 * plugin's option, for the store built here.
 */
export async function openStore(selector: StoreSelector | undefined, log: Logger, retention?: RetentionOptions): Promise<{ store: TaskStore; ownsStore: boolean }> {
  const onError: StoreErrorHandler = (err, context) => log.warn({ ...context, ...errorFields(err) }, "task store background failure")
  let store: TaskStore
  try {
    store = resolveStore(selector, retention === undefined ? { onError } : { onError, retention })
  } catch (err) {
    throw new Error(`toolnexus: opts.store is not a store selector: ${(err as Error).message}`, { cause: err })
  }
  const ownsStore = typeof selector !== "object"
  if (ownsStore) {
    try {
      await store.open?.()
    } catch (err) {
      await store.close?.().catch(() => {})
      throw new Error(`toolnexus: opts.store could not be opened: ${(err as Error).message}`, { cause: err })
    }
  }
  return { store, ownsStore }
}
