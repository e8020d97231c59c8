import type { FastifyContextConfig, FastifyInstance, FastifyPluginAsync, FastifyRequest } from "fastify"
import fp from "fastify-plugin"
import { publicAgentCard, type CardFeatures } from "../lib/a2a/card.js"
import { CardSigner } from "../lib/a2a/card-signing.js"
import { bodyTooDeep } from "../lib/a2a/depth.js"
import { ExtendedCards } from "../lib/a2a/extended-card.js"
import type { ExtendedCardOf } from "../lib/a2a/operations.js"
import { withKey } from "../lib/signing-key.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import { createAuthentication } from "./authenticate.js"
import { DEAD_LETTERS_PATH, deadLettersHandler } from "./dead-letters-route.js"
import { agentCardHandler, CARD_PATH, endpointUrl } from "./card-route.js"
import { decorateGrpc } from "./grpc.js"
import { answerHttpError, type A2ARouteConfig } from "./http-errors.js"
import { JSON_TYPES, jsonRpcHandler } from "./jsonrpc-route.js"
import { inspectorRoutes, readInspectorFiles } from "./inspector-route.js"
import { JWKS_PATH, jwksHandler } from "./jwks-route.js"
import { healthRoutes, trackReadiness } from "./health-routes.js"
import { createAgent } from "./lifecycle.js"
import { decorateMetrics, METRICS_PATH, metricsHandler } from "./metrics-route.js"
import { checkOptions, DEFAULT_BODY_LIMIT, DEFAULT_STREAM_HEARTBEAT_MS, FASTIFY_PLUGIN_TIMEOUT_MS, type ToolnexusA2AOptions } from "./options.js"
import { registerRateLimit } from "./rate-limit.js"
import { restRoutes } from "./rest-routes.js"

export type { ToolnexusGrpc } from "./grpc.js"
export type { ToolnexusMetrics } from "./metrics-route.js"
export type { ToolnexusA2AOptions } from "./options.js"

declare module "fastify" {
  interface FastifyInstance {
    /** The TaskStore the A2A routes read and write. */
    taskStore: TaskStore
  }
}

/**
 * Serves a toolkit and client as an A2A agent: `POST /` for JSON-RPC, the
 * HTTP+JSON routes (plugins/rest-routes.ts) and
 * `GET /.well-known/agent-card.json`, under `opts.prefix` when `ownPrefix`
 * (Fastify's own prefix option places the unwrapped plugin). Decorates the
 * instance with `taskStore`, and with `toolnexusGrpc`, which serves the same
 * agent over gRPC on an address of its own. The routes live in their own encapsulated
 * context, so their error handler and parsers never touch the host's routes.
 */
async function setUp(fastify: FastifyInstance, opts: ToolnexusA2AOptions, ownPrefix: boolean): Promise<void> {
  checkOptions(opts)
  if (fastify.hasDecorator("taskStore")) {
    throw new Error("toolnexus: this Fastify instance already has a taskStore; register toolnexusA2A once per encapsulation context")
  }
  // Authentication settings are checked before the store is opened, so a refused registration leaves nothing open.
  const auth = opts.auth && createAuthentication(opts.auth)
  const cardSigner = opts.cardSigning && (await CardSigner.create(opts.cardSigning))
  const inspectorFiles = opts.inspector ? readInspectorFiles() : undefined
  const prefix = ownPrefix ? (opts.prefix ?? "") : ""
  // What the card declares, known once the agent is built; read at request time, so gRPC's addresses are those bound by then.
  let features: CardFeatures = {}
  const extendedCards = opts.extendedCard && new ExtendedCards({ extendedCard: opts.extendedCard, signer: cardSigner })
  const extendedCard: ExtendedCardOf | undefined =
    extendedCards &&
    ((principal, version, url) => extendedCards.cardFor(principal, publicAgentCard(opts, url ?? opts.url ?? ownUrl(fastify, prefix), features, version)))
  const agent = await createAgent(opts, fastify.log, fastify.initialConfig.pluginTimeout ?? FASTIFY_PLUGIN_TIMEOUT_MS, extendedCard)

  fastify.decorate("taskStore", agent.store)
  fastify.addHook("onReady", agent.onReady)
  fastify.addHook("preClose", agent.preClose)
  fastify.addHook("onClose", agent.onClose)
  decorateGrpc(fastify, opts, agent)
  trackReadiness(fastify, agent.readiness)
  const metricsListen = typeof opts.metrics === "object" ? opts.metrics.listen : undefined
  if (agent.metrics) decorateMetrics(fastify, agent.metrics, metricsListen)
  features = {
    usesTokens: auth?.usesTokens ?? false,
    pushNotifications: agent.push !== undefined,
    extendedAgentCard: extendedCards !== undefined,
    grpc: fastify.toolnexusGrpc.addresses,
  }

  // Beside the A2A routes, not among them: no authentication, rate limit or A2A error bodies.
  if (opts.health !== false) await fastify.register(healthRoutes, { prefix, readiness: agent.readiness, health: opts.health ?? {} })
  await fastify.register(
    async function a2aRoutes(routes: FastifyInstance) {
      routes.removeAllContentTypeParsers()
      const parseJson = routes.getDefaultJsonParser("error", "error")
      routes.addContentTypeParser(JSON_TYPES, { parseAs: "string" }, (request, body, done) => {
        // Excess depth is refused by one cheap pass before JSON.parse builds a deep value it would throw away.
        const text = typeof body === "string" ? body : body.toString()
        const tooDeep = bodyTooDeep(text)
        if (tooDeep) return done(tooDeep, undefined)
        void parseJson(request, text, done) // Fastify's own parser is synchronous; its typing allows a promise
      })
      routes.setErrorHandler(answerHttpError)
      const cardUrl = (request: FastifyRequest) => opts.url ?? endpointUrl(request, routes.prefix)
      if (opts.rateLimit) await registerRateLimit(routes, opts.rateLimit)

      const jsonRpcConfig: FastifyContextConfig & A2ARouteConfig = { a2aRefusals: { operations: agent.operations, binding: "jsonrpc" } }
      routes.post(
        "/",
        {
          bodyLimit: opts.bodyLimit ?? DEFAULT_BODY_LIMIT,
          config: jsonRpcConfig,
          ...(auth && { onRequest: auth.onRequest }),
        },
        jsonRpcHandler({
          dispatcher: agent.dispatcher,
          closing: agent.closing,
          principalOf: auth?.principalOf,
          heartbeatMs: opts.streamHeartbeatMs ?? DEFAULT_STREAM_HEARTBEAT_MS,
          cardUrl,
        }),
      )
      await routes.register(restRoutes, {
        operations: agent.operations,
        closing: agent.closing,
        auth,
        bodyLimit: opts.bodyLimit ?? DEFAULT_BODY_LIMIT,
        heartbeatMs: opts.streamHeartbeatMs ?? DEFAULT_STREAM_HEARTBEAT_MS,
        cardUrl,
      })
      if (agent.metrics && metricsListen === undefined) routes.get(METRICS_PATH, { ...(auth && { onRequest: auth.onRequest }) }, metricsHandler(agent.metrics))
      const jwks = withKey(agent.jwks, cardSigner?.publicJwk)
      if (jwks) routes.get(JWKS_PATH, jwksHandler(jwks))
      if (agent.push) {
        routes.get(
          DEAD_LETTERS_PATH,
          { ...(auth && { onRequest: auth.onRequest }) },
          deadLettersHandler({ push: agent.push.store, principalOf: auth?.principalOf, unownedTasksBelongTo: opts.auth?.unownedTasksBelongTo }),
        )
      }
      if (inspectorFiles) await routes.register(inspectorRoutes, { files: inspectorFiles })
      routes.get(CARD_PATH, agentCardHandler({ card: opts, url: opts.url, prefix: routes.prefix, features, signer: cardSigner }))
    },
    { prefix },
  )
}

/**
 * The server's own endpoint URL, for a card asked for where no request URL
 * says it (a gRPC peer's extended card) and `opts.url` is not set: where
 * the app listens, under the routes' prefix; an app not listening (only
 * injected into) has none, and says localhost.
 */
function ownUrl(fastify: FastifyInstance, prefix: string): string {
  let origin = "http://localhost"
  try {
    origin = fastify.listeningOrigin
  } catch {
    // Not listening: no address to name.
  }
  return `${origin}${prefix.replace(/\/$/, "")}/`
}

/**
 * The plugin, wrapped with fastify-plugin so `taskStore` is visible to the
 * app that registers it: `app.register(toolnexusA2A, { client, store })`.
 */
export const toolnexusA2A = fp<ToolnexusA2AOptions>((fastify, opts) => setUp(fastify, opts, true), { fastify: "5.x", name: "toolnexus" })

/**
 * The same plugin without fastify-plugin: it stays in its own encapsulation
 * context, so `taskStore` is visible only inside it, and Fastify's own
 * `prefix` register option places it: `app.register(toolnexusA2APlugin, { prefix: "/agents/desk", client })`.
 */
export const toolnexusA2APlugin: FastifyPluginAsync<ToolnexusA2AOptions> = (fastify, opts) => setUp(fastify, opts, false)
