import { createHash, type KeyObject } from "node:crypto"
import { SignJWT } from "jose"
import { publicJwkOf, readSigningKey, type Jwks, type SigningAlgorithm, type SigningKeyInput } from "../signing-key.js"

/**
 * Signed notifications: with a private key configured, every attempt carries
 * a short-lived JWT a receiver can check against the public key the server
 * publishes as a JWKS. The claims tie it to one request: the webhook URL
 * (aud), the notification (jti = its Idempotency-Key), its Task, and a
 * SHA-256 of the exact body bytes (`body_sha256`, base64url).
 */

export type { Jwks, SigningKeyInput } from "../signing-key.js"

/** How long a signature is good for: long enough for the request and some clock skew, short enough that a copy soon expires. */
export const SIGNATURE_LIFETIME_S = 300

/** The header that carries the JWT when the config brings its own Authorization. */
export const SIGNATURE_HEADER = "X-A2A-Notification-Signature"


export interface PushSigner {
  /** The JWKS served at `<prefix>/.well-known/jwks.json`. */
  readonly jwks: Jwks
  /** A JWT for one attempt of one notification. */
  sign(request: { url: string; key: string; taskId: string; body: string }): Promise<string>
}

/** Reads the push signing key and its algorithm (see readSigningKey); errors name `option`. */
export function loadSigningKey(value: unknown, option = "push.signingKey"): { key: KeyObject; alg: SigningAlgorithm } {
  return readSigningKey(value, option)
}

/** A signer for `issuer` (the agent's URL or name) from a key loadSigningKey accepts. */
export async function createPushSigner(value: SigningKeyInput, issuer: string): Promise<PushSigner> {
  const { key, alg } = loadSigningKey(value)
  const publicJwk = await publicJwkOf(key, alg)
  const { kid } = publicJwk
  const jwks: Jwks = { keys: [publicJwk] }
  return {
    jwks,
    sign: ({ url, key: jti, taskId, body }) =>
      new SignJWT({ taskId, body_sha256: createHash("sha256").update(body).digest("base64url") })
        .setProtectedHeader({ alg, kid, typ: "JWT" })
        .setIssuer(issuer)
        .setAudience(url)
        .setIssuedAt()
        .setExpirationTime(`${SIGNATURE_LIFETIME_S}s`)
        .setJti(jti)
        .sign(key),
  }
}
