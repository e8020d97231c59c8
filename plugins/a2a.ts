import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify"
import fp from "fastify-plugin"
import { buildAgentCard, checkCardOptions, type CardOptions } from "../lib/a2a/card.js"
import { A2AError, ErrorCode } from "../lib/a2a/errors.js"
import { TaskEvents } from "../lib/a2a/events.js"
import { JsonRpcDispatcher, type JsonRpcResponse } from "../lib/a2a/jsonrpc.js"
import { TaskRunner } from "../lib/a2a/runner.js"
import type { Client } from "../lib/client.js"
import { resolveStore, type StoreSelector } from "../lib/stores/resolve.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import type { Toolkit } from "../lib/toolkit.js"

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
const plugin: FastifyPluginAsync<ToolnexusA2AOptions> = async function toolnexusA2A(fastify, opts) {
  checkOptions(opts)
  if (fastify.hasDecorator("taskStore")) {
    throw new Error("toolnexus: this Fastify instance already has a taskStore; register toolnexusA2A once per encapsulation context")
  }
  let store: TaskStore
  try {
    store = resolveStore(opts.store)
  } catch (err) {
    throw new Error(`toolnexus: opts.store should be "memory", "file:<dir>" or an object with get/save (${(err as Error).message})`)
  }
  // A store the plugin built from a selector is the plugin's to close; a host's object stays the host's.
  const ownsStore = typeof opts.store !== "object"
  const events = new TaskEvents()
  const runner = new TaskRunner({ store, client: opts.client, toolkit: opts.toolkit, log: fastify.log, events })
  const dispatcher = new JsonRpcDispatcher({ store, runner, events })
  fastify.decorate("taskStore", store)
  // preClose, so blocking requests waiting on a task end before the server waits on them.
  fastify.addHook("preClose", async () => runner.stop(opts.shutdownGraceMs ?? 10_000))
  fastify.addHook("onClose", async () => {
    if (ownsStore) await store.close?.()
  })

  await fastify.register(
    async function a2aRoutes(routes: FastifyInstance) {
      routes.removeAllContentTypeParsers()
      routes.addContentTypeParser(JSON_TYPES, { parseAs: "string" }, routes.getDefaultJsonParser("error", "error"))
      routes.setErrorHandler(answerHttpError)

      routes.post("/", { bodyLimit: opts.bodyLimit ?? 1024 * 1024 }, async (request, reply) => {
        const started = performance.now()
        const peerGone = new AbortController()
        reply.raw.once("close", () => peerGone.abort())
        const outcome = await dispatcher.dispatch(request.body, { log: request.log, version: request.headers["a2a-version"], signal: peerGone.signal })
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
          await writeEvents(reply, outcome.stream, peerGone.signal)
          logLine()
          return reply
        }
        logLine()
        if (!outcome.response) return reply.code(204).send()
        return reply.type("application/json").send(outcome.response)
      })

      routes.get("/.well-known/agent-card.json", async (request) => {
        return buildAgentCard(opts, opts.url ?? endpointUrl(request, opts.prefix))
      })
    },
    { prefix: opts.prefix ?? "" },
  )
}

/**
 * Writes each response as a server-sent event, waiting for the socket to
 * drain when the peer reads slowly, and ends the response when the stream
 * ends or the peer goes away.
 */
async function writeEvents(reply: FastifyReply, stream: AsyncIterable<JsonRpcResponse>, peerGone: AbortSignal): Promise<void> {
  const raw = reply.raw
  raw.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" })
  try {
    for await (const message of stream) {
      if (peerGone.aborted) break
      if (!raw.write(`data: ${JSON.stringify(message)}\n\n`)) await drained(raw, peerGone)
    }
  } catch (err) {
    reply.log.error({ err }, "a2a stream failed")
  } finally {
    if (!raw.writableEnded) raw.end()
  }
}

function drained(raw: FastifyReply["raw"], peerGone: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      raw.off("drain", done)
      peerGone.removeEventListener("abort", done)
      resolve()
    }
    raw.once("drain", done)
    peerGone.addEventListener("abort", done, { once: true })
  })
}

/** HTTP-level failures as JSON-RPC error bodies: bad JSON is a -32700 with HTTP 200; size and type get their 4xx. */
function answerHttpError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const send = (status: number, error: A2AError) => {
    const body: JsonRpcResponse = { jsonrpc: "2.0", id: null, error: error.toJSON() }
    request.log.info({ outcome: error.code, status }, "a2a request refused")
    return reply.code(status).type("application/json").send(body)
  }
  switch (err.code) {
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return send(200, new A2AError(ErrorCode.ParseError, "Parse error: the request body is empty; send a JSON-RPC request object"))
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return send(200, new A2AError(ErrorCode.ParseError, "Parse error: the request body is not valid JSON (or holds a __proto__ or constructor key)"))
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return send(413, new A2AError(ErrorCode.InvalidRequest, `Request body too large: the limit is ${request.routeOptions.bodyLimit} bytes`))
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return send(415, new A2AError(ErrorCode.InvalidRequest, `Unsupported content type ${JSON.stringify(request.headers["content-type"] ?? "")}: send application/json`))
  }
  const status = err.statusCode ?? 500
  if (status >= 400 && status < 500) return send(status, new A2AError(ErrorCode.InvalidRequest, `Invalid request: ${err.message}`))
  request.log.error({ err }, "a2a route failed")
  return send(200, new A2AError(ErrorCode.InternalError, "Internal error: the server could not complete the request; its log has the details"))
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
  if (opts.shutdownGraceMs !== undefined && !(Number.isFinite(opts.shutdownGraceMs) && opts.shutdownGraceMs >= 0)) {
    throw new TypeError("toolnexus: opts.shutdownGraceMs should be a number of milliseconds >= 0")
  }
  checkCardOptions(opts)
}

/**
 * The plugin, wrapped with fastify-plugin so `taskStore` is visible to the
 * app that registers it: `app.register(toolnexusA2A, { client, store })`.
 */
export const toolnexusA2A = fp(plugin, { fastify: "5.x", name: "toolnexus" })
export default toolnexusA2A
