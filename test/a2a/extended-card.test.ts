import { verifyAgentCardSignature } from "@a2a-js/sdk"
import { generateKeyPairSync } from "node:crypto"
import t, { type Test } from "tap"
import { publicAgentCard } from "../../lib/a2a/card.js"
import { CardSigner } from "../../lib/a2a/card-signing.js"
import { A2AError, ErrorCode } from "../../lib/a2a/errors.js"
import { ExtendedCards, type ExtendedCardSource } from "../../lib/a2a/extended-card.js"
import { createLocalClient } from "../../lib/client/client.js"
import type { AgentCard } from "../../lib/types.js"
import type { ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { a2aApp } from "../fixtures/helpers.js"

const client = createLocalClient(() => "pong")
// The SDK's verifier logs each signature it rejects with console.debug; the tests that expect a rejection say so themselves.
t.capture(console, "debug", () => {})
const TOKENS = { "extended-card-secret-0123": "alice" }
const PUBLIC_SKILL = { id: "chat", name: "Chat", description: "Talks", tags: ["chat"] }
const PRIVATE_SKILL = { id: "payroll", name: "Payroll", description: "Runs payroll", tags: ["hr"] }

const publicCard = (version: "0.3" | "1.0" = "1.0"): AgentCard =>
  publicAgentCard({ name: "desk", description: "The desk", skills: [PUBLIC_SKILL] }, "https://agents.test/desk/", { usesTokens: true, extendedAgentCard: true }, version)

const build = (t: Test, opts: Partial<ToolnexusA2AOptions> = {}) => a2aApp(t, { client, ...opts })

async function a2aErrorOf(promise: Promise<unknown>): Promise<A2AError> {
  const err = await promise.then(
    () => undefined,
    (err: unknown) => err,
  )
  if (!(err instanceof A2AError)) throw new Error(`expected an A2AError, got ${String(err)}`)
  return err
}

t.test("not configured: -32004, whoever asks", async (t) => {
  const cards = new ExtendedCards({})
  t.equal(cards.configured, false)
  t.equal((await a2aErrorOf(cards.cardFor("alice", publicCard()))).code, ErrorCode.UnsupportedOperation)
  t.equal((await a2aErrorOf(cards.cardFor(undefined, publicCard()))).code, ErrorCode.UnsupportedOperation)
})

t.test("no principal: refused as every request without credentials is, and the host's function is not called", async (t) => {
  let calls = 0
  const cards = new ExtendedCards({ extendedCard: () => (calls++, { skills: [PRIVATE_SKILL] }) })
  const err = await a2aErrorOf(cards.cardFor(undefined, publicCard()))
  t.equal(err.code, ErrorCode.InvalidRequest)
  t.match(err.message, /^Unauthorized/)
  t.equal(calls, 0)
})

t.test("the merge: returned fields replace the public ones whole, the rest stays the public card's as the peer reads it", async (t) => {
  const seen: string[] = []
  const extendedCard: ExtendedCardSource = async (principal) => {
    seen.push(principal)
    await new Promise((resolve) => setImmediate(resolve))
    return principal === "alice" ? { skills: [PRIVATE_SKILL], description: "The desk, for staff", version: undefined } : undefined
  }
  const cards = new ExtendedCards({ extendedCard })
  t.equal(cards.configured, true)
  for (const version of ["0.3", "1.0"] as const) {
    const base = publicCard(version)
    const card = await cards.cardFor("alice", base)
    t.same(card.skills, [PRIVATE_SKILL], `${version}: skills replaced, not appended`)
    t.equal(card.description, "The desk, for staff")
    t.equal(card.version, base.version, "a field returned as undefined keeps the public value")
    t.equal(card.name, "desk", "a field left out keeps the public value")
    t.same(
      { url: card.url, supportedInterfaces: card.supportedInterfaces, capabilities: card.capabilities, securitySchemes: card.securitySchemes, security: card.security, securityRequirements: card.securityRequirements },
      { url: base.url, supportedInterfaces: base.supportedInterfaces, capabilities: base.capabilities, securitySchemes: base.securitySchemes, security: base.security, securityRequirements: base.securityRequirements },
      `${version}: URL, interfaces, capabilities and security are the public card's, in the peer's version`,
    )
    t.same(base.skills, [PUBLIC_SKILL], "the public card is not changed")
  }
  t.same(await cards.cardFor("bob", publicCard()), publicCard(), "undefined: that principal gets the public card")
  t.same(seen, ["alice", "alice", "bob"], "called with the principal each time")
})

t.test("bad fields from the host's function are a plain error naming what was wrong (answered as an internal error)", async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    ["skills", /opts\.extendedCard\(principal\) should return card fields .* got string/],
    [[PRIVATE_SKILL], /should return card fields .* got an array/],
    [{ url: "https://elsewhere.test/" }, /opts\.extendedCard\(principal\) returned "url": an extended card replaces only name, description, version, provider, skills/],
    [{ capabilities: { extendedAgentCard: false } }, /returned "capabilities"/],
    [{ skills: [{ id: "x", name: "x", tags: [] }] }, /opts\.extendedCard\(principal\)\.skills\[0\]\.description should be a string/],
    [{ name: "" }, /opts\.extendedCard\(principal\)\.name should be a non-empty string/],
  ]
  for (const [fields, message] of cases) {
    const cards = new ExtendedCards({ extendedCard: () => fields as never })
    const err = await cards.cardFor("alice", publicCard()).catch((err: unknown) => err)
    t.type(err, TypeError)
    t.notOk(err instanceof A2AError)
    t.match((err as Error).message, message)
  }
  const thrown = new Error("directory down")
  await t.rejects(new ExtendedCards({ extendedCard: () => Promise.reject(thrown) }).cardFor("alice", publicCard()), thrown, "a failing host function's error goes up as it is")
})

t.test("signed when signing is on: the public card's signature is replaced by one over the extended card, which the SDK verifies", async (t) => {
  const signer = await CardSigner.create({ privateKey: generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" }) })
  const signedPublic = await signer.sign(publicCard())
  const cards = new ExtendedCards({ extendedCard: () => ({ skills: [PRIVATE_SKILL] }), signer })
  const card = await cards.cardFor("alice", signedPublic)
  t.equal(card.signatures?.length, 1)
  t.not(card.signatures?.[0].signature, signedPublic.signatures[0].signature)
  const verify = verifyAgentCardSignature(async () => signer.publicJwk)
  await t.resolves(verify(card as never))
  await t.rejects(verify({ ...card, skills: [PUBLIC_SKILL] } as never), "the signature covers the extended skills")
  t.notOk((await new ExtendedCards({ extendedCard: () => ({ skills: [PRIVATE_SKILL] }) }).cardFor("alice", signedPublic)).signatures, "unsigned without a signer: the public card's signature is not carried over")
})

t.test("the public card says whether an extended card is configured, in both versions' words", async (t) => {
  const off = (await (await build(t)).inject({ url: "/.well-known/agent-card.json" })).json()
  t.equal(off.capabilities.extendedAgentCard, false)
  t.equal(off.supportsAuthenticatedExtendedCard, false)
  const app = await build(t, { auth: { tokens: TOKENS }, extendedCard: () => ({ skills: [PRIVATE_SKILL] }) })
  for (const version of [undefined, "1.0"]) {
    const on = (await app.inject({ url: "/.well-known/agent-card.json", headers: version ? { "a2a-version": version } : {} })).json()
    t.equal(on.capabilities.extendedAgentCard, true, `1.0 field, read as ${version ?? "0.3"}`)
    t.equal(on.supportsAuthenticatedExtendedCard, true, `0.3 field, read as ${version ?? "0.3"}`)
    t.notOk(on.skills.some((skill: { id: string }) => skill.id === "payroll"), "the extended skills stay off the public card")
  }
})

t.test("bad extended card options fail at registration, naming the option", async (t) => {
  await t.rejects(build(t, { auth: { tokens: TOKENS }, extendedCard: { skills: [] } as never }), /toolnexus: opts\.extendedCard should be a function \(principal\) => card fields/)
  await t.rejects(build(t, { extendedCard: () => undefined }), /toolnexus: opts\.extendedCard needs opts\.auth/)
  // A card declaring an extended card the server cannot give would answer -32007; it is refused here instead.
  await t.rejects(build(t, { capabilities: { extendedAgentCard: true } } as never), /toolnexus: opts\.capabilities is not an option: the card's capabilities follow from the options/)
  await t.rejects(build(t, { supportsAuthenticatedExtendedCard: true } as never), /toolnexus: opts\.supportsAuthenticatedExtendedCard is not an option/)
})
