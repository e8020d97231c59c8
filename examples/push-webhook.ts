// Push notifications, signed: the caller gives a webhook with its message and returns at once; the agent
// POSTs each of the Task's updates to the webhook, each with a JWT signed by the agent's key. The webhook
// checks every JWT against the public keys the agent publishes (its JWKS) and refuses (401) a request
// whose signature or body does not match, as a forged and a tampered notification show at the end.
// Run: npm run build && node dist/examples/push-webhook.js
import assert from "node:assert/strict"
import { createHash, generateKeyPairSync } from "node:crypto"
import http from "node:http"
import type { AddressInfo } from "node:net"
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, SignJWT } from "jose"
import { createLocalClient } from "toolnexus/client"
import { serve } from "toolnexus/fastify"

interface Body {
  statusUpdate?: { taskId: string; status: { state: string } }
  artifactUpdate?: { taskId: string }
}
/** A notification as it arrived: its headers and the exact body bytes (the signature covers those bytes). */
interface Received {
  headers: http.IncomingHttpHeaders
  raw: Buffer
}

// The agent's signing key. In production it is a key file (the CLI's --push-signing-key); here, a fresh one.
const signingKey = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
// iss in every JWT: the agent's `url` option when set, else its `name`.
const AGENT_NAME = "filer"

/**
 * Why a notification is refused, or undefined when it is genuine: signed by the agent, for this webhook, over these bytes.
 * `agentKeys` and `hookUrl` are set below, before the first notification comes.
 */
async function refusal({ headers, raw }: Received): Promise<string | undefined> {
  // Without a config of its own authentication, the JWT comes as a bearer token.
  const jwt = /^Bearer (\S+)$/.exec(headers.authorization ?? "")?.[1]
  if (jwt === undefined) return "no signature"
  try {
    // The signature against the agent's keys (by the JWT's kid), its issuer, its audience (this webhook's URL) and its expiry.
    const { payload } = await jwtVerify(jwt, agentKeys, { issuer: AGENT_NAME, audience: hookUrl })
    // The JWT names the body it was made for: the SHA-256 of its bytes, its Task and its Idempotency-Key (jti).
    if (payload.body_sha256 !== createHash("sha256").update(raw).digest("base64url")) return "the body is not the one that was signed"
    if (payload.jti !== headers["idempotency-key"]) return "the Idempotency-Key is not the one that was signed"
    const body = JSON.parse(raw.toString("utf8")) as Body
    if (payload.taskId !== (body.statusUpdate ?? body.artifactUpdate)?.taskId) return "the Task is not the one that was signed"
    return undefined
  } catch (err) {
    return (err as Error).message
  }
}

// The webhook: a plain HTTP server. A genuine notification is recorded once (a retry has the same
// Idempotency-Key, so a key seen before is acknowledged again and not handled twice).
const accepted = new Map<string, Received>()
let completed!: () => void
const done = new Promise<void>((resolve) => (completed = resolve))
const webhook = http.createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    const received = { headers: req.headers, raw: Buffer.concat(chunks) }
    void refusal(received).then((reason) => {
      if (reason !== undefined) return void res.writeHead(401, { "content-type": "text/plain" }).end(reason)
      res.writeHead(200).end()
      const key = String(req.headers["idempotency-key"])
      if (accepted.has(key)) return
      accepted.set(key, received)
      if ((JSON.parse(received.raw.toString("utf8")) as Body).statusUpdate?.status.state === "TASK_STATE_COMPLETED") completed()
    })
  })
})
await new Promise<void>((resolve) => webhook.listen(0, "127.0.0.1", resolve))
const hookUrl = `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/hooks/a2a`

// Webhooks on loopback or private addresses are refused unless allowed by name: this one is.
const agent = await serve("127.0.0.1:0", {
  client: createLocalClient(() => "report filed"),
  a2a: { name: AGENT_NAME, push: { allow: [new URL(hookUrl).host], signingKey } },
  logger: false,
})
// The agent's public keys: jose fetches <agent>/.well-known/jwks.json when it first needs them and caches them.
const agentKeys = createRemoteJWKSet(new URL(`${agent.url}/.well-known/jwks.json`))

/** POSTs to the webhook as the agent would; its HTTP status and answer. */
async function post(headers: http.IncomingHttpHeaders, body: string, authorization: string): Promise<string> {
  const res = await fetch(hookUrl, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": String(headers["idempotency-key"]), authorization },
    body,
  })
  return `${res.status} ${await res.text()}`
}

try {
  const res = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "SendMessage",
      params: {
        message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "file my report" }] },
        // Answer at once with the submitted Task; the rest comes to the webhook.
        configuration: { returnImmediately: true, taskPushNotificationConfig: { url: hookUrl, token: "hook-token-123" } },
      },
    }),
  })
  const { result } = (await res.json()) as { result: { task: { id: string; status: { state: string } } } }
  console.log(`sent: ${result.task.id} is ${result.task.status.state}`)

  await done
  for (const [key, { raw }] of accepted) {
    const body = JSON.parse(raw.toString("utf8")) as Body
    console.log(`webhook verified ${body.statusUpdate ? `status ${body.statusUpdate.status.state}` : "artifact"} (Idempotency-Key ${key})`)
    assert.equal((body.statusUpdate ?? body.artifactUpdate)?.taskId, result.task.id)
  }
  assert.ok([...accepted.values()].every(({ headers }) => headers["x-a2a-notification-token"] === "hook-token-123"), "every notification carries the caller's token too")

  // A forged notification: the same claims and the agent's kid, but signed with another key. Refused.
  const [genuine] = accepted.values()
  const jwt = String(genuine.headers.authorization).slice("Bearer ".length)
  const otherKey = generateKeyPairSync("ed25519").privateKey
  const forged = await new SignJWT(decodeJwt(jwt)).setProtectedHeader(decodeProtectedHeader(jwt) as { alg: string }).sign(otherKey)
  const forgedAnswer = await post(genuine.headers, genuine.raw.toString("utf8"), `Bearer ${forged}`)
  console.log(`a forged signature: ${forgedAnswer}`)
  assert.match(forgedAnswer, /^401 /)

  // A tampered notification: the agent's genuine JWT on a changed body. Refused, as its hash no longer matches.
  const tampered = genuine.raw.toString("utf8").replaceAll(result.task.id, "someone-elses-task")
  const tamperedAnswer = await post(genuine.headers, tampered, String(genuine.headers.authorization))
  console.log(`a genuine JWT on a changed body: ${tamperedAnswer}`)
  assert.equal(tamperedAnswer, "401 the body is not the one that was signed")
} finally {
  await agent.stop()
  await new Promise((resolve) => webhook.close(resolve))
}
console.log("ok: the webhook verified the Task's signed updates to completed, and refused a forged and a tampered one")
