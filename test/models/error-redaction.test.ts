import t from "tap"
import { createClient } from "../../lib/client/client.js"
import { modelServer } from "../fixtures/helpers.js"

const KEY = "sk-straddle-0123456789abcdefghijklmnop"
// The error body is shown up to 200 characters: the key starts before that cut and ends after it.
const STRADDLING = `${"x".repeat(190)}${KEY} and more`

t.test("a non-2xx body echoing the key across the 200-character cut shows none of the key", async (t) => {
  const server = await modelServer(t, [{ status: 400, text: STRADDLING }])
  const client = createClient({ baseUrl: server.url, style: "openai", model: "m", apiKey: KEY, maxRetries: 0 })
  const err = (await client.run("hi").catch((e: unknown) => e)) as Error

  t.match(err.message, /^openai model endpoint answered 400 Bad Request: x{190}\[redacted\]/)
  t.notMatch(err.message, KEY.slice(0, 8), "not even the key's start")
})

t.test("a 2xx body that is not a chat completion, echoing the key across the cut, shows none of the key", async (t) => {
  const server = await modelServer(t, [{ status: 200, text: STRADDLING }])
  const client = createClient({ baseUrl: server.url, style: "anthropic", model: "m", headers: { "x-api-key": KEY }, maxRetries: 0 })
  const err = (await client.run("hi").catch((e: unknown) => e)) as Error

  t.match(err.message, /answered with something that is not .*: x{190}\[redacted\]/)
  t.notMatch(err.message, KEY.slice(0, 8), "not even the key's start")
})

t.test("an endpoint's own error message is cut too, after redaction: a huge one does not become a huge status.message", async (t) => {
  const huge = `${"y".repeat(995)}${KEY}${"z".repeat(100_000)}`
  const server = await modelServer(t, [{ status: 400, text: JSON.stringify({ error: { message: huge } }) }])
  const client = createClient({ baseUrl: server.url, style: "openai", model: "m", apiKey: KEY, maxRetries: 0 })
  const err = (await client.run("hi").catch((e: unknown) => e)) as Error

  t.match(err.message, /^openai model endpoint answered 400 Bad Request: y{995}\[re/)
  t.ok(err.message.length < 1100, `cut to about 1000 characters, got ${err.message.length}`)
  t.notMatch(err.message, KEY.slice(0, 8), "not even the key's start")
})
