import canonicalize from "canonicalize"
import { FlattenedSign } from "jose"
import type { KeyObject } from "node:crypto"
import { publicJwkOf, readSigningKey, type SigningAlgorithm, type SigningKeyInput } from "../signing-key.js"
import type { AgentCard, AgentCardSignature } from "../types.js"

/**
 * Signed agent cards (A2A §8.4): a JWS over the RFC 8785 (JCS) canonical
 * form of the card without its `signatures`, in the form the official SDKs
 * check it: the card read as the 1.0 AgentCard message (fields outside it,
 * such as the 0.3 `url` or `security`, are dropped; so are empty strings,
 * arrays and objects), then serialised by JCS.
 */

export interface CardSigningOptions {
  /** The private key: PEM text (PKCS#8, SEC1 or PKCS#1), JWK JSON text, or a JWK object; Ed25519, P-256 or RSA of 2048 bits or more. */
  privateKey: SigningKeyInput
  /** The `kid` of the signature's protected header; default: the key's RFC 7638 thumbprint. */
  kid?: string
  /** The JWS algorithm; default: EdDSA for Ed25519, ES256 for P-256, RS256 for RSA (which may also take RS384/512 or PS256/384/512). */
  alg?: SigningAlgorithm
}

/** The JWS `typ` the spec asks for (§8.4.2). */
const TYP = "JOSE"

/** Signatures kept, by canonical card: about one per endpoint URL and version a card is read at; past it the oldest go (and are made again). */
const MAX_SIGNATURES = 256

/** Reads and checks the options, throwing at registration with a message that names the option at fault. */
export function readCardSigningOptions(options: unknown): { key: KeyObject; alg: SigningAlgorithm; kid?: string } {
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw new TypeError("toolnexus: opts.cardSigning should be { privateKey, kid?, alg? }")
  }
  const { privateKey, kid, alg } = options as Record<string, unknown>
  if (kid !== undefined && (typeof kid !== "string" || kid === "")) throw new TypeError("toolnexus: opts.cardSigning.kid should be a non-empty string")
  try {
    return { ...readSigningKey(privateKey, "opts.cardSigning.privateKey", { value: alg, option: "opts.cardSigning.alg" }), ...(kid !== undefined && { kid }) }
  } catch (err) {
    throw new TypeError(`toolnexus: ${(err as Error).message}`, { cause: err })
  }
}

/** Signs agent cards with one key; each distinct card is signed once, so a card read again carries the same signature (and ETag). */
export class CardSigner {
  private readonly signatures = new Map<string, Promise<AgentCardSignature>>()

  private constructor(
    private readonly key: KeyObject,
    private readonly header: { alg: SigningAlgorithm; kid: string; typ: string },
    /** The public key as a JWK, with its `kid`, for a JWKS. */
    readonly publicJwk: Awaited<ReturnType<typeof publicJwkOf>>,
  ) {}

  /** A signer from checked or unchecked options (see readCardSigningOptions for what is refused). */
  static async create(options: CardSigningOptions): Promise<CardSigner> {
    const { key, alg, kid } = readCardSigningOptions(options)
    const publicJwk = await publicJwkOf(key, alg, kid)
    return new CardSigner(key, { alg, kid: publicJwk.kid, typ: TYP }, publicJwk)
  }

  /** The card with `signatures` holding this key's signature (any it had are replaced). */
  async sign<Card extends AgentCard>(card: Card): Promise<Card & { signatures: AgentCardSignature[] }> {
    const payload = canonicalCard(card)
    let signature = this.signatures.get(payload)
    if (signature === undefined) {
      if (this.signatures.size >= MAX_SIGNATURES) this.signatures.delete(this.signatures.keys().next().value!)
      const signing = this.signPayload(payload)
      this.signatures.set(payload, signing)
      // A failed signing is not kept: the next read tries again.
      signing.catch(() => this.signatures.get(payload) === signing && this.signatures.delete(payload))
      signature = signing
    }
    return { ...card, signatures: [await signature] }
  }

  private async signPayload(payload: string): Promise<AgentCardSignature> {
    const jws = await new FlattenedSign(new TextEncoder().encode(payload)).setProtectedHeader(this.header).sign(this.key)
    return { protected: jws.protected!, signature: jws.signature }
  }
}

/** What a field of the 1.0 AgentCard message holds, for reading a card as the SDKs do (ts-proto's fromJSON, then toJSON). */
type Shape =
  | "string"
  /** An `optional bool`: kept when set, false too. */
  | "bool"
  /** A plain proto3 bool: false is its default, so it is left out. */
  | "flag"
  | "strings"
  /** A google.protobuf.Struct: taken as it is. */
  | "struct"
  | { fields: Record<string, Shape> }
  | { list: Shape }
  | { map: Shape }
  /** A oneof: the first case set, in the proto's order. */
  | { oneOf: Record<string, Shape> }

const STRING_LIST: Shape = { fields: { list: "strings" } }
const SECURITY_REQUIREMENT: Shape = { fields: { schemes: { map: STRING_LIST } } }
const SCOPES: Shape = { map: "string" }
const OAUTH_FLOWS: Shape = {
  oneOf: {
    authorizationCode: { fields: { authorizationUrl: "string", tokenUrl: "string", refreshUrl: "string", scopes: SCOPES, pkceRequired: "flag" } },
    clientCredentials: { fields: { tokenUrl: "string", refreshUrl: "string", scopes: SCOPES } },
    implicit: { fields: { authorizationUrl: "string", refreshUrl: "string", scopes: SCOPES } },
    password: { fields: { tokenUrl: "string", refreshUrl: "string", scopes: SCOPES } },
    deviceCode: { fields: { deviceAuthorizationUrl: "string", tokenUrl: "string", refreshUrl: "string", scopes: SCOPES } },
  },
}
const SECURITY_SCHEME: Shape = {
  oneOf: {
    apiKeySecurityScheme: { fields: { description: "string", location: "string", name: "string" } },
    httpAuthSecurityScheme: { fields: { description: "string", scheme: "string", bearerFormat: "string" } },
    oauth2SecurityScheme: { fields: { description: "string", flows: OAUTH_FLOWS, oauth2MetadataUrl: "string" } },
    openIdConnectSecurityScheme: { fields: { description: "string", openIdConnectUrl: "string" } },
    mtlsSecurityScheme: { fields: { description: "string" } },
  },
}
/** The A2A 1.0 AgentCard (specification/a2a.proto) less `signatures`, which the signature never covers. */
const AGENT_CARD: Shape = {
  fields: {
    name: "string",
    description: "string",
    supportedInterfaces: { list: { fields: { url: "string", protocolBinding: "string", tenant: "string", protocolVersion: "string" } } },
    provider: { fields: { url: "string", organization: "string" } },
    version: "string",
    documentationUrl: "string",
    capabilities: {
      fields: {
        streaming: "bool",
        pushNotifications: "bool",
        extensions: { list: { fields: { uri: "string", description: "string", required: "flag", params: "struct" } } },
        extendedAgentCard: "bool",
      },
    },
    securitySchemes: { map: SECURITY_SCHEME },
    securityRequirements: { list: SECURITY_REQUIREMENT },
    defaultInputModes: "strings",
    defaultOutputModes: "strings",
    skills: {
      list: {
        fields: {
          id: "string",
          name: "string",
          description: "string",
          tags: "strings",
          examples: "strings",
          inputModes: "strings",
          outputModes: "strings",
          securityRequirements: { list: SECURITY_REQUIREMENT },
        },
      },
    },
    iconUrl: "string",
  },
}

/**
 * The payload a card's signature covers: the card read as the 1.0 AgentCard
 * (camelCase or snake_case names, as the SDKs read them), without
 * `signatures`, with empty strings, arrays and objects left out, as JCS text.
 */
export function canonicalCard(card: object): string {
  return canonicalize(withoutEmpty(read(AGENT_CARD, card)) ?? {})!
}

const isSet = (value: unknown) => value !== undefined && value !== null
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null
const snakeCase = (name: string) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`)
/** A field as the SDKs find it: under its JSON name, else under its proto name. */
const fieldOf = (object: Record<string, unknown>, name: string) => (isSet(object[name]) ? object[name] : object[snakeCase(name)])

function read(shape: Shape, value: unknown): unknown {
  if (typeof shape === "string") {
    switch (shape) {
      case "string":
        // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the SDKs read any value set as String(value)
        return isSet(value) ? String(value) : undefined
      case "bool":
        return isSet(value) ? Boolean(value) : undefined
      case "flag":
        return Boolean(value) || undefined
      case "strings":
        return Array.isArray(value) ? value.map(String) : undefined
      case "struct":
        return isObject(value) ? value : undefined
    }
  }
  if ("list" in shape) return Array.isArray(value) ? value.map((item) => read(shape.list, item)) : undefined
  if (!isSet(value)) return undefined
  const object = isObject(value) ? value : {}
  if ("map" in shape) return Object.fromEntries(Object.entries(object).map(([key, item]) => [key, read(shape.map, item)]))
  if ("oneOf" in shape) {
    const name = Object.keys(shape.oneOf).find((name) => isSet(fieldOf(object, name)))
    return name === undefined ? {} : { [name]: read(shape.oneOf[name], fieldOf(object, name)) }
  }
  return Object.fromEntries(Object.entries(shape.fields).map(([name, field]) => [name, read(field, fieldOf(object, name))]))
}

/** The value without empty strings, arrays and objects (nor undefined or null), at any depth; undefined when nothing is left. */
function withoutEmpty(value: unknown): unknown {
  if (value === "" || value === undefined || value === null) return undefined
  if (Array.isArray(value)) {
    const items = value.map(withoutEmpty).filter((item) => item !== undefined)
    return items.length > 0 ? items : undefined
  }
  if (isObject(value)) {
    const entries = Object.entries(value)
      .map(([key, item]) => [key, withoutEmpty(item)] as const)
      .filter(([, item]) => item !== undefined)
    return entries.length > 0 ? Object.fromEntries(entries) : undefined
  }
  return value
}
