import type { FastifyReply, FastifyRequest } from "fastify"
import { Authenticator, unauthenticated, type AuthSettings } from "../lib/a2a/auth.js"
import { errorFields } from "../lib/log.js"

/** The A2A routes' onRequest hook and what it found: a request without a principal is refused with 401. */
interface Authentication {
  /** Whether a token table is configured: only that is advertised on the agent card, a host's verify() may check anything. */
  usesTokens: boolean
  onRequest: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>
  /** The principal the hook found for this request. */
  principalOf: (request: FastifyRequest) => string | undefined
}

export function createAuthentication(settings: AuthSettings<FastifyRequest>): Authentication {
  const authenticator = new Authenticator(settings)
  const principals = new WeakMap<FastifyRequest, string>()
  return {
    usesTokens: authenticator.usesTokens,
    onRequest: async (request, reply) => {
      let principal: string | undefined
      try {
        principal = await authenticator.principalOf(request, request.headers)
      } catch (err) {
        request.log.error(errorFields(err), "opts.auth.verify threw")
      }
      if (principal === undefined) {
        reply.header("www-authenticate", 'Bearer realm="a2a"')
        // Thrown, so each binding's error handler answers it in its own form (a JSON-RPC error, google.rpc.Status).
        throw Object.assign(unauthenticated(), { statusCode: 401 })
      }
      principals.set(request, principal)
      return undefined
    },
    principalOf: (request) => principals.get(request),
  }
}
