import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { a2aApp, injectRpc, rpc, userMessage, waitFor } from "../fixtures/helpers.js"
import { receiver } from "../fixtures/push-receiver.js"

const ALICE = "alice-secret-0123456789"
const BOB = "bob-secret-0123456789ab"
const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` })

t.test("GET <prefix>/push/dead-letters: an operator reads what was given up on, each principal only its own, without bodies or credentials", async (t) => {
  const hook = await receiver(t) // refuses (503) every notification
  const store = new InMemoryTaskStore()
  const app = await a2aApp(t, {
    client: createLocalClient(() => "done"),
    store,
    auth: { tokens: { [ALICE]: "alice", [BOB]: "bob" } },
    // One failed attempt and a notification is dead.
    push: { allow: [hook.host], maxAttempts: 1 },
  })
  const send = (secret: string, path: string) =>
    injectRpc(
      app,
      rpc("SendMessage", { message: userMessage("hi"), configuration: { blocking: true, pushNotificationConfig: { url: hook.url(path), authentication: { schemes: ["Bearer"], credentials: "webhook-credential" } } } }),
      bearer(secret),
    )
  const alices = (await send(ALICE, "/alice")).json().result.id as string
  const bobs = (await send(BOB, "/bob")).json().result.id as string
  // submitted, working, completed (0.3: the whole Task each time, the completion's artifact inside it): three each.
  await waitFor(async () => (await store.push.listDeadLetters(100)).length === 6, 10_000, "every notification dead")

  const read = (headers: Record<string, string>, query = "") => app.inject({ method: "GET", url: `/push/dead-letters${query}`, headers })
  const alice = await read(bearer(ALICE))
  t.equal(alice.statusCode, 200)
  const letters = alice.json().deadLetters as Array<Record<string, unknown>>
  t.equal(letters.length, 3, "alice's three")
  t.ok(letters.every((letter) => letter.taskId === alices), "none of bob's")
  t.match(letters[0], { configId: alices, reason: /failed 1 times \(maxAttempts\)/, attempts: 1, kind: "status", state: /submitted|working|completed/, deadAt: /^\d{4}-/ })
  t.notMatch(alice.body, /webhook-credential/, "no credential")
  t.notMatch(alice.body, /"history"|"artifacts"/, "no Task body")
  t.equal(alice.headers["cache-control"], "no-store")

  t.same(((await read(bearer(BOB), "?limit=2")).json().deadLetters as Array<{ taskId: string }>).map((letter) => letter.taskId), [bobs, bobs], "bob's, as many as asked")
  t.equal((await read({})).statusCode, 401, "behind the A2A routes' authentication")
  const bad = await read(bearer(ALICE), "?limit=0")
  t.equal(bad.statusCode, 400)
  t.match(bad.json(), { error: /limit should be a whole number from 1 to 1000/ })
})

t.test("without a push capability (push: false) there is no dead-letter route", async (t) => {
  const app = await a2aApp(t, { client: createLocalClient(() => "done"), push: false })
  t.equal((await app.inject({ method: "GET", url: "/push/dead-letters" })).statusCode, 404)
})
