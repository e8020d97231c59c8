import type { FastifyInstance } from "fastify"
import { MAX_TIMER_MS } from "../lib/duration.js"
import type { Readiness, ServerPhase } from "../lib/readiness.js"

/** The liveness and readiness routes: where they are, or `false` for none. */
export interface HealthOptions {
  /** Liveness, under the plugin's prefix: 200 while the process serves (default "/healthz"); `false` for no route. */
  livenessPath?: string | false
  /**
   * Readiness, under the plugin's prefix: 200 while the server should get traffic (listening, not draining,
   * its store answering), else 503 with the reason (default "/readyz"); `false` for no route.
   */
  readinessPath?: string | false
  /** How long the store may take to answer readiness's probe before the server counts as not ready (default 2000 ms). */
  storeTimeoutMs?: number
}

/** The default paths, under the plugin's prefix. */
export const LIVENESS_PATH = "/healthz"
export const READINESS_PATH = "/readyz"

/** What the plugin decorates the app with: where the server is in its life, and how to start draining it. */
export interface ToolnexusReadiness {
  /** "starting", "ready", "draining" or "stopping". */
  readonly phase: ServerPhase
  /**
   * Starts draining: readiness answers 503 "draining" at once, so load balancers send new traffic
   * elsewhere, while every other route keeps serving; HTTP/1 answers say `connection: close`, so
   * clients and balancers open their next connection to another server. serve()'s `stop({ drainMs })`
   * calls it, waits, then closes.
   */
  drain(): void
}

declare module "fastify" {
  interface FastifyInstance {
    /** The server's phase and its drain, for a host that closes the app itself. */
    toolnexusReadiness: ToolnexusReadiness
  }
}

/** Throws at registration, naming the option and what it wanted. */
export function checkHealthOptions(health: unknown): void {
  if (health === undefined || health === false) return
  if (typeof health !== "object" || health === null || Array.isArray(health)) {
    throw new TypeError('toolnexus: opts.health should be false (no health routes) or { livenessPath?, readinessPath?, storeTimeoutMs? }, e.g. { readinessPath: "/ready" }')
  }
  const { livenessPath, readinessPath, storeTimeoutMs } = health as Record<string, unknown>
  for (const [key, value] of [["livenessPath", livenessPath], ["readinessPath", readinessPath]] as const) {
    if (value !== undefined && value !== false && !(typeof value === "string" && /^\/[^?#]*$/.test(value))) {
      throw new TypeError(`toolnexus: opts.health.${key} should be a path starting with "/" (under the plugin's prefix), or false for no route`)
    }
  }
  if (typeof livenessPath === "string" && livenessPath === (readinessPath ?? READINESS_PATH)) {
    throw new TypeError("toolnexus: opts.health.livenessPath and readinessPath should differ: one route cannot answer both questions")
  }
  if (storeTimeoutMs !== undefined && !(Number.isInteger(storeTimeoutMs) && (storeTimeoutMs as number) > 0 && (storeTimeoutMs as number) <= MAX_TIMER_MS)) {
    throw new TypeError(`toolnexus: opts.health.storeTimeoutMs should be a positive whole number of milliseconds, at most ${MAX_TIMER_MS}`)
  }
}

/**
 * Decorates the app with `toolnexusReadiness`, moves the phase on as the app listens (the agent's preClose
 * moves it to "stopping"), and, while draining or
 * stopping, answers HTTP/1 requests with `connection: close` (on every route of the app the plugin is registered on).
 */
export function trackReadiness(fastify: FastifyInstance, readiness: Readiness): void {
  fastify.decorate("toolnexusReadiness", {
    get phase() {
      return readiness.phase
    },
    drain: () => readiness.drain(),
  } satisfies ToolnexusReadiness)
  fastify.addHook("onListen", async () => readiness.listening())
  // On every request: a callback hook, so the common case (ready) costs no promise.
  fastify.addHook("onRequest", (request, reply, done) => {
    // HTTP/2 has no connection header (its GOAWAY, sent on close, does this job).
    if (readiness.phase !== "ready" && readiness.phase !== "starting" && request.raw.httpVersionMajor === 1) reply.header("connection", "close")
    done()
  })
}

/**
 * `GET <prefix>/healthz` and `GET <prefix>/readyz` (or the paths `health` names), in a context of their own:
 * no authentication, no rate limit, no Task data, a few bytes each. Readiness's 503 says why in `reason`.
 */
export async function healthRoutes(routes: FastifyInstance, opts: { readiness: Readiness; health: HealthOptions }): Promise<void> {
  const { readiness, health } = opts
  const livenessPath = health.livenessPath ?? LIVENESS_PATH
  const readinessPath = health.readinessPath ?? READINESS_PATH
  if (livenessPath !== false) {
    // A host's @fastify/under-pressure reads `pressureHandler` from the route's config: returning nothing lets the request
    // through, so an overloaded process stays alive to its orchestrator (readiness, shed with 503, takes it out of rotation).
    const config = { pressureHandler: () => undefined }
    routes.get(livenessPath, { config }, async (_request, reply) => reply.header("cache-control", "no-store").send({ status: "ok" }))
  }
  if (readinessPath !== false) {
    routes.get(readinessPath, async (_request, reply) => {
      const answer = await readiness.check()
      reply.header("cache-control", "no-store")
      if (answer.ready) return reply.send({ status: "ready" })
      return reply.code(503).header("retry-after", "1").send({ status: "unavailable", reason: answer.reason })
    })
  }
}
