import type { RouteHandlerMethod } from "fastify"
import type { Jwks } from "../lib/push/signer.js"

/** Where receivers of signed notifications and readers of the signed card find the public keys, beside the agent card. */
export const JWKS_PATH = "/.well-known/jwks.json"

/** `GET /.well-known/jwks.json`: the public halves of the push and card signing keys; registered only when a key is set. */
export function jwksHandler(jwks: Jwks): RouteHandlerMethod {
  const body = JSON.stringify(jwks)
  return async function jwksDocument(_request, reply) {
    // Receivers cache it; a key rotation is a restart, and five minutes is how long a receiver may keep an old key.
    reply.header("cache-control", "public, max-age=300").type("application/jwk-set+json")
    return body
  }
}
