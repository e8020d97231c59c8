import type { FastifyRequest, RouteHandlerMethod } from "fastify"
import { securityCardFields } from "../lib/a2a/auth.js"
import { buildAgentCard, type CardOptions } from "../lib/a2a/card.js"
import { answerVersion } from "../lib/a2a/wire.js"

export const CARD_PATH = "/.well-known/agent-card.json"

/** A derived URL reads Host, and behind a proxy the app trusts (Fastify's trustProxy) the forwarded pair. */
const DERIVED_URL_VARY = "A2A-Version, Host, X-Forwarded-Host, X-Forwarded-Proto"

interface CardRouteOptions {
  card: CardOptions
  /**
   * The endpoint URL to advertise. When absent it is derived from each request's protocol, Host and the
   * routes' prefix: X-Forwarded-Proto/-Host count only when the app trusts the proxy (Fastify's trustProxy).
   */
  url?: string
  /** The routes' prefix, for the derived URL. */
  prefix: string
  /** Whether the card advertises the token schemes (a token table is configured). */
  usesTokens: boolean
  /** Whether push notifications are on. */
  pushNotifications: boolean
}

/** `GET /.well-known/agent-card.json`: public; its security fields take the form of the version asked for. */
export function agentCardHandler({ card, url, prefix, usesTokens, pushNotifications }: CardRouteOptions): RouteHandlerMethod {
  return async function agentCard(request, reply) {
    const body = buildAgentCard(card, url ?? endpointUrl(request, prefix), pushNotifications)
    reply.header("vary", url === undefined ? DERIVED_URL_VARY : "A2A-Version")
    if (!usesTokens) return body
    return { ...body, ...securityCardFields(answerVersion(request.headers["a2a-version"])) }
  }
}

function endpointUrl(request: FastifyRequest, prefix: string): string {
  return `${request.protocol}://${request.host}${prefix.replace(/\/$/, "")}/`
}
