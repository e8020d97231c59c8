import type { AgentCard, AgentProvider, AgentSkill } from "../types.js"
import { securityCardFields } from "./auth.js"
import type { WireVersion } from "./wire.js"

/** What a host may say about its agent; everything else on the card is derived. */
export interface CardOptions {
  name?: string
  description?: string
  version?: string
  provider?: AgentProvider
  skills?: AgentSkill[]
}

const DEFAULT_SKILL: AgentSkill = {
  id: "chat",
  name: "Chat",
  description: "Answers a text message, using the agent's tools where they help.",
  tags: ["chat"],
}

/** What the card declares that the server derives from its options, the same for every request. */
export interface CardFeatures {
  /** Whether push is on (the store has the capability and the host left it on). */
  pushNotifications?: boolean
  /** Whether GetExtendedAgentCard answers (opts.extendedCard is set). */
  extendedAgentCard?: boolean
  /** Whether the card advertises the token schemes (a token table is configured). */
  usesTokens?: boolean
  /** The gRPC binding's addresses, "host:port", as the official gRPC client dials them (none: gRPC is not served). */
  grpc?: readonly string[]
}

/**
 * The agent card for an endpoint URL: the A2A 1.0 fields
 * (`supportedInterfaces`: JSON-RPC, then HTTP+JSON, in 1.0 and 0.3, then
 * gRPC in 1.0 at each of its addresses; a client takes the first it speaks)
 * and the 0.3 ones (`url`, `protocolVersion`, `preferredTransport`,
 * `additionalInterfaces`, `supportsAuthenticatedExtendedCard`), so both
 * generations of client find every endpoint.
 */
export function buildAgentCard(opts: CardOptions, endpointUrl: string, features: CardFeatures = {}): AgentCard {
  const extendedAgentCard = features.extendedAgentCard ?? false
  return {
    name: opts.name ?? "toolnexus agent",
    description: opts.description ?? "An LLM agent with tools, served over A2A by toolnexus.",
    version: opts.version ?? "1.0.0",
    url: endpointUrl,
    protocolVersion: "0.3.0",
    preferredTransport: "JSONRPC",
    additionalInterfaces: [
      { url: endpointUrl, transport: "JSONRPC" },
      { url: endpointUrl, transport: "HTTP+JSON" },
    ],
    supportedInterfaces: [
      { url: endpointUrl, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: endpointUrl, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      { url: endpointUrl, protocolBinding: "HTTP+JSON", protocolVersion: "1.0" },
      { url: endpointUrl, protocolBinding: "HTTP+JSON", protocolVersion: "0.3" },
      ...(features.grpc ?? []).map((address) => ({ url: address, protocolBinding: "GRPC" as const, protocolVersion: "1.0" })),
    ],
    ...(opts.provider ? { provider: opts.provider } : {}),
    capabilities: { streaming: true, pushNotifications: features.pushNotifications ?? false, extendedAgentCard },
    supportsAuthenticatedExtendedCard: extendedAgentCard,
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain"],
    skills: opts.skills ?? [DEFAULT_SKILL],
  }
}

/** The card as a peer reads it at `endpointUrl` in `version`: with the token schemes, in that version's form, when tokens are on. */
export function publicAgentCard(opts: CardOptions, endpointUrl: string, features: CardFeatures, version: WireVersion): AgentCard {
  const card = buildAgentCard(opts, endpointUrl, features)
  return features.usesTokens ? { ...card, ...securityCardFields(version) } : card
}

/**
 * Checks card options at registration, naming the bad field as `${where}<field>`
 * ("opts." for the plugin's options).
 */
export function checkCardOptions(opts: CardOptions, where = "opts."): void {
  for (const key of ["name", "description", "version"] as const) {
    if (opts[key] !== undefined && (typeof opts[key] !== "string" || opts[key] === "")) {
      throw new TypeError(`toolnexus: ${where}${key} should be a non-empty string`)
    }
  }
  if (opts.skills !== undefined) {
    if (!Array.isArray(opts.skills)) throw new TypeError(`toolnexus: ${where}skills should be an array of { id, name, description, tags }`)
    opts.skills.forEach((skill, i) => {
      for (const key of ["id", "name", "description"] as const) {
        if (typeof skill?.[key] !== "string") throw new TypeError(`toolnexus: ${where}skills[${i}].${key} should be a string`)
      }
      if (!Array.isArray(skill.tags)) throw new TypeError(`toolnexus: ${where}skills[${i}].tags should be an array of strings`)
    })
  }
  if (opts.provider !== undefined && (typeof opts.provider?.organization !== "string" || typeof opts.provider?.url !== "string")) {
    throw new TypeError(`toolnexus: ${where}provider should be { organization, url }`)
  }
}
