import { createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from "node:crypto"
import { calculateJwkThumbprint, type JWK } from "jose"

/**
 * The private keys the server signs with (push notifications, agent cards):
 * read from PEM or JWK, checked to be a kind fit for signing, and its public
 * half as a JWK with an RFC 7638 thumbprint as its `kid`.
 */

/** A private key as the options take it: PEM text (PKCS#8, SEC1 or PKCS#1), JWK JSON text, or a JWK object. */
export type SigningKeyInput = string | JsonWebKey

/** Public keys as verifiers fetch them (served at `<prefix>/.well-known/jwks.json`): `{ keys: [jwk] }`. */
export interface Jwks {
  keys: JWK[]
}

/** The JWKS with `key` added (once, by kid); undefined when there is neither. */
export function withKey(jwks: Jwks | undefined, key: JWK | undefined): Jwks | undefined {
  if (key === undefined || jwks?.keys.some((held) => held.kid === key.kid)) return jwks
  return { keys: [...(jwks?.keys ?? []), key] }
}

/** The JWS algorithms a key may sign with, the first of each kind being its default. */
const ALGORITHMS = {
  ed25519: ["EdDSA"],
  ec: ["ES256"],
  rsa: ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"],
} as const

export type SigningAlgorithm = (typeof ALGORITHMS)[keyof typeof ALGORITHMS][number]

/**
 * Reads a private key and the algorithm it signs with: `alg.value` when given and fit for the key, else the
 * key's default. Throws a TypeError whose message starts with the option at fault (`option` or `alg.option`)
 * and says what it wants; the key's text never goes into a message.
 */
export function readSigningKey(value: unknown, option: string, alg?: { value: unknown; option: string }): { key: KeyObject; alg: SigningAlgorithm } {
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
    throw new TypeError(`${wanted}; it could not be read as one (${(err as Error).message.split("\n")[0].slice(0, 200)})`, { cause: err })
  }
  const details = key.asymmetricKeyDetails ?? {}
  let fit: readonly SigningAlgorithm[]
  switch (key.asymmetricKeyType) {
    case "ed25519":
      fit = ALGORITHMS.ed25519
      break
    case "ec":
      if (details.namedCurve !== "prime256v1") throw new TypeError(`${wanted}; this is an EC key on ${details.namedCurve}, not P-256`)
      fit = ALGORITHMS.ec
      break
    case "rsa":
      if ((details.modulusLength ?? 0) < 2048) throw new TypeError(`${wanted}; this RSA key has ${details.modulusLength} bits`)
      fit = ALGORITHMS.rsa
      break
    default:
      throw new TypeError(`${wanted}; this is a ${key.asymmetricKeyType} key`)
  }
  if (alg?.value === undefined) return { key, alg: fit[0] }
  if (!fit.includes(alg.value as SigningAlgorithm)) {
    throw new TypeError(`${alg.option} should be ${fit.map((name) => JSON.stringify(name)).join(" or ")} for this ${key.asymmetricKeyType} key, got ${JSON.stringify(alg.value)}`)
  }
  return { key, alg: alg.value as SigningAlgorithm }
}

/** The public half of `key` as a JWK for a JWKS: its `kid` (the RFC 7638 thumbprint unless given), `alg` and `use`. */
export async function publicJwkOf(key: KeyObject, alg: SigningAlgorithm, kid?: string): Promise<JWK & { kid: string }> {
  const jwk = createPublicKey(key).export({ format: "jwk" }) as JWK
  return { ...jwk, kid: kid ?? (await calculateJwkThumbprint(jwk)), alg, use: "sig" }
}
