import type { FastifyRequest, RouteHandlerMethod } from "fastify"
import { deadLettersVisibleTo, MAX_DEAD_LETTERS } from "../lib/push/dead-letters.js"
import { ownersVisibleTo } from "../lib/internals.js"
import type { PushStore } from "../lib/stores/push-store.js"

/** Where an operator reads the push notifications given up on, beside the JSON-RPC route. */
export const DEAD_LETTERS_PATH = "/push/dead-letters"

const DEFAULT_LIMIT = 100

interface DeadLettersRouteOptions {
  push: PushStore
  principalOf?: (request: FastifyRequest) => string | undefined
  unownedTasksBelongTo?: string
}

/**
 * `GET /push/dead-letters?limit=N` (1-1000, default 100): the newest dead
 * letters of the caller's own Tasks, behind the same authentication as the
 * A2A routes (everyone's without it), as `{ deadLetters: [...] }`.
 */
export function deadLettersHandler({ push, principalOf, unownedTasksBelongTo }: DeadLettersRouteOptions): RouteHandlerMethod {
  return async function deadLetters(request, reply) {
    const text = (request.query as Record<string, unknown>).limit
    const limit = text === undefined ? DEFAULT_LIMIT : Number(text)
    if (!(Number.isInteger(limit) && limit >= 1 && limit <= MAX_DEAD_LETTERS)) {
      return reply.code(400).send({ error: `limit should be a whole number from 1 to ${MAX_DEAD_LETTERS}, got ${JSON.stringify(text)}` })
    }
    const owners = ownersVisibleTo(principalOf?.(request), unownedTasksBelongTo)
    reply.header("cache-control", "no-store")
    return { deadLetters: await deadLettersVisibleTo(push, owners, limit) }
  }
}
