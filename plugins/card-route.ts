import { createHash } from "node:crypto"
import type { FastifyRequest, RouteHandlerMethod } from "fastify"
import { publicAgentCard, type CardFeatures, type CardOptions } from "../lib/a2a/card.js"
import type { CardSigner } from "../lib/a2a/card-signing.js"
import { answerVersion } from "../lib/a2a/wire.js"

export const CARD_PATH = "/.well-known/agent-card.json"

/** A derived URL reads Host, and behind a proxy the app trusts (Fastify's trustProxy) the forwarded pair. */
const DERIVED_URL_VARY = "A2A-Version, Host, X-Forwarded-Host, X-Forwarded-Proto"

/** Peers and proxies may keep the card five minutes; a changed card (a restart with new options) reaches them within that. */
const CARD_CACHE_CONTROL = "public, max-age=300"

interface CardRouteOptions {
  card: CardOptions
  /**
   * The endpoint URL to advertise. When absent it is derived from each request's protocol, Host and the
   * routes' prefix: X-Forwarded-Proto/-Host count only when the app trusts the proxy (Fastify's trustProxy).
   */
  url?: string
  /** The routes' prefix, for the derived URL. */
  prefix: string
  /** What the card declares that the server derives: push, the extended card, the token schemes. */
  features: CardFeatures
  /** Signs the card, when a signing key is set. */
  signer?: CardSigner
}

/**
 * `GET /.well-known/agent-card.json`: public; its security fields take the form of the version asked for.
 * Sent with a strong ETag of its bytes (a signed card is signed once per content, so the ETag holds) and
 * the time its options were fixed as Last-Modified; answered 304 to an If-None-Match that names the ETag,
 * or (without one) to an If-Modified-Since not before that time.
 */
export function agentCardHandler({ card, url, prefix, features, signer }: CardRouteOptions): RouteHandlerMethod {
  // The card is built from options fixed at registration: it last changed then (to the second, as HTTP dates go).
  const lastModified = new Date(Math.floor(Date.now() / 1000) * 1000)
  const lastModifiedHeader = lastModified.toUTCString()
  return async function agentCard(request, reply) {
    const seen = features.grpc === undefined || features.grpc.length === 0 ? features : { ...features, grpc: dialable(features.grpc, request) }
    const unsigned = publicAgentCard(card, url ?? endpointUrl(request, prefix), seen, answerVersion(request.headers["a2a-version"]))
    const body = JSON.stringify(signer ? await signer.sign(unsigned) : unsigned)
    const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`
    reply.header("vary", url === undefined ? DERIVED_URL_VARY : "A2A-Version").header("cache-control", CARD_CACHE_CONTROL).header("etag", etag).header("last-modified", lastModifiedHeader)
    const ifNoneMatch = request.headers["if-none-match"]
    // If-None-Match, when sent, decides alone (RFC 9110 §13.2.2); If-Modified-Since only without it.
    if (ifNoneMatch !== undefined ? matchesEtag(ifNoneMatch, etag) : notModifiedSince(request.headers["if-modified-since"], lastModified)) return reply.code(304).send()
    return reply.type("application/json; charset=utf-8").send(body)
  }
}

/** The endpoint URL a request reached the routes at: its protocol, Host and the routes' prefix. */
export function endpointUrl(request: FastifyRequest, prefix: string): string {
  return `${request.protocol}://${request.host}${prefix.replace(/\/$/, "")}/`
}

/** gRPC addresses as a peer dials them: one bound to every interface (0.0.0.0, [::]) at the host the peer reached the card at. */
function dialable(addresses: readonly string[], request: FastifyRequest): string[] {
  return addresses.map((address) => {
    const wildcard = /^(0\.0\.0\.0|\[::\]):(\d+)$/.exec(address)
    if (wildcard === null) return address
    const host = request.hostname.includes(":") && !request.hostname.startsWith("[") ? `[${request.hostname}]` : request.hostname
    return `${host}:${wildcard[2]}`
  })
}

/** Whether an If-Modified-Since date is at or after `lastModified`; an absent or unreadable date is not. */
function notModifiedSince(header: string | undefined, lastModified: Date): boolean {
  if (header === undefined) return false
  const since = Date.parse(header)
  return Number.isFinite(since) && since >= lastModified.getTime()
}

/** If-None-Match compares weakly (RFC 9110 §13.1.2): `*`, or any listed tag equal to ours with or without W/. */
export function matchesEtag(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  return header.split(",").some((tag) => {
    const trimmed = tag.trim()
    return trimmed === "*" || trimmed.replace(/^W\//, "") === etag
  })
}
