import type { JsonObject } from "../types.js"
import { withoutPassword } from "../url-credentials.js"
import { callJson, RemoteAgentError, type HttpOptions } from "./http.js"

/**
 * Finding a remote agent: its card, and the one interface we talk to it on
 * (the first 1.0 interface we speak, else the first 0.3 one, as the spec's
 * client rules say: the card lists its interfaces in its order of preference).
 */

/** The bindings this client speaks; gRPC only when a gRPC caller is given (it loads @grpc/grpc-js). */
export type Binding = "JSONRPC" | "HTTP+JSON" | "GRPC"
export type ProtocolVersion = "1.0" | "0.3"

/** Where and how to reach the agent. */
export interface AgentEndpoint {
  binding: Binding
  version: ProtocolVersion
  /** An http(s) URL, or "host:port" for gRPC. */
  url: string
  /** 1.0: the interface's tenant, sent with every request. */
  tenant?: string
  /** gRPC: dial with TLS (the card was read over https). */
  secure?: boolean
}

/** The parts of a card the client reads; every field as the card has it. */
export interface RemoteCard extends JsonObject {
  name: string
  description?: string
  skills?: Array<{ name?: string; description?: string; examples?: string[] }>
}

export const WELL_KNOWN_CARD = ".well-known/agent-card.json"
/** Where agents before 0.3 (and some 0.3 ones) serve it. */
const OLD_WELL_KNOWN_CARD = ".well-known/agent.json"

/**
 * The card of the agent at `url`: the card's own URL (a path ending in .json), or the agent's base URL,
 * whose well-known card (then the older agent.json) is read. Throws saying what was tried and what to do.
 */
export async function fetchAgentCard(url: string, http: HttpOptions, signal?: AbortSignal): Promise<{ card: RemoteCard; cardUrl: string }> {
  let base: URL
  try {
    base = new URL(url)
  } catch {
    throw new TypeError(`should be the agent's http(s) base URL or its card's URL, got ${JSON.stringify(withoutPassword(url))}`)
  }
  if (base.protocol !== "http:" && base.protocol !== "https:") {
    throw new TypeError(`should be an http(s) URL, got ${JSON.stringify(withoutPassword(url))}`)
  }
  const candidates = base.pathname.endsWith(".json")
    ? [base.href]
    : [WELL_KNOWN_CARD, OLD_WELL_KNOWN_CARD].map((path) => new URL(path, base.href.endsWith("/") ? base.href : `${base.href}/`).href)
  const tried: string[] = []
  for (const candidate of candidates) {
    const { status, body } = await callJson("GET", candidate, { ...http, signal })
    if (status === 404 && candidate !== candidates.at(-1)) {
      tried.push(`${withoutPassword(candidate)} (404)`)
      continue
    }
    if (status === 401 || status === 403) {
      throw new RemoteAgentError(`the agent card at ${withoutPassword(candidate)} needs credentials (HTTP ${status}): give the agent's headers (such as authorization)`, status)
    }
    if (status < 200 || status > 299) {
      throw new RemoteAgentError(`no agent card at ${[...tried, `${withoutPassword(candidate)} (HTTP ${status})`].join(", ")}: give the agent's base URL or its card's URL`, status)
    }
    checkCard(body, candidate)
    return { card: body, cardUrl: candidate }
  }
  /* c8 ignore next: the loop returns or throws at its last candidate */
  throw new RemoteAgentError(`no agent card at ${tried.join(", ")}`)
}

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === "object" && !Array.isArray(value)

function checkCard(body: unknown, cardUrl: string): asserts body is RemoteCard {
  const problem = !isObject(body)
    ? "is not a JSON object"
    : typeof body.name !== "string" || body.name === ""
      ? "has no name"
      : !Array.isArray(body.supportedInterfaces) && typeof body.url !== "string"
        ? "names no interface (neither supportedInterfaces nor url)"
        : undefined
  if (problem) throw new RemoteAgentError(`${withoutPassword(cardUrl)} is not an agent card: it ${problem}; give the agent's base URL or its card's URL`)
}

/** "1.0.2" → "1.0"; anything else as it is. */
function majorMinor(version: unknown): string | undefined {
  const match = typeof version === "string" ? /^(\d+)\.(\d+)/.exec(version) : null
  return match ? `${Number(match[1])}.${Number(match[2])}` : undefined
}

/**
 * The interface to use: in supportedInterfaces, the first 1.0 one whose binding we speak, else the first
 * 0.3 one; else the 0.3 fields (url with preferredTransport, then additionalInterfaces). Throws naming what
 * the card offers when none fits.
 */
export function chooseEndpoint(card: RemoteCard, cardUrl: string, bindings: readonly Binding[]): AgentEndpoint {
  // 0.3's gRPC was another service than 1.0's: gRPC is spoken in 1.0 only.
  const spoken = (binding: unknown, version: ProtocolVersion): binding is Binding => bindings.includes(binding as Binding) && (binding !== "GRPC" || version === "1.0")
  const resolve = (url: string, binding: Binding) => (binding === "GRPC" ? url : new URL(url, cardUrl).href)
  const secure = cardUrl.startsWith("https:")
  const listed = Array.isArray(card.supportedInterfaces) ? card.supportedInterfaces.filter(isObject) : []
  for (const version of ["1.0", "0.3"] as const) {
    const found = listed.find((entry) => majorMinor(entry.protocolVersion) === version && spoken(entry.protocolBinding, version) && typeof entry.url === "string")
    if (found) {
      const binding = found.protocolBinding as Binding
      const tenant = version === "1.0" && typeof found.tenant === "string" && found.tenant !== "" ? { tenant: found.tenant } : {}
      return { binding, version, url: resolve(found.url as string, binding), ...tenant, ...(binding === "GRPC" && { secure }) }
    }
  }
  if (typeof card.url === "string") {
    const offered = [{ url: card.url, transport: card.preferredTransport ?? "JSONRPC" }, ...(Array.isArray(card.additionalInterfaces) ? card.additionalInterfaces.filter(isObject) : [])]
    const found = offered.find((entry) => spoken(entry.transport, "0.3") && typeof entry.url === "string")
    if (found) return { binding: found.transport as Binding, version: "0.3", url: resolve(found.url as string, found.transport as Binding) }
  }
  const offers = [
    ...listed.map((entry) => `${String(entry.protocolBinding)} ${String(entry.protocolVersion)}`),
    ...(typeof card.url === "string" ? [`${typeof card.preferredTransport === "string" ? card.preferredTransport : "JSONRPC"} 0.3`] : []),
  ]
  throw new RemoteAgentError(
    `the agent card at ${withoutPassword(cardUrl)} offers no interface we speak (it offers ${offers.join(", ") || "none"}; we speak ${bindings.join(", ")} in A2A 1.0, and all but GRPC in 0.3)`,
  )
}
