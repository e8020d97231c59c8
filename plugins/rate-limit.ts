import type { FastifyInstance } from "fastify"
import { A2AError, ErrorCode } from "../lib/a2a/errors.js"
import type { ToolnexusA2AOptions } from "./options.js"

/**
 * Limits requests per client address on `routes` through @fastify/rate-limit, loaded only here,
 * so an agent without opts.rateLimit never loads it. Refusals are JSON-RPC errors with HTTP 429.
 */
export async function registerRateLimit(routes: FastifyInstance, limit: NonNullable<ToolnexusA2AOptions["rateLimit"]>): Promise<void> {
  const { default: rateLimit } = await import("@fastify/rate-limit")
  await routes.register(rateLimit, {
    ...limit,
    errorResponseBuilder: (_request, context) => {
      const error = new A2AError(ErrorCode.InvalidRequest, `Too many requests: at most ${context.max} per ${context.after}; retry later`)
      return Object.assign(error, { statusCode: context.statusCode })
    },
  })
}
