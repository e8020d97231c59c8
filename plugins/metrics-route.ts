import type { FastifyInstance, RouteHandlerMethod } from "fastify"
import type { A2AMetrics } from "../lib/observe/metrics.js"
import { listenForMetrics, type MetricsListener } from "../lib/observe/metrics-server.js"
import type { Registry } from "prom-client"

export { METRICS_PATH } from "../lib/observe/metrics-server.js"

/** The agent's metrics, as the plugin decorates the app with them (when `metrics` is on). */
export interface ToolnexusMetrics {
  /** The agent's own prom-client registry: add your own metrics to it, or `collectDefaultMetrics({ register })`. */
  readonly registry: Registry
  /** With `metrics: { listen }`: the address they are served on once the app is ready, "host:port". */
  readonly address?: string
}

declare module "fastify" {
  interface FastifyInstance {
    /** The agent's Prometheus metrics, with `metrics` on. */
    toolnexusMetrics: ToolnexusMetrics
  }
}

/** `GET <prefix>/metrics`: the Prometheus text format. */
export function metricsHandler(metrics: A2AMetrics): RouteHandlerMethod {
  return async function metricsText(_request, reply) {
    return reply.type(metrics.contentType).send(await metrics.text())
  }
}

/**
 * Decorates the app with `toolnexusMetrics`; with `listen`, serves them on that address of their own from
 * the app's ready to its close (a listen that fails fails the ready, naming the address).
 */
export function decorateMetrics(fastify: FastifyInstance, metrics: A2AMetrics, listen: string | undefined): void {
  let listener: MetricsListener | undefined
  fastify.decorate("toolnexusMetrics", {
    registry: metrics.registry,
    get address() {
      return listener?.address
    },
  })
  if (listen === undefined) return
  fastify.addHook("onReady", async () => {
    listener = await listenForMetrics(metrics, listen)
  })
  fastify.addHook("onClose", async () => {
    await listener?.close()
  })
}
