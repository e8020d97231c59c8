import { generateKeyPairSync } from "node:crypto"
import t from "tap"
import { renderPayload } from "../../lib/push/payload.js"
import { backoffDelay, outcomeOfStatus } from "../../lib/push/retry.js"
import { parseRetryAfter } from "../../lib/retry-after.js"
import { loadSigningKey } from "../../lib/push/signer.js"
import { sampleTask } from "../fixtures/helpers.js"

t.test("what an answer means: 2xx delivered; 408, 429 and 5xx retried; redirects and other 4xx final", async (t) => {
  const now = Date.parse("2026-01-01T00:00:00Z")
  for (const status of [200, 201, 202, 204, 299]) t.same(outcomeOfStatus(status, undefined, now), { kind: "delivered" }, `${status}`)
  for (const status of [408, 429, 500, 502, 503, 504, 599]) t.match(outcomeOfStatus(status, undefined, now), { kind: "retry", error: `HTTP ${status}` }, `${status}`)
  for (const status of [301, 302, 307, 308]) t.match(outcomeOfStatus(status, undefined, now), { kind: "final", reason: /redirect, which is not followed/ }, `${status}`)
  for (const status of [400, 401, 403, 404, 410, 413, 422]) t.match(outcomeOfStatus(status, undefined, now), { kind: "final", reason: /refused by the receiver/ }, `${status}`)
  t.same(outcomeOfStatus(503, "7", now), { kind: "retry", error: "HTTP 503", retryAfterMs: 7000 })
  t.same(outcomeOfStatus(404, "7", now).kind, "final", "Retry-After does not make a final answer retryable")
})

t.test("Retry-After: delta-seconds or an HTTP date; anything else is ignored", async (t) => {
  const now = Date.parse("2026-01-01T00:00:00Z")
  t.equal(parseRetryAfter("120", now), 120_000)
  t.equal(parseRetryAfter(" 0 ", now), 0)
  t.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now), 30_000)
  t.equal(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now), 0, "a date in the past: at once")
  t.equal(parseRetryAfter(undefined, now), undefined)
  t.equal(parseRetryAfter("soon", now), undefined)
  t.equal(parseRetryAfter("-5", now), undefined)
})

t.test("backoff: full jitter under a ceiling that doubles per attempt up to the maximum", async (t) => {
  const backoff = { baseMs: 1000, maxMs: 600_000 }
  t.equal(backoffDelay(backoff, 1, () => 0.999999), 999)
  t.equal(backoffDelay(backoff, 3, () => 0.5), 2000)
  t.equal(backoffDelay(backoff, 30, () => 0.5), 300_000, "capped at maxMs")
  t.equal(backoffDelay(backoff, 5000, () => 0.5), 300_000, "a huge attempt count does not overflow")
  t.equal(backoffDelay(backoff, 4, () => 0), 0)
})

t.test("payloads: an artifact event whose artifact is gone posts the whole Task in 1.0", async (t) => {
  const task = sampleTask("t1", "completed")
  const payload = renderPayload({ kind: "artifact", task, artifactIndex: 3 }, "1.0")
  t.same(Object.keys(JSON.parse(payload.body)), ["task"])
  t.equal(payload.contentType, "application/a2a+json")
  t.same(JSON.parse(renderPayload({ kind: "status", task }, "0.3").body).status.state, "completed")
})

t.test("signing keys: PEM or JWK of Ed25519, P-256 or RSA >= 2048; anything else refused naming the option, never echoing the key", async (t) => {
  const ed = generateKeyPairSync("ed25519")
  t.equal(loadSigningKey(ed.privateKey.export({ type: "pkcs8", format: "pem" })).alg, "EdDSA")
  t.equal(loadSigningKey(ed.privateKey.export({ format: "jwk" })).alg, "EdDSA", "a JWK object")
  t.equal(loadSigningKey(JSON.stringify(ed.privateKey.export({ format: "jwk" }))).alg, "EdDSA", "JWK text")
  const ec = generateKeyPairSync("ec", { namedCurve: "P-256" })
  t.equal(loadSigningKey(ec.privateKey.export({ type: "sec1", format: "pem" })).alg, "ES256")
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 })
  t.equal(loadSigningKey(rsa.privateKey.export({ type: "pkcs1", format: "pem" })).alg, "RS256")
  t.throws(() => loadSigningKey(ed.publicKey.export({ type: "spki", format: "pem" })), /push\.signingKey should be a private key/, "a public key")
  t.throws(() => loadSigningKey(generateKeyPairSync("ec", { namedCurve: "P-384" }).privateKey.export({ type: "pkcs8", format: "pem" })), /EC key on secp384r1, not P-256/)
  t.throws(() => loadSigningKey(generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey.export({ type: "pkcs8", format: "pem" })), /RSA key has 1024 bits/)
  t.throws(() => loadSigningKey({ kty: "oct", k: "c2VjcmV0LXNlY3JldA" }), /push\.signingKey/)
  t.throws(() => loadSigningKey(42), /push\.signingKey should be .*, got number/)
  const secret = "-----BEGIN PRIVATE KEY-----\nTOTALLYSECRETBYTES\n-----END PRIVATE KEY-----"
  const err = t.throws(() => loadSigningKey(secret)) as Error
  t.notOk(err.message.includes("TOTALLYSECRET"), "the key's text is not in the message")
})

t.test("push options: each delivery setting refused with a message naming it; a good set passes", async (t) => {
  const { checkPushOptions, senderSettings } = await import("../../lib/push/options.js")
  t.doesNotThrow(() => checkPushOptions({ timeoutMs: 5000, maxAttempts: 3, maxAge: "2h", maxInFlight: 10, maxInFlightPerOrigin: 2, retryBaseMs: 100, retryMaxMs: 1000 }))
  for (const key of ["timeoutMs", "retryBaseMs", "retryMaxMs"]) {
    t.throws(() => checkPushOptions({ [key]: 0 }), new RegExp(`opts\\.push\\.${key} should be a positive integer number of milliseconds`))
    t.throws(() => checkPushOptions({ [key]: 2 ** 31 }), new RegExp(`opts\\.push\\.${key}`))
  }
  for (const key of ["maxAttempts", "maxInFlight", "maxInFlightPerOrigin"]) t.throws(() => checkPushOptions({ [key]: 1.5 }), new RegExp(`opts\\.push\\.${key} should be a positive integer`))
  t.throws(() => checkPushOptions({ maxAge: "soon" }), /opts\.push\.maxAge should be a number of ms > 0, or a duration/)
  t.throws(() => checkPushOptions({ maxAge: 0 }), /opts\.push\.maxAge/)
  t.throws(() => checkPushOptions({ signingKey: "not a key" }), /^toolnexus: opts\.push\.signingKey should be a private key/)
  t.same(senderSettings({ maxAge: "2h", retryBaseMs: 50 }).maxAgeMs, 7_200_000)
  t.same(senderSettings({ retryBaseMs: 50 }).backoff, { baseMs: 50, maxMs: 600_000 })
  t.same(senderSettings(undefined).allow.entries, [])
})
