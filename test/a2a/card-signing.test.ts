import { canonicalizeAgentCard, verifyAgentCardSignature } from "@a2a-js/sdk"
import { ClientFactory } from "@a2a-js/sdk/client"
import { generateKeyPairSync } from "node:crypto"
import { writeFileSync } from "node:fs"
import path from "node:path"
import { decodeProtectedHeader, type JWK } from "jose"
import t, { type Test } from "tap"
import { publicAgentCard } from "../../lib/a2a/card.js"
import { canonicalCard, CardSigner } from "../../lib/a2a/card-signing.js"
import { createLocalClient } from "../../lib/client/client.js"
import { parseCli } from "../../lib/cli.js"
import type { ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { serve } from "../../plugins/serve.js"
import { a2aApp, tmpDir } from "../fixtures/helpers.js"

const client = createLocalClient(() => "pong")
// The SDK's verifier logs each signature it rejects with console.debug; the tests that expect a rejection say so themselves.
t.capture(console, "debug", () => {})
const CARD = "/.well-known/agent-card.json"
const TOKENS = { "card-test-secret-0123456789": "alice" }
const ed25519 = () => generateKeyPairSync("ed25519").privateKey
const p256 = () => generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey

const build = (t: Test, opts: Partial<ToolnexusA2AOptions> = {}) => a2aApp(t, { client, ...opts })

/** The SDK's own verifier, given the keys of the server's JWKS by kid. */
async function sdkVerifies(card: unknown, jwks: { keys: JWK[] }): Promise<void> {
  await verifyAgentCardSignature(async (kid) => {
    const key = jwks.keys.find((held) => held.kid === kid)
    if (!key) throw new Error(`no key ${kid}`)
    return key
  })(card as Parameters<ReturnType<typeof verifyAgentCardSignature>>[0])
}

t.test("the canonical payload is what the official SDK canonicalises, for every card the server serves and a card with every 1.0 field", async (t) => {
  const skills = [{ id: "desk", name: "Desk", description: "Tickets", tags: ["support"], examples: ["reset my password"], inputModes: ["text/plain"], outputModes: [] }]
  for (const version of ["0.3", "1.0"] as const) {
    for (const usesTokens of [false, true]) {
      for (const extendedAgentCard of [false, true]) {
        const card = publicAgentCard({ name: "n", skills, provider: { organization: "Acme", url: "https://acme.test" } }, "http://h.test/a/", { usesTokens, pushNotifications: true, extendedAgentCard }, version)
        t.equal(canonicalCard(card), canonicalizeAgentCard(card as never), `${version}, tokens ${usesTokens}, extended ${extendedAgentCard}`)
      }
    }
  }
  const everything = {
    name: "Full ✓ agent",
    description: "",
    supportedInterfaces: [{ url: "https://x.test/", protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "t1" }, { url: "x.test:50051", protocol_binding: "GRPC", protocolVersion: "1.0" }],
    provider: { organization: "Acme", url: "" },
    version: "1",
    documentationUrl: "https://docs.test/",
    iconUrl: "https://icon.test/i.png",
    capabilities: {
      streaming: false,
      pushNotifications: false,
      extensions: [
        { uri: "urn:a", required: false, params: { n: 1e21, small: 1e-7, nested: { empty: {}, s: "", list: [] }, é: "x", a: [3, "b"] } },
        { uri: "urn:b", description: "d", required: true },
      ],
      extended_agent_card: true,
    },
    securitySchemes: {
      oauth: {
        oauth2SecurityScheme: {
          description: "o",
          flows: { authorizationCode: { authorizationUrl: "https://a.test", tokenUrl: "https://t.test", scopes: { read: "Read", write: "" }, pkceRequired: true } },
          oauth2MetadataUrl: "https://m.test",
        },
      },
      device: { oauth2SecurityScheme: { flows: { device_code: { deviceAuthorizationUrl: "https://d.test", tokenUrl: "https://t.test", scopes: {} } } } },
      oidc: { open_id_connect_security_scheme: { openIdConnectUrl: "https://oidc.test" } },
      mtls: { mtlsSecurityScheme: { description: "client certificates" } },
      legacy: { type: "http", scheme: "bearer" },
      key: { apiKeySecurityScheme: { location: "header", name: "x-api-key" } },
    },
    securityRequirements: [{ schemes: { oauth: { list: ["read"] }, key: { list: [] } } }],
    security: [{ key: [] }],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: [],
    skills: [{ id: "s", name: "S", description: "d", tags: [], security_requirements: [{ schemes: { oauth: { list: ["write"] } } }], unknown: 1 }],
    url: "https://x.test/",
    protocolVersion: "0.3.0",
    signatures: [{ protected: "p", signature: "s" }],
  }
  t.equal(canonicalCard(everything), canonicalizeAgentCard(everything as never), "every field, oneof, snake_case name and empty value")
  t.notMatch(canonicalCard(everything), /signatures|"url":"https:\/\/x\.test\/","version"|preferredTransport|"security"/, "no signatures, no 0.3 fields")
  t.match(canonicalCard(everything), /"n":1e\+21/, "numbers as JCS (ECMAScript) writes them")
})

t.test("a signed card passes the official SDK's verifier, for Ed25519, P-256 and RSA keys, in both versions, with the key from the JWKS", async (t) => {
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey
  const keys = [
    { label: "Ed25519 PEM", cardSigning: { privateKey: ed25519().export({ type: "pkcs8", format: "pem" }).toString() }, alg: "EdDSA" },
    { label: "P-256 JWK", cardSigning: { privateKey: p256().export({ format: "jwk" }) }, alg: "ES256" },
    { label: "RSA PS256, own kid", cardSigning: { privateKey: JSON.stringify(rsa.export({ format: "jwk" })), alg: "PS256" as const, kid: "card-2026" }, alg: "PS256" },
  ]
  for (const { label, cardSigning, alg } of keys) {
    const app = await build(t, { cardSigning, auth: { tokens: TOKENS }, prefix: "/agents/desk" })
    const jwks = (await app.inject({ url: "/agents/desk/.well-known/jwks.json" })).json()
    for (const version of [undefined, "1.0"]) {
      const card = (await app.inject({ url: `/agents/desk${CARD}`, headers: { host: "h.test", ...(version && { "a2a-version": version }) } })).json()
      t.equal(card.signatures.length, 1, `${label}: one signature`)
      const header = decodeProtectedHeader(card.signatures[0])
      t.same(Object.keys(header).sort(), ["alg", "kid", "typ"], `${label}: the protected header says alg, kid and typ`)
      t.match(header, { alg, typ: "JOSE", kid: cardSigning.kid ?? /^[\w-]{43}$/ })
      await t.resolves(sdkVerifies(card, jwks), `${label}, version ${version ?? "0.3"}: the SDK verifies it`)
      const tampered = { ...card, skills: [...card.skills, { id: "x", name: "x", description: "x", tags: [] }] }
      await t.rejects(sdkVerifies(tampered, jwks), /No valid signatures/, `${label}: a changed card does not verify`)
    }
  }
})

t.test("the official client fetches the signed card and its getAgentCard verifier accepts it", async (t) => {
  const srv = await serve("127.0.0.1:0", { client, a2a: { store: "memory", cardSigning: { privateKey: p256().export({ type: "sec1", format: "pem" }).toString() } } })
  t.teardown(() => srv.close())
  const jwks = (await (await fetch(`${srv.url}/.well-known/jwks.json`)).json()) as { keys: JWK[] }
  const sdk = await new ClientFactory().createFromUrl(srv.url)
  const verified = await sdk.getAgentCard(undefined, (card) => sdkVerifies(card, jwks))
  t.equal(verified.signatures.length, 1)
})

t.test("the card is signed once per content: the same signature, the same ETag, a 304 to If-None-Match", async (t) => {
  // P-256 signatures are randomised, so equal signatures show the cache.
  const app = await build(t, { cardSigning: { privateKey: p256().export({ format: "jwk" }) }, auth: { tokens: TOKENS } })
  const read = (headers: Record<string, string> = {}) => app.inject({ url: CARD, headers: { host: "h.test", ...headers } })
  const first = await read()
  const again = await read()
  t.equal(first.statusCode, 200)
  t.equal(again.body, first.body, "the same bytes, signature and all")
  const etag = first.headers.etag as string
  t.match(etag, /^"[\w-]{27}"$/, "a strong ETag")
  t.equal(again.headers.etag, etag)
  t.equal(first.headers["cache-control"], "public, max-age=300")
  t.equal(first.headers.vary, "A2A-Version, Host, X-Forwarded-Host, X-Forwarded-Proto")
  t.match(first.headers["content-type"], /^application\/json/)

  for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
    const notModified = await read({ "if-none-match": ifNoneMatch })
    t.equal(notModified.statusCode, 304, `If-None-Match: ${ifNoneMatch}`)
    t.equal(notModified.body, "", "no body")
    t.equal(notModified.headers.etag, etag, "the ETag again")
    t.equal(notModified.headers["cache-control"], "public, max-age=300")
    t.ok(notModified.headers.vary)
  }
  t.equal((await read({ "if-none-match": '"stale"' })).statusCode, 200, "another tag gets the card")

  const v1 = await read({ "a2a-version": "1.0" })
  t.not(v1.headers.etag, etag, "the 1.0 form (other security fields) has its own ETag")
  t.equal((await read({ "a2a-version": "1.0", "if-none-match": etag })).statusCode, 200, "the 0.3 card's tag does not match the 1.0 card")
  const otherHost = await app.inject({ url: CARD, headers: { host: "other.test" } })
  t.not(otherHost.headers.etag, etag, "a card derived for another Host has its own ETag")
  t.equal((await app.inject({ url: CARD, headers: { host: "other.test" } })).headers.etag, otherHost.headers.etag)
})

t.test("an unsigned card has an ETag and Cache-Control too; a fixed URL varies by A2A-Version only", async (t) => {
  const app = await build(t, { url: "https://agents.acme.test/desk/" })
  const res = await app.inject({ url: CARD })
  t.notOk(res.json().signatures, "no signatures without a key")
  t.equal(res.headers.vary, "A2A-Version")
  t.equal(res.headers["cache-control"], "public, max-age=300")
  t.equal((await app.inject({ url: CARD, headers: { "if-none-match": res.headers.etag as string } })).statusCode, 304)
  t.equal((await app.inject({ url: CARD, headers: { "a2a-version": "1.0" } })).headers.etag, res.headers.etag, "without tokens both versions read the same card")

  const lastModified = res.headers["last-modified"] as string
  t.match(lastModified, /^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/, "a Last-Modified date beside the ETag")
  t.ok(Date.parse(lastModified) <= Date.now(), "not in the future")
  const since = (date: string, extra: Record<string, string> = {}) => app.inject({ url: CARD, headers: { "if-modified-since": date, ...extra } })
  t.equal((await since(lastModified)).statusCode, 304, "If-Modified-Since its own date: 304")
  t.equal((await since(new Date(Date.parse(lastModified) - 60_000).toUTCString())).statusCode, 200, "an earlier date gets the card")
  t.equal((await since("not a date")).statusCode, 200, "an unreadable date gets the card")
  t.equal((await since(lastModified, { "if-none-match": '"stale"' })).statusCode, 200, "If-None-Match, when sent, decides alone")
})

t.test("the card key joins the push key in the JWKS; without either there is no JWKS", async (t) => {
  const cardKey = ed25519()
  const both = await build(t, { cardSigning: { privateKey: cardKey.export({ format: "jwk" }), kid: "card" }, push: { signingKey: p256().export({ format: "jwk" }) } })
  const { keys } = (await both.inject({ url: "/.well-known/jwks.json" })).json()
  t.equal(keys.length, 2)
  t.match(keys.find((key: JWK) => key.kid === "card"), { kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig" })
  t.notOk(keys.some((key: JWK) => "d" in key), "public halves only")
  const same = await build(t, { cardSigning: { privateKey: cardKey.export({ format: "jwk" }) }, push: { signingKey: cardKey.export({ format: "jwk" }) } })
  t.equal((await same.inject({ url: "/.well-known/jwks.json" })).json().keys.length, 1, "one key used for both is listed once")
  const none = await build(t)
  t.equal((await none.inject({ url: "/.well-known/jwks.json" })).statusCode, 404)
})

t.test("CardSigner replaces the signatures a card had with its own", async (t) => {
  const signer = await CardSigner.create({ privateKey: ed25519().export({ format: "jwk" }) })
  const card = publicAgentCard({}, "http://h.test/", {}, "1.0")
  const signed = await signer.sign({ ...card, signatures: [{ protected: "old", signature: "old" }] })
  t.equal(signed.signatures.length, 1)
  t.not(signed.signatures[0].protected, "old")
  await sdkVerifies(signed, { keys: [signer.publicJwk] })
})

t.test("bad card signing options fail at registration, naming the option and never echoing the key", async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    ["key", /opts\.cardSigning should be \{ privateKey, kid\?, alg\? \}/],
    [{}, /opts\.cardSigning\.privateKey should be a private key for signing.*got undefined/],
    [{ privateKey: "-----BEGIN PRIVATE KEY-----\nSECRETBYTES\n-----END PRIVATE KEY-----" }, /opts\.cardSigning\.privateKey should be a private key for signing/],
    [{ privateKey: generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }) }, /opts\.cardSigning\.privateKey/],
    [{ privateKey: generateKeyPairSync("ec", { namedCurve: "P-384" }).privateKey.export({ format: "jwk" }) }, /not P-256/],
    [{ privateKey: ed25519().export({ format: "jwk" }), alg: "ES256" }, /opts\.cardSigning\.alg should be "EdDSA" for this ed25519 key, got "ES256"/],
    [{ privateKey: p256().export({ format: "jwk" }), alg: "HS256" }, /opts\.cardSigning\.alg should be "ES256"/],
    [{ privateKey: ed25519().export({ format: "jwk" }), kid: "" }, /opts\.cardSigning\.kid should be a non-empty string/],
  ]
  for (const [cardSigning, message] of cases) {
    const err = (await t.rejects(build(t, { cardSigning: cardSigning as never }), message)) as unknown
    t.notMatch(String(err), /SECRETBYTES/)
  }
})

t.test("--card-signing-key FILE (or TOOLNEXUS_CARD_SIGNING_KEY) reads and checks the key; serve() passes it on", async (t) => {
  const dir = tmpDir(t)
  const file = path.join(dir, "card.pem")
  writeFileSync(file, ed25519().export({ type: "pkcs8", format: "pem" }))
  const config = parseCli(["--card-signing-key", file], {})
  t.match(config, { cardSigning: { privateKey: /BEGIN PRIVATE KEY/ } })
  t.match(parseCli([], { TOOLNEXUS_CARD_SIGNING_KEY: file }), { cardSigning: { privateKey: /BEGIN PRIVATE KEY/ } })
  t.notOk((parseCli([], {}) as { cardSigning?: unknown }).cardSigning, "unsigned by default")
  t.throws(() => parseCli(["--card-signing-key", path.join(dir, "missing.pem")], {}), /--card-signing-key ".*missing\.pem" could not be read: ENOENT/)
  const bad = path.join(dir, "bad.pem")
  writeFileSync(bad, "-----BEGIN PRIVATE KEY-----\nSECRETBYTES\n-----END PRIVATE KEY-----")
  const err = t.throws(() => parseCli(["--card-signing-key", bad], {})) as Error
  t.match(err.message, /^--card-signing-key should be a private key/)
  t.notMatch(err.message, /SECRETBYTES/)
})
