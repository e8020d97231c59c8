import { spawn } from "node:child_process"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { serve, type ServeOptions } from "../../plugins/serve.js"
import { CLI_BIN, ROOT, startCli } from "../fixtures/helpers.js"

const CARD = "/.well-known/agent-card.json"

async function agent(t: Test, opts: Partial<ServeOptions> = {}) {
  const served = await serve("127.0.0.1:0", { client: createLocalClient(() => "ok"), logger: false, ...opts })
  t.teardown(() => served.stop())
  return served.app
}

t.test("a pinned a2a.url is the card's URL whatever the Host header says, and the card does not vary by Host", async (t) => {
  const app = await agent(t, { a2a: { url: "https://agents.acme.test/desk/" } })
  const res = await app.inject({ url: CARD, headers: { host: "evil.example", "x-forwarded-host": "evil.example" } })
  t.equal(res.json().url, "https://agents.acme.test/desk/")
  t.equal(res.headers.vary, "A2A-Version")
})

t.test("without a pinned URL, forwarded headers count only when the proxy is trusted, and Vary names them", async (t) => {
  const untrusting = await agent(t)
  const plain = await untrusting.inject({ url: CARD, headers: { host: "agent.test:8080", "x-forwarded-host": "evil.example", "x-forwarded-proto": "https" } })
  t.equal(plain.json().url, "http://agent.test:8080/", "X-Forwarded-* are ignored by default")
  t.equal(plain.headers.vary, "A2A-Version, Host, X-Forwarded-Host, X-Forwarded-Proto")

  // light-my-request sends from 127.0.0.1, the proxy trusted here.
  const trusting = await agent(t, { trustProxy: "127.0.0.1" })
  const proxied = await trusting.inject({ url: CARD, headers: { host: "10.0.0.5:4000", "x-forwarded-host": "agents.acme.test", "x-forwarded-proto": "https" } })
  t.equal(proxied.json().url, "https://agents.acme.test/")
})

t.test("a2a.url must be a plain http(s) URL", async (t) => {
  for (const url of ["agents.acme.test", "ftp://agents.acme.test/", "https://u:pw-s3cret@agents.acme.test/"]) {
    await t.rejects(agent(t, { a2a: { url } }), { message: /opts\.url should be the http\(s\) URL peers reach the agent at, without a user or password/ }, url)
  }
})

t.test("the toolnexus command's --public-url pins the card's URL", async (t) => {
  const { url, child } = await startCli(t, ["--port", "0", "--store", "memory", "--log-format", "json", "--public-url", "https://agents.acme.test/desk/"])
  const card = (await (await fetch(`${url}${CARD}`)).json()) as { url: string }
  t.equal(card.url, "https://agents.acme.test/desk/")
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  t.equal(await exited, 0)
})

t.test("the toolnexus command refuses a --public-url that is not a plain http(s) URL, without echoing a password", async (t) => {
  const child = spawn(process.execPath, [CLI_BIN, "--port", "0", "--store", "memory", "--public-url", "https://u:pw-s3cret@agents.acme.test/"], { cwd: ROOT })
  t.teardown(() => void child.kill("SIGKILL"))
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  t.equal(code, 2)
  t.match(stderr, /--public-url should be the http\(s\) URL peers reach the agent at/)
  t.notMatch(stderr, "pw-s3cret")
})
