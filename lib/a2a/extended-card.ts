import type { AgentCard } from "../types.js"
import type { CardSigner } from "./card-signing.js"
import { checkCardOptions, type CardOptions } from "./card.js"
import { unauthenticated } from "./auth.js"
import { A2AError, ErrorCode } from "./errors.js"

/** What a host's extendedCard function gives for one principal: the public card's fields it replaces. */
export type ExtendedCardFields = Pick<CardOptions, "name" | "description" | "version" | "provider" | "skills">

/** The fields of the public card an extended card may replace; the rest (URLs, interfaces, capabilities, security) is derived. */
const EXTENDED_FIELDS = ["name", "description", "version", "provider", "skills"] as const satisfies readonly (keyof ExtendedCardFields)[]

/**
 * The host's extended card: called with the authenticated principal on every GetExtendedAgentCard; it may be
 * async. Returning undefined gives that principal the public card.
 */
export type ExtendedCardSource = (principal: string) => ExtendedCardFields | undefined | Promise<ExtendedCardFields | undefined>

export interface ExtendedCardsOptions {
  /** The host's opts.extendedCard; omitted, GetExtendedAgentCard answers -32004 (and the card says `extendedAgentCard: false`). */
  extendedCard?: ExtendedCardSource
  /** Signs the extended card as the public one is signed. */
  signer?: CardSigner
}

/**
 * GetExtendedAgentCard, free of any binding. The merge rule: each field the
 * host's function returns (name, description, version, provider, skills)
 * replaces the public card's field whole (skills are replaced, not appended
 * to); a field it leaves out keeps the public value; everything else is the
 * public card's as the peer reads it (URL, interfaces, capabilities,
 * security, in the peer's version). Any other field returned is refused.
 */
export class ExtendedCards {
  constructor(private readonly opts: ExtendedCardsOptions) {}

  /** Whether an extended card is configured: the card's `capabilities.extendedAgentCard`. */
  get configured(): boolean {
    return this.opts.extendedCard !== undefined
  }

  /**
   * The extended card for `principal`, over `publicCard` (the unsigned or
   * signed public card as this peer reads it). Throws an A2AError: -32004
   * when none is configured, "Unauthorized" (-32600, as every refused
   * request is answered) without a principal. A host function that throws
   * or returns bad fields throws that (a plain Error: an internal error).
   */
  async cardFor(principal: string | undefined, publicCard: AgentCard): Promise<AgentCard> {
    const source = this.opts.extendedCard
    if (source === undefined) throw noExtendedCard()
    if (principal === undefined) throw unauthenticated()
    const fields = await source(principal)
    const { signatures: _signatures, ...card } = publicCard
    const extended: AgentCard = fields === undefined || fields === null ? card : { ...card, ...checkedFields(fields) }
    return this.opts.signer ? this.opts.signer.sign(extended) : extended
  }
}

/** GetExtendedAgentCard's answer where the host configured no extended card. */
export function noExtendedCard(): A2AError {
  return new A2AError(ErrorCode.UnsupportedOperation, "This agent has no extended agent card; read /.well-known/agent-card.json")
}

function checkedFields(fields: unknown): ExtendedCardFields {
  const where = "opts.extendedCard(principal)"
  if (fields === null || typeof fields !== "object" || Array.isArray(fields)) {
    throw new TypeError(`toolnexus: ${where} should return card fields ({ ${EXTENDED_FIELDS.join(", ")} }) or undefined, got ${Array.isArray(fields) ? "an array" : typeof fields}`)
  }
  const other = Object.keys(fields).find((key) => !(EXTENDED_FIELDS as readonly string[]).includes(key))
  if (other !== undefined) {
    throw new TypeError(`toolnexus: ${where} returned ${JSON.stringify(other)}: an extended card replaces only ${EXTENDED_FIELDS.join(", ")}; the rest is derived`)
  }
  checkCardOptions(fields, `${where}.`)
  // An undefined field keeps the public value rather than blanking it.
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined))
}
