import Fastify from "fastify"
import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { toolnexusA2A } from "../../plugins/a2a.js"

/*
 * One rule for answers sent whatever version was asked for (docs/README.md, "Versions, tenants and the card, in brief"): the version asked
 * for, or 0.3 when the server speaks no such version. Both the agent card and an HTTP-level error
 * body follow it, so an unknown A2A-Version reads exactly like a request with no header.
 */

const SECRET = "version-fallback-secret-0123"

t.test("the agent card and an error body both answer an unknown A2A-Version in the 0.3 form", async (t) => {
  const app = Fastify()
  await app.register(toolnexusA2A, { client: createLocalClient(() => "ok"), auth: { tokens: { [SECRET]: "ops" } } })
  t.teardown(() => app.close())

  const card = async (version?: string) =>
    (await app.inject({ url: "/.well-known/agent-card.json", headers: version === undefined ? {} : { "a2a-version": version } })).json()
  // An unparsable body with a good token: refused at the HTTP level (-32700), before the dispatcher runs.
  const refusal = async (version?: string) =>
    (
      await app.inject({
        method: "POST",
        url: "/",
        headers: { "content-type": "application/json", authorization: `Bearer ${SECRET}`, ...(version === undefined ? {} : { "a2a-version": version }) },
        payload: "{not json",
      })
    ).json()

  const [card03, card10] = [await card(), await card("1.0")]
  const [error03, error10] = [await refusal(), await refusal("1.0")]
  t.notSame(card03.securitySchemes, card10.securitySchemes, "the two versions' cards differ, so the comparison below can tell them apart")
  t.notSame(error03.error, error10.error, "so do the two versions' error bodies")
  t.match(error03.error, { code: -32700 })

  for (const unknown of ["2.0", "0.2", "latest"]) {
    t.same(await card(unknown), card03, `the card for A2A-Version ${unknown} is the 0.3 card`)
    t.same(await refusal(unknown), error03, `the error body for A2A-Version ${unknown} is the 0.3 error body`)
  }
})

t.test("a JSON-RPC call with an unknown A2A-Version gets -32009 in the same 0.3 form", async (t) => {
  const app = Fastify()
  await app.register(toolnexusA2A, { client: createLocalClient(() => "ok") })
  t.teardown(() => app.close())
  const call = async (version: string) =>
    (
      await app.inject({
        method: "POST",
        url: "/",
        headers: { "content-type": "application/json", "a2a-version": version },
        payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }),
      })
    ).json()
  const answer = await call("2.0")
  t.equal(answer.error.code, -32009)
  t.notOk(Array.isArray(answer.error.data), "0.3 details are an object, not 1.0's list of ErrorInfo")
  t.same(answer.error.data, { supportedVersions: ["1.0", "0.3"] })
})
