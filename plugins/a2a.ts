import rateLimit from "@fastify/rate-limit"
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify"
import fp from "fastify-plugin"
import { Authenticator, securityCardFields, type AuthSettings } from "../lib/a2a/auth.js"
import { buildAgentCard, checkCardOptions, type CardOptions } from "../lib/a2a/card.js"
import { A2AError, ErrorCode } from "../lib/a2a/errors.js"
import { TaskEvents } from "../lib/a2a/events.js"
import { JsonRpcDispatcher } from "../lib/a2a/jsonrpc.js"
import { StoreFollower } from "../lib/a2a/follower.js"
import { RecoveryService } from "../lib/a2a/recovery.js"
import { TaskRunner } from "../lib/a2a/runner.js"
import { negotiateVersion } from "../lib/a2a/wire.js"
import { errorFields } from "../lib/log.js"
import type { Client } from "../lib/client/client.js"
import { resolveStore, type StoreSelector } from "../lib/stores/resolve.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import type { Toolkit } from "../lib/tools/types.js"
import { answerHttpError, sendRefusal } from "./http-errors.js"
import { writeEvents } from "./sse.js"

export interface ToolnexusA2AOptions extends CardOptions {
  /** Runs each task: `createClient(...)`, `createLocalClient(...)` or any object with `run(prompt, opts)`. */
  client: Client
  /** The tools the client may call. */
  toolkit?: Toolkit
  /** Where Tasks live: "memory" (default), "file:<dir>", or your own TaskStore. */
  store?: StoreSelector
  /** Mounts the JSON-RPC route and the agent card under this path, e.g. "/agents/desk". */
  prefix?: string
  /** The endpoint URL the agent card advertises; derived from each request's Host when omitted. */
  url?: string
  /** Largest accepted request body in bytes (default 1 MiB); larger bodies get HTTP 413. */
  bodyLimit?: number
  /** On close, how long running tasks may go on before they are aborted and marked failed (default 10000 ms). */
  shutdownGraceMs?: number
  /**
   * Authentication: `{ tokens: { "<secret>": "<principal>" } }` (sent as `Authorization: Bearer` or
   * `x-api-key`) and/or `verify(request)` returning a principal. Each principal sees only its own
   * Tasks. Omitted: no authentication, every peer sees every Task.
   */
  auth?: AuthSettings<FastifyRequest>
  /** Tasks run at once; more wait, still `submitted` (default 32). */
  maxRunningTasks?: number
  /** Tasks that may wait for a slot; beyond it a new task is refused (default 1000). */
  maxQueuedTasks?: number
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
}

declare module "fastify" {
  interface FastifyInstance {
    /** The TaskStore the A2A routes read and write. */
    taskStore: TaskStore
  }
}

/** Content types the JSON-RPC route parses as JSON. */
const JSON_TYPES = ["application/json", "application/json-rpc", "application/a2a+json"]

/**
 * Serves a toolkit and client as an A2A agent: `POST /` for JSON-RPC and
 * `GET /.well-known/agent-card.json`, under `opts.prefix`. Decorates the
 * instance with `taskStore`. The routes live in their own encapsulated
 * context, so their error handler and parsers never touch the host's routes.
 */
/** Sets the agent up on `fastify`; `ownPrefix` mounts the routes under opts.prefix (when Fastify has not already). */
async function setUp(fastify: FastifyInstance, opts: ToolnexusA2AOptions, ownPrefix: boolean): Promise<void> {
  checkOptions(opts)
  if (fastify.hasDecorator("taskStore")) {
    throw new Error("toolnexus: this Fastify instance already has a taskStore; register toolnexusA2A once per encapsulation context")
  }
  let store: TaskStore
  try {
    store = resolveStore(opts.store)
  } catch (err) {
    const message = (err as Error).message
    if (/Unknown A2A store|names no directory/.test(message)) throw new Error(`toolnexus: opts.store is not a store selector: ${message}`)
    throw new Error(`toolnexus: opts.store could not be opened: ${message}`)
  }
  // A store the plugin built from a selector is the plugin's to close; a host's object stays the host's.
  const ownsStore = typeof opts.store !== "object"
  const auth = opts.auth && new Authenticator(opts.auth)
  const events = new TaskEvents()
  const runner = new TaskRunner({
    store,
    client: opts.client,
    toolkit: opts.toolkit,
    log: fastify.log,
    events,
    maxRunning: opts.maxRunningTasks,
    maxQueued: opts.maxQueuedTasks,
  })
  const follower = new StoreFollower({ store, runner, log: fastify.log })
  const dispatcher = new JsonRpcDispatcher({ store, runner, events, follower })
  const recovery = new RecoveryService({ store, self: runner.self, log: fastify.log, leaseTtlMs: opts.leaseTtlMs, checkIntervalMs: opts.recoveryIntervalMs })
  fastify.decorate("taskStore", store)
  fastify.addHook("onReady", async () => {
    await follower.start()
    if (opts.recoverInterrupted !== false) await recovery.start()
  })
  // preClose, so blocking requests waiting on a task end before the server waits on them;
  // then streams still following tasks of other servers are ended too.
  const closing = new AbortController()
  fastify.addHook("preClose", async () => {
    await runner.stop(opts.shutdownGraceMs ?? 10_000)
    closing.abort()
  })
  fastify.addHook("onClose", async () => {
    await recovery.stop()
    await follower.close()
    if (ownsStore) await store.close?.()
  })

  await fastify.register(
    async function a2aRoutes(routes: FastifyInstance) {
      routes.removeAllContentTypeParsers()
      routes.addContentTypeParser(JSON_TYPES, { parseAs: "string" }, routes.getDefaultJsonParser("error", "error"))
      routes.setErrorHandler(answerHttpError)
      if (opts.rateLimit) {
        await routes.register(rateLimit, {
          ...opts.rateLimit,
          errorResponseBuilder: (_request, context) => {
            const error = new A2AError(ErrorCode.InvalidRequest, `Too many requests: at most ${context.max} per ${context.after}; retry later`)
            return Object.assign(error, { statusCode: context.statusCode })
          },
        })
      }
      const principals = new WeakMap<FastifyRequest, string>()
      const authenticate = auth && (async (request: FastifyRequest, reply: FastifyReply) => {
        let principal: string | undefined
        try {
          principal = await auth.principalOf(request, request.headers)
        } catch (err) {
          request.log.error(errorFields(err), "opts.auth.verify threw")
        }
        if (principal === undefined) {
          reply.header("www-authenticate", 'Bearer realm="a2a"')
          return sendRefusal(request, reply, 401, new A2AError(ErrorCode.InvalidRequest, "Unauthorized: send Authorization: Bearer <token> or x-api-key: <key>"))
        }
        principals.set(request, principal)
      })

      routes.post("/", { bodyLimit: opts.bodyLimit ?? 1024 * 1024, ...(authenticate && { onRequest: authenticate }) }, async (request, reply) => {
        const started = performance.now()
        // Only a streaming call asks for this signal: most requests never pay for a controller and listeners.
        let streamEnd: AbortSignal | undefined
        const endSignal = () => (streamEnd ??= endedWhenGoneOrClosing(reply.raw, closing.signal))
        const outcome = await dispatcher.dispatch(request.body, {
          log: request.log,
          version: request.headers["a2a-version"],
          endSignal,
          principal: principals.get(request),
        })
        const logLine = () =>
          request.log.info(
            {
              method: outcome.method,
              taskId: outcome.taskId,
              version: outcome.version,
              outcome: outcome.errorCode ?? "ok",
              durationMs: Math.round(performance.now() - started),
              ...(outcome.stream && { stream: true }),
            },
            "a2a request",
          )
        if (outcome.stream) {
          reply.hijack()
          await writeEvents(reply, outcome.stream, endSignal())
          logLine()
          return reply
        }
        logLine()
        if (outcome.body === undefined) return reply.code(204).send()
        return reply.type("application/json; charset=utf-8").send(outcome.body)
      })

      // The card is public; its security fields take the form of the version asked for.
      routes.get("/.well-known/agent-card.json", async (request, reply) => {
        const card = buildAgentCard(opts, opts.url ?? endpointUrl(request, routes.prefix))
        reply.header("vary", "A2A-Version")
        // Only the token table is advertised: a host's own verify() may check anything.
        if (!auth?.usesTokens) return card
        let version: "0.3" | "1.0"
        try {
          version = negotiateVersion(request.headers["a2a-version"])
        } catch {
          version = "1.0"
        }
        return { ...card, ...securityCardFields(version) }
      })
    },
    { prefix: ownPrefix ? (opts.prefix ?? "") : "" },
  )
}

/** Aborts when the peer's connection closes or the server starts closing, whichever comes first. */
function endedWhenGoneOrClosing(raw: FastifyReply["raw"], closing: AbortSignal): AbortSignal {
  const ended = new AbortController()
  const end = () => ended.abort()
  if (closing.aborted) end()
  else closing.addEventListener("abort", end, { once: true })
  raw.once("close", () => {
    closing.removeEventListener("abort", end)
    end()
  })
  return ended.signal
}

function endpointUrl(request: FastifyRequest, prefix = ""): string {
  return `${request.protocol}://${request.host}${prefix.replace(/\/$/, "")}/`
}

function checkOptions(opts: ToolnexusA2AOptions): void {
  if (!opts || typeof opts.client?.run !== "function") {
    throw new TypeError("toolnexus: opts.client should be a client with run(prompt, opts), e.g. createClient({ baseUrl, style, model })")
  }
  if (opts.toolkit !== undefined && typeof opts.toolkit?.execute !== "function") {
    throw new TypeError("toolnexus: opts.toolkit should be a toolkit from createToolkit()")
  }
  if (opts.prefix !== undefined && (typeof opts.prefix !== "string" || !/^\/[^?#]*$/.test(opts.prefix))) {
    throw new TypeError(`toolnexus: opts.prefix should be a path starting with "/", e.g. "/agents/desk"`)
  }
  if (opts.bodyLimit !== undefined && !(Number.isInteger(opts.bodyLimit) && opts.bodyLimit > 0)) {
    throw new TypeError("toolnexus: opts.bodyLimit should be a positive integer number of bytes")
  }
  for (const key of ["maxRunningTasks", "maxQueuedTasks", "leaseTtlMs", "recoveryIntervalMs"] as const) {
    if (opts[key] !== undefined && !(Number.isInteger(opts[key]) && opts[key] > 0)) throw new TypeError(`toolnexus: opts.${key} should be a positive integer`)
  }
  if (opts.rateLimit !== undefined && !(Number.isInteger(opts.rateLimit?.max) && opts.rateLimit.max > 0 && opts.rateLimit.timeWindow !== undefined)) {
    throw new TypeError('toolnexus: opts.rateLimit should be { max: <requests>, timeWindow: <ms or "1 minute"> }')
  }
  if (opts.shutdownGraceMs !== undefined && !(Number.isFinite(opts.shutdownGraceMs) && opts.shutdownGraceMs >= 0)) {
    throw new TypeError("toolnexus: opts.shutdownGraceMs should be a number of milliseconds >= 0")
  }
  checkCardOptions(opts)
}

/**
 * The plugin, wrapped with fastify-plugin so `taskStore` is visible to the
 * app that registers it: `app.register(toolnexusA2A, { client, store })`.
 */
export const toolnexusA2A = fp<ToolnexusA2AOptions>((fastify, opts) => setUp(fastify, opts, true), { fastify: "5.x", name: "toolnexus" })
export default toolnexusA2A

/**
 * The same plugin without fastify-plugin: it stays in its own encapsulation
 * context, so `taskStore` is visible only inside it, and Fastify's own
 * `prefix` register option places it: `app.register(toolnexusA2APlugin, { prefix: "/agents/desk", client })`.
 */
export const toolnexusA2APlugin: FastifyPluginAsync<ToolnexusA2AOptions> = (fastify, opts) => setUp(fastify, opts, false)
