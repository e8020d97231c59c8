import { spawn } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import t from "tap"
import { clientFor, parseCli } from "../lib/cli.js"
import { callRpc, CLI_BIN, postRpc, ROOT, rpc, startCli, tmpDir } from "./helpers.js"

t.test("parseCli: defaults, env and flags", async (t) => {
  t.same(parseCli([], {}), { host: "127.0.0.1", port: 4000, store: "file:./.toolnexus/tasks", name: "toolnexus agent" })
  t.same(parseCli(["--port", "0", "--store", "memory", "--host", "::1"], { TOOLNEXUS_PORT: "9" }), { host: "::1", port: 0, store: "memory", name: "toolnexus agent" })
  const withModel = parseCli(["--model", "gpt-x"], { TOOLNEXUS_BASE_URL: "http://127.0.0.1:1/v1", TOOLNEXUS_STYLE: "anthropic", TOOLNEXUS_API_KEY: "k" })
  t.same(withModel !== "help" && withModel.model, { baseUrl: "http://127.0.0.1:1/v1", style: "anthropic", model: "gpt-x", apiKey: "k" })
  t.equal(parseCli(["-h"], {}), "help")
  t.throws(() => parseCli(["--port", "http"], {}), /--port should be a number/)
  t.throws(() => parseCli(["--style", "gemini"], {}), /--style should be "openai" or "anthropic"/)
  t.throws(() => parseCli(["--base-url", "http://x"], {}), /no --model/)
  t.throws(() => parseCli(["--model", "m"], {}), /no --base-url/)
  const withTokens = parseCli([], { TOOLNEXUS_TOKENS: "s3cr3t-0123456789abc=alice, other=secret=bob" })
  t.same(withTokens !== "help" && withTokens.tokens, { "s3cr3t-0123456789abc": "alice", "other=secret": "bob" }, "the last = splits secret from principal")
  t.throws(() => parseCli([], { TOOLNEXUS_TOKENS: "hunter2-no-principal" }), /entry 1 should be secret=principal/)
  t.notMatch(String((() => { try { parseCli([], { TOOLNEXUS_TOKENS: "hunter2-no-principal" }) } catch (e) { return e } })()), /hunter2/, "the secret is not echoed")
  t.throws(() => parseCli(["--api-key", "x"], {}), /Unknown option/)
})

t.test("clientFor: the offline echo agent, or the configured model", async (t) => {
  const echo = clientFor({ host: "", port: 0, store: "memory", name: "x" })
  t.equal(echo.model, "offline-echo")
  t.equal((await echo.run("hello")).text, "echo: hello")
  const real = clientFor({ host: "", port: 0, store: "memory", name: "x", model: { baseUrl: "http://127.0.0.1:1", style: "openai", model: "m" } })
  t.equal(real.model, "m")
})

t.test("the toolnexus command serves the echo agent on the file store and stops on SIGTERM", async (t) => {
  const dir = tmpDir(t)
  const { url, child, lines } = await startCli(t, ["--port", "0", "--store", `file:${dir}`], { TOOLNEXUS_BASE_URL: "" })
  t.match(url, /^http:\/\/127\.0\.0\.1:\d+$/)

  const res = await callRpc(url, rpc("SendMessage", { message: { role: "user", parts: [{ kind: "text", text: "hello" }] }, configuration: { blocking: true } }))
  t.equal(res.result.status.state, "completed")
  t.equal(res.result.artifacts[0].parts[0].text, "echo: hello")
  t.ok(fs.existsSync(path.join(dir, `${res.result.id}.json`)), "the task is on disk")
  t.ok(lines.some((l) => l.level === 40 && /offline echo agent/.test(String(l.msg))), "the log says it is the offline echo agent")

  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  t.equal(await exited, 0, "exits cleanly on SIGTERM")
})

t.test("the toolnexus command refuses bad flags with its usage", async (t) => {
  const child = spawn(process.execPath, [CLI_BIN, "--port", "nope"], { cwd: ROOT })
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  t.equal(code, 2)
  t.match(stderr, /--port should be a number/)
  t.match(stderr, /Usage: toolnexus/)
})

t.test("the toolnexus command asks for credentials when TOOLNEXUS_TOKENS is set", async (t) => {
  const secret = "cli-secret-0123456789abcdef"
  const { url } = await startCli(t, ["--port", "0", "--store", "memory"], { TOOLNEXUS_TOKENS: `${secret}=ops` })
  const get = (headers: Record<string, string>) => postRpc(url, rpc("GetTask", { id: "x" }), headers)
  t.equal((await get({})).status, 401)
  const allowed = await get({ authorization: `Bearer ${secret}` })
  t.equal(allowed.status, 200)
  t.equal(((await allowed.json()) as { error: { code: number } }).error.code, -32001)
})
