import { createHash, createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from "node:crypto"
import { calculateJwkThumbprint, SignJWT, type JWK } from "jose"

/**
 * Signed notifications: with a private key configured, every attempt carries
 * a short-lived JWT a receiver can check against the public key the server
 * publishes as a JWKS. The claims tie it to one request: the webhook URL
 * (aud), the notification (jti = its Idempotency-Key), its Task, and a
 * SHA-256 of the exact body bytes (`body_sha256`, base64url).
 */

/** A private key as the option takes it: PEM text (PKCS#8, SEC1 or PKCS#1), JWK JSON text, or a JWK object. */
export type SigningKeyInput = string | JsonWebKey

/** How long a signature is good for: long enough for the request and some clock skew, short enough that a copy soon expires. */
export const SIGNATURE_LIFETIME_S = 300

/** The header that carries the JWT when the config brings its own Authorization. */
export const SIGNATURE_HEADER = "X-A2A-Notification-Signature"

/** The public half as receivers fetch it: `{ keys: [jwk] }`. */
export interface Jwks {
  keys: JWK[]
}

export interface PushSigner {
  /** The JWKS served at `<prefix>/.well-known/jwks.json`. */
  readonly jwks: Jwks
  /** A JWT for one attempt of one notification. */
  sign(request: { url: string; key: string; taskId: string; body: string }): Promise<string>
}

type Algorithm = "EdDSA" | "ES256" | "RS256"

/** Reads the private key and its algorithm; throws naming `option` and what it wants. */
export function loadSigningKey(value: unknown, option = "push.signingKey"): { key: KeyObject; alg: Algorithm } {
  const wanted = `${option} should be a private key for signing: an Ed25519, P-256 or RSA (2048 bits or more) key, as PEM text or a JWK`
  let key: KeyObject
  try {
    if (typeof value === "string") {
      const text = value.trim()
      key = text.startsWith("{") ? createPrivateKey({ key: JSON.parse(text) as JsonWebKey, format: "jwk" }) : createPrivateKey(text)
    } else if (value !== null && typeof value === "object") {
      key = createPrivateKey({ key: value as JsonWebKey, format: "jwk" })
    } else {
      throw new TypeError(`${wanted}, got ${value === null ? "null" : typeof value}`)
    }
  } catch (err) {
    if (err instanceof TypeError && err.message.startsWith(option)) throw err
    // The key's text never goes into the message.
    throw new TypeError(`${wanted}; it could not be read as one (${(err as Error).message.split("\n")[0].slice(0, 200)})`, { cause: err })
  }
  const details = key.asymmetricKeyDetails ?? {}
  switch (key.asymmetricKeyType) {
    case "ed25519":
      return { key, alg: "EdDSA" }
    case "ec":
      if (details.namedCurve === "prime256v1") return { key, alg: "ES256" }
      throw new TypeError(`${wanted}; this is an EC key on ${details.namedCurve}, not P-256`)
    case "rsa":
      if ((details.modulusLength ?? 0) >= 2048) return { key, alg: "RS256" }
      throw new TypeError(`${wanted}; this RSA key has ${details.modulusLength} bits`)
    default:
      throw new TypeError(`${wanted}; this is a ${key.asymmetricKeyType} key`)
  }
}

/** A signer for `issuer` (the agent's URL or name) from a key loadSigningKey accepts. */
export async function createPushSigner(value: SigningKeyInput, issuer: string): Promise<PushSigner> {
  const { key, alg } = loadSigningKey(value)
  const publicJwk = createPublicKey(key).export({ format: "jwk" }) as JWK
  const kid = await calculateJwkThumbprint(publicJwk)
  const jwks: Jwks = { keys: [{ ...publicJwk, kid, alg, use: "sig" }] }
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
