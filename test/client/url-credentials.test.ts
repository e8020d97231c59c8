import { spawn } from "node:child_process"
import pg from "pg"
import t from "tap"
import { createClient } from "../../lib/client/client.js"
import { hasCredentials, withoutPassword } from "../../lib/url-credentials.js"
import { CLI_BIN, PG_URL, ROOT, startCli } from "../fixtures/helpers.js"

const PASSWORD = "pw-s3cret-0123456789"

/** The error `fn` throws, or undefined when it throws none. */
function thrown(fn: () => unknown): Error | undefined {
  try {
    fn()
  } catch (err) {
    return err as Error
  }
  return undefined
}

t.test("withoutPassword hides the password and keeps the user; hasCredentials sees either", async (t) => {
  t.equal(withoutPassword(`postgres://app:${PASSWORD}@db:5432/x`), "postgres://app:***@db:5432/x")
  t.equal(withoutPassword("postgres://app@db/x"), "postgres://app@db/x")
  t.equal(withoutPassword(`not a url //u:${PASSWORD}@h`), "not a url //u:***@h")
  t.ok(hasCredentials(`https://u:${PASSWORD}@h/v1`))
  t.ok(hasCredentials("https://u@h/v1"))
  t.notOk(hasCredentials("https://h/v1"))
})

t.test("createClient refuses a baseUrl with credentials, and says where the key goes", async (t) => {
  for (const baseUrl of [`https://user:${PASSWORD}@127.0.0.1:1/v1`, `http://:${PASSWORD}@127.0.0.1:1`]) {
    const err = thrown(() => createClient({ baseUrl, style: "openai", model: "m" }))
    t.match(err, { name: "TypeError", message: /opts\.baseUrl should not carry a user or password.*opts\.apiKey \(TOOLNEXUS_API_KEY/ }, baseUrl)
    t.notMatch(err?.message ?? "", PASSWORD)
  }
})

t.test("createClient's error for a non-http baseUrl does not echo its password", async (t) => {
  const err = thrown(() => createClient({ baseUrl: `ftp://user:${PASSWORD}@host/v1`, style: "openai", model: "m" }))
  t.match(err, { message: /opts\.baseUrl should be an http\(s\) URL.*ftp:\/\/user:\*\*\*@host\/v1/ })
  t.notMatch(err?.message ?? "", PASSWORD)
})

t.test("the toolnexus command refuses a --base-url with a password as a usage error, without printing it", async (t) => {
  const args = ["--port", "0", "--store", "memory", "--log-format", "json", "--base-url", `https://user:${PASSWORD}@127.0.0.1:1/v1`, "--model", "m"]
  const child = spawn(process.execPath, [CLI_BIN, ...args], { cwd: ROOT })
  t.teardown(() => void child.kill("SIGKILL"))
  let output = ""
  // Either it exits, or it starts serving (the failure this test guards against) and says so.
  const outcome = await new Promise<string>((resolve) => {
    child.stdout.on("data", (chunk) => {
      output += chunk
      if (output.includes("toolnexus agent listening")) resolve("listening")
    })
    child.stderr.on("data", (chunk) => (output += chunk))
    child.once("exit", (code) => resolve(`exit ${code}`))
  })
  t.equal(outcome, "exit 2")
  t.match(output, /opts\.baseUrl should not carry a user or password/)
  t.notMatch(output, PASSWORD)
})

t.test("the toolnexus command's start-up line shows a postgres store without its password", async (t) => {
  const storeUrl = "postgres://postgres:pw@127.0.0.1:5432/test?table=toolnexus_url_credentials_test"
  t.teardown(async () => {
    // The command created its tables on start: leave the test database as it was.
    const admin = new pg.Pool({ connectionString: PG_URL, max: 1 })
    await admin.query(`DROP TABLE IF EXISTS "toolnexus_url_credentials_test", "toolnexus_url_credentials_test_pushcfg", "toolnexus_url_credentials_test_outbox", "toolnexus_url_credentials_test_dead"`)
    await admin.end()
  })
  const { child, lines } = await startCli(t, ["--port", "0", "--store", storeUrl, "--log-format", "json"])
  const listening = lines.find((line) => line.msg === "toolnexus agent listening")
  t.equal(listening?.store, "postgres://postgres:***@127.0.0.1:5432/test?table=toolnexus_url_credentials_test")
  t.notMatch(JSON.stringify(lines), ":pw@")
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  t.equal(await exited, 0)
})
