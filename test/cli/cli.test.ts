import { spawn } from "node:child_process"
import { generateKeyPairSync } from "node:crypto"
import fs from "node:fs"
import https from "node:https"
import { connect } from "node:net"
import os from "node:os"
import path from "node:path"
import readline from "node:readline"
import { stripVTControlCharacters } from "node:util"
import t from "tap"
import { clientFor, parseCli, USAGE } from "../../lib/cli.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { NatsTaskStore } from "../../lib/stores/nats/store.js"
import { PostgresTaskStore } from "../../lib/stores/postgres/store.js"
import { resolveStore } from "../../lib/stores/resolve.js"
import { createLocalClient } from "../../lib/client/client.js"
import { serve } from "../../plugins/serve.js"
import { callRpc, CLI_BIN, closedPort, modelServer, openAIText, postRpc, ROOT, rpc, selfSignedCertificate, startCli, tmpDir, userMessage } from "../fixtures/helpers.js"

t.test("parseCli: defaults, env and flags", async (t) => {
  const retention = { terminalTtl: "30d" }
  t.same(parseCli([], {}), { host: "127.0.0.1", port: 4000, store: "file:./.toolnexus/tasks", retention, name: "toolnexus agent", logFormat: "json", drainDelayMs: 5000 })
  t.same(parseCli(["--port", "0", "--store", "memory", "--host", "::1"], { TOOLNEXUS_PORT: "9" }), { host: "::1", port: 0, store: "memory", retention, name: "toolnexus agent", logFormat: "json", drainDelayMs: 5000 })
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

t.test("parseCli: --retention / TOOLNEXUS_RETENTION, 30 days unless told, \"off\" keeps every finished Task", async (t) => {
  const retention = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    return config === "help" ? config : config.retention
  }
  t.same(retention([]), { terminalTtl: "30d" }, "the default: 30 days")
  t.same(retention(["--retention", "12h"]), { terminalTtl: "12h" })
  t.same(retention([], { TOOLNEXUS_RETENTION: "7d" }), { terminalTtl: "7d" }, "from the environment")
  t.same(retention(["--retention", "90m"], { TOOLNEXUS_RETENTION: "7d" }), { terminalTtl: "90m" }, "the flag wins over the environment")
  t.same(retention([], { TOOLNEXUS_RETENTION: "" }), { terminalTtl: "30d" }, "an empty variable counts as unset, like every other")
  t.equal(retention(["--retention", "off"]), undefined, '"off": no retention, finished Tasks are kept')
  t.equal(retention([], { TOOLNEXUS_RETENTION: "off" }), undefined)
  for (const bad of ["forever", "30", "-1d", "30 days"]) {
    t.throws(() => parseCli([`--retention=${bad}`], {}), { message: `--retention should be a duration such as 30d, 12h or 90m, or "off" to keep finished Tasks, got ${JSON.stringify(bad)}` }, JSON.stringify(bad))
  }
  t.match(USAGE, /--retention DURATION .*\n.*TOOLNEXUS_RETENTION, default 30d/, "the usage text names the flag, the variable and the default")
})

t.test("parseCli: the log format is pretty on a terminal and JSON lines otherwise, unless a flag or TOOLNEXUS_LOG_FORMAT says", async (t) => {
  const format = (argv: string[], env: NodeJS.ProcessEnv, tty: boolean) => {
    const config = parseCli(argv, env, tty)
    return config === "help" ? config : config.logFormat
  }
  t.equal(format([], {}, false), "json", "not a terminal: JSON lines")
  t.equal(format([], {}, true), "pretty", "a terminal: pretty")
  t.equal(format(["--log-format", "json"], {}, true), "json", "the flag turns pretty off on a terminal")
  t.equal(format(["--log-format", "pretty"], {}, false), "pretty", "and pretty on elsewhere")
  t.equal(format([], { TOOLNEXUS_LOG_FORMAT: "json" }, true), "json", "so does the environment variable")
  t.equal(format(["--log-format", "pretty"], { TOOLNEXUS_LOG_FORMAT: "json" }, false), "pretty", "the flag wins over the environment")
  t.throws(() => parseCli(["--log-format", "yaml"], {}), /--log-format should be "pretty" or "json", got "yaml"/)
  t.throws(() => parseCli([], { TOOLNEXUS_LOG_FORMAT: "text" }), /--log-format should be "pretty" or "json", got "text"/)
})

t.test("--help lists every store selector resolveStore accepts, and each example it shows opens that store", async (t) => {
  const help = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [CLI_BIN, "--help"], { cwd: ROOT })
    let out = ""
    child.stdout.on("data", (chunk) => (out += chunk))
    child.once("error", reject)
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`--help exited with ${code}`))))
  })
  t.equal(help.trim(), USAGE)
  // The resolver names the forms it accepts in its refusal: each string form is in the help.
  const refusal = (() => {
    try {
      resolveStore("no-such-store")
    } catch (err) {
      return (err as Error).message
    }
    return ""
  })()
  const forms = [...refusal.matchAll(/"([^"]+)"/g)].map((m) => m[1].replace(/…$/, "")).filter((form) => form !== "no-such-store")
  t.same(forms, ["memory", "file:<dir>", "postgres://", "nats://"], "the forms the resolver names")
  for (const form of forms) t.ok(help.includes(form), `--help names ${form}`)

  // The example under --store, with placeholders filled in, resolves to its store (the network ones connect on first use only).
  const examples = [...help.matchAll(/^ {25}(\S+)/gm)].map((m) => m[1])
  t.same(examples, ["memory", "file:<dir>", "postgres://USER@HOST/DB", "nats://HOST:4222"])
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-cli-help-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const classes = [InMemoryTaskStore, FileTaskStore, PostgresTaskStore, NatsTaskStore]
  for (const [i, example] of examples.entries()) {
    const selector = example.replace("<dir>", dir).replace("USER@HOST/DB", "user@127.0.0.1/db").replace("HOST", "127.0.0.1")
    const store = resolveStore(selector)
    t.type(store, classes[i], `${example} opens a ${classes[i].name}`)
    await store.close?.()
  }
})

t.test("parseCli: timeouts, stream caps and heartbeat from flags or environment, in ms or with a unit", async (t) => {
  const limits = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    return config === "help" ? undefined : { timeouts: config.timeouts, streams: config.streams }
  }
  t.same(limits([]), { timeouts: undefined, streams: undefined }, "none set: serve() and the plugin keep their defaults")
  t.same(limits(["--request-timeout", "45s", "--headers-timeout", "5000", "--idle-timeout", "2m", "--max-streams", "200", "--max-streams-per-principal", "20", "--stream-heartbeat", "500ms"]), {
    timeouts: { requestMs: 45_000, headersMs: 5000, idleMs: 120_000 },
    streams: { maxStreams: 200, maxStreamsPerPrincipal: 20, streamHeartbeatMs: 500 },
  })
  t.same(
    limits(["--max-streams", "7"], { TOOLNEXUS_MAX_STREAMS: "9", TOOLNEXUS_IDLE_TIMEOUT: "90s", TOOLNEXUS_STREAM_HEARTBEAT: "", TOOLNEXUS_MAX_STREAMS_PER_PRINCIPAL: "3" }),
    { timeouts: { idleMs: 90_000 }, streams: { maxStreams: 7, maxStreamsPerPrincipal: 3 } },
    "the flag wins over the environment; an empty variable is unset",
  )
  for (const [flag, value] of [
    ["--request-timeout", "soon"],
    ["--request-timeout", "0"],
    ["--headers-timeout=-5s", "-5s"],
    ["--idle-timeout", "0.5ms"],
    ["--idle-timeout", "30 seconds"],
    ["--stream-heartbeat", "25d"],
  ]) {
    const argv = flag.includes("=") ? [flag] : [flag, value]
    t.throws(() => parseCli(argv, {}), new RegExp(`^${flag.split("=")[0]} should be a duration from 1 ms to 24 days: .*got ${JSON.stringify(value)}`), `${flag} ${value}`)
  }
  for (const [flag, value] of [["--max-streams", "0"], ["--max-streams", "lots"], ["--max-streams-per-principal", "1.5"], ["--max-streams-per-principal=-1", "-1"]]) {
    const argv = flag.includes("=") ? [flag] : [flag, value]
    t.throws(() => parseCli(argv, {}), new RegExp(`^${flag.split("=")[0]} should be a whole number of 1 or more, got`), `${flag} ${value}`)
  }
  t.throws(() => parseCli([], { TOOLNEXUS_MAX_STREAMS: "none" }), /^--max-streams should be a whole number/, "a bad variable names its flag too")
  t.throws(() => parseCli(["--request-timeout", "5s", "--headers-timeout", "6s"], {}), /--headers-timeout \(6000 ms\) should be at most --request-timeout \(5000 ms\)/)
})

t.test("parseCli: --push-allow / TOOLNEXUS_PUSH_ALLOW, HOST[:PORT] entries comma-separated", async (t) => {
  const push = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    return config === "help" ? undefined : config.push
  }
  t.equal(push([]), undefined, "none: the plugin's default (no host allowed)")
  t.same(push(["--push-allow", "hooks.internal, 127.0.0.1:8080,[::1]:9000"]), { allow: ["hooks.internal", "127.0.0.1:8080", "[::1]:9000"] })
  t.same(push(["--push-allow", "a.internal"], { TOOLNEXUS_PUSH_ALLOW: "b.internal" }), { allow: ["a.internal"] }, "the flag wins")
  t.same(push([], { TOOLNEXUS_PUSH_ALLOW: "b.internal:443" }), { allow: ["b.internal:443"] })
  t.equal(push([], { TOOLNEXUS_PUSH_ALLOW: "" }), undefined, "an empty variable is unset")
  t.throws(() => parseCli(["--push-allow", "http://hooks.internal/"], {}), /^--push-allow: push allow-list entry "http:\/\/hooks\.internal\/" is not a host name or address; write HOST or HOST:PORT/)
  t.throws(() => parseCli([], { TOOLNEXUS_PUSH_ALLOW: "x:0" }), /^--push-allow: .*has a port outside 1-65535/)
})

t.test("parseCli: push delivery flags (--push-signing-key FILE, --push-timeout, --push-max-age, --push-max-attempts) and their variables", async (t) => {
  const push = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    return config === "help" ? undefined : config.push
  }
  const dir = tmpDir(t)
  const keyFile = path.join(dir, "push-key.pem")
  const pem = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }) as string
  fs.writeFileSync(keyFile, pem)
  t.same(push(["--push-signing-key", keyFile]), { signingKey: pem }, "the file's text, for the plugin's signingKey")
  t.same(push([], { TOOLNEXUS_PUSH_SIGNING_KEY: keyFile, TOOLNEXUS_PUSH_ALLOW: "hooks.internal" }), { allow: ["hooks.internal"], signingKey: pem })
  t.same(push(["--push-timeout", "5s", "--push-max-age", "2d", "--push-max-attempts", "12"]), { timeoutMs: 5000, maxAge: 172_800_000, maxAttempts: 12 })
  t.same(push([], { TOOLNEXUS_PUSH_TIMEOUT: "250", TOOLNEXUS_PUSH_MAX_AGE: "90m" }), { timeoutMs: 250, maxAge: 5_400_000 })
  t.throws(() => parseCli(["--push-signing-key", path.join(dir, "missing.pem")], {}), /^--push-signing-key ".*missing\.pem" could not be read: ENOENT/)
  const notAKey = path.join(dir, "not-a-key.pem")
  fs.writeFileSync(notAKey, "-----BEGIN PRIVATE KEY-----\nSECRETBYTES\n-----END PRIVATE KEY-----\n")
  const err = t.throws(() => parseCli(["--push-signing-key", notAKey], {}), /^--push-signing-key should be a private key for signing/) as Error
  t.notOk(err.message.includes("SECRETBYTES"), "the file's content is never in the error")
  t.throws(() => parseCli(["--push-timeout", "soon"], {}), /^--push-timeout should be a duration/)
  t.throws(() => parseCli(["--push-max-age", "0"], {}), /^--push-max-age should be a duration/)
  t.throws(() => parseCli(["--push-max-attempts", "0"], {}), /^--push-max-attempts should be a whole number of 1 or more/)
})

t.test("parseCli: --tls-cert FILE and --tls-key FILE (or their variables), both or neither, read and checked to be a pair", async (t) => {
  const tls = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    return config === "help" ? undefined : config.https
  }
  const { certFile, keyFile, cert, key } = selfSignedCertificate(t)
  t.equal(tls([]), undefined, "neither: plain HTTP")
  t.same(tls(["--tls-cert", certFile, "--tls-key", keyFile]), { cert, key }, "the files' text, for serve()'s https")
  t.same(tls([], { TOOLNEXUS_TLS_CERT: certFile, TOOLNEXUS_TLS_KEY: keyFile }), { cert, key }, "from the environment")
  t.same(tls(["--tls-key", keyFile], { TOOLNEXUS_TLS_CERT: certFile }), { cert, key }, "a flag and a variable make a pair too")
  t.equal(tls([], { TOOLNEXUS_TLS_CERT: "", TOOLNEXUS_TLS_KEY: "" }), undefined, "empty variables are unset")
  t.throws(() => parseCli(["--tls-cert", certFile], {}), { message: "--tls-cert is set but no --tls-key: give the certificate's private key too (or TOOLNEXUS_TLS_KEY)" })
  t.throws(() => parseCli(["--tls-key", keyFile], {}), { message: "--tls-key is set but no --tls-cert: give the certificate too (or TOOLNEXUS_TLS_CERT)" })
  const missing = path.join(path.dirname(certFile), "missing.pem")
  t.throws(() => parseCli(["--tls-cert", missing, "--tls-key", keyFile], {}), { message: `--tls-cert ${JSON.stringify(missing)} could not be read: ENOENT` })
  t.throws(() => parseCli(["--tls-cert", certFile, "--tls-key", missing], {}), { message: `--tls-key ${JSON.stringify(missing)} could not be read: ENOENT` })

  const other = selfSignedCertificate(t)
  t.throws(() => parseCli(["--tls-cert", certFile, "--tls-key", other.keyFile], {}), /^--tls-cert ".*" and --tls-key ".*" should be a PEM certificate and its unencrypted private key: .*key values mismatch/)
  const swapped = t.throws(() => parseCli(["--tls-cert", keyFile, "--tls-key", certFile], {}), /^--tls-cert ".*key\.pem" and --tls-key ".*cert\.pem" should be a PEM certificate and its unencrypted private key: /) as Error
  const body = key.split("\n")[1]
  t.notOk(swapped.message.includes(body), "the key's content is never in the error")
})

t.test("the toolnexus command serves HTTPS with --tls-cert and --tls-key: its URL and the card's say https", async (t) => {
  const { certFile, keyFile, cert } = selfSignedCertificate(t)
  const { url } = await startCli(t, ["--port", "0", "--store", "memory", "--tls-cert", certFile, "--tls-key", keyFile])
  t.match(url, /^https:\/\/127\.0\.0\.1:\d+$/, "the start-up line's url")
  const agent = new https.Agent({ ca: cert })
  t.teardown(() => agent.destroy())
  const request = (path: string, body?: unknown) =>
    new Promise<any>((resolve, reject) => {
      const req = https.request(url + path, { method: body === undefined ? "GET" : "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
        let text = ""
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk))
        res.once("end", () => resolve(JSON.parse(text)))
      })
      req.once("error", reject)
      req.end(body === undefined ? undefined : JSON.stringify(body))
    })
  t.equal((await request("/.well-known/agent-card.json")).url, `${url}/`, "the card advertises the https URL")
  const sent = await request("/", rpc("SendMessage", { message: userMessage("hello"), configuration: { blocking: true } }))
  t.equal(sent.result.artifacts[0].parts[0].text, "echo: hello", "the echo agent answers over TLS")
})

t.test("parseCli: --unowned-tasks-belong-to names a principal of TOOLNEXUS_TOKENS", async (t) => {
  const tokens = { TOOLNEXUS_TOKENS: "alice-secret-0123456789=alice,bob-secret-0123456789a=bob" }
  const config = parseCli(["--unowned-tasks-belong-to", "alice"], tokens)
  t.equal(config !== "help" && config.unownedTasksBelongTo, "alice")
  const fromEnv = parseCli([], { ...tokens, TOOLNEXUS_UNOWNED_TASKS_BELONG_TO: "bob" })
  t.equal(fromEnv !== "help" && fromEnv.unownedTasksBelongTo, "bob")
  t.throws(() => parseCli(["--unowned-tasks-belong-to", "carol"], tokens), /--unowned-tasks-belong-to should name a principal of TOOLNEXUS_TOKENS \(alice, bob\), got "carol"/)
  t.throws(() => parseCli(["--unowned-tasks-belong-to", "alice"], {}), /TOOLNEXUS_TOKENS \(not set: without authentication every peer sees every Task\)/)
  t.notMatch(String((() => { try { parseCli(["--unowned-tasks-belong-to", "carol"], tokens) } catch (e) { return e } })()), /secret/, "no secret in the error")
})

t.test("the toolnexus command applies the stream caps, heartbeat and timeouts it is given", async (t) => {
  const llm = await modelServer(t, () => "hang") // every task runs until the server stops: its stream stays open
  const secret = "cli-secret-0123456789abcdef"
  const { url, lines } = await startCli(
    t,
    ["--port", "0", "--store", "memory", "--base-url", llm.url, "--model", "m", "--max-streams-per-principal", "1", "--stream-heartbeat", "50ms", "--headers-timeout", "200ms"],
    { TOOLNEXUS_TOKENS: `${secret}=ops` },
  )
  t.match(lines.find((l) => l.msg === "toolnexus agent listening"), { maxStreamsPerPrincipal: 1, streamHeartbeatMs: 50, timeouts: { headersMs: 200 } }, "the start-up line shows them")
  const controller = new AbortController()
  t.teardown(() => controller.abort())
  const headers = { "content-type": "application/json", authorization: `Bearer ${secret}` }
  const stream = (text: string, signal?: AbortSignal) => fetch(url + "/", { method: "POST", headers, body: JSON.stringify(rpc("message/stream", { message: { messageId: text, role: "user", parts: [{ kind: "text", text }] } })), signal })
  const open = await stream("first", controller.signal)
  // Read without letting go: leaving a for-await loop would cancel the body and close the stream.
  const reader = open.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  while (!text.includes(": keep-alive")) {
    const { value, done } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  t.match(text, /: keep-alive\n\n/, "the heartbeat flag reached the stream")
  const refused = await stream("second")
  t.match(refused.headers.get("content-type"), /^text\/event-stream/, "0.3: the refusal is a stream of one error")
  t.match(JSON.parse((await refused.text()).replace(/^data: /, "")), { error: { code: -32603, message: /maxStreamsPerPrincipal \(1\)/ } }, "the per-principal cap reached the route")

  // Headers that never finish: closed after 200 ms, long before the 10 s default would.
  const socket = connect(Number(new URL(url).port), "127.0.0.1")
  socket.on("error", () => {})
  socket.resume() // read what comes (the 408), so the server's close is seen
  socket.write("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
  const closed = new Promise((resolve) => socket.once("close", () => resolve("closed")))
  const notClosed = new Promise((resolve) => setTimeout(() => resolve("still open after 8 s"), 8000).unref())
  t.equal(await Promise.race([closed, notClosed]), "closed", "the headers timeout flag reached the server")
  socket.destroy()
})

t.test("clientFor: the offline echo agent, or the configured model", async (t) => {
  const echo = clientFor({ host: "", port: 0, store: "memory", name: "x", logFormat: "json" })
  t.equal(echo.model, "offline-echo")
  t.equal((await echo.run("hello")).text, "echo: hello")
  const real = clientFor({ host: "", port: 0, store: "memory", name: "x", logFormat: "json", model: { baseUrl: "http://127.0.0.1:1", style: "openai", model: "m" } })
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

/** The command's stdout, line by line, without colour codes (or any other terminal control sequence). */
function stdoutLines(child: ReturnType<typeof spawn>, onLine: (line: string) => void): void {
  readline.createInterface({ input: child.stdout! }).on("line", (line) => onLine(stripVTControlCharacters(line)))
}

t.test("--log-format json writes pino JSON lines, even with TOOLNEXUS_LOG_FORMAT=pretty", async (t) => {
  const child = spawn(process.execPath, [CLI_BIN, "--port", "0", "--store", "memory", "--log-format", "json"], { cwd: ROOT, env: { ...process.env, TOOLNEXUS_LOG_FORMAT: "pretty", TOOLNEXUS_DRAIN_DELAY: "0" } })
  t.teardown(() => child.kill("SIGKILL"))
  const lines: string[] = []
  const listening = new Promise<void>((resolve, reject) => {
    stdoutLines(child, (line) => {
      lines.push(line)
      if (line.includes("toolnexus agent listening")) resolve()
    })
    child.once("exit", (code) => reject(new Error(`exited early with ${code}`)))
  })
  await listening
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  t.equal(await exited, 0)
  t.ok(lines.length >= 3, "listening, the echo-agent warning and the stop line")
  for (const line of lines) {
    const entry = JSON.parse(line)
    t.match(entry, { level: Number, time: Number, pid: Number, msg: String }, `a pino JSON line: ${line.slice(0, 80)}`)
  }
  t.ok(lines.some((line) => JSON.parse(line).msg === "stopping: letting running tasks finish"), "the line written just before exit is there")
})

t.test("--log-format pretty writes pino-pretty lines, even when stdout is not a terminal", async (t) => {
  const child = spawn(process.execPath, [CLI_BIN, "--port", "0", "--store", "memory", "--log-format", "pretty"], { cwd: ROOT, env: { ...process.env, TOOLNEXUS_DRAIN_DELAY: "0" } })
  t.teardown(() => child.kill("SIGKILL"))
  const lines: string[] = []
  const url = new Promise<string>((resolve, reject) => {
    let afterListening = false
    stdoutLines(child, (line) => {
      lines.push(line)
      if (line.startsWith("{")) reject(new Error(`a JSON line where a pretty one was wanted: ${line.slice(0, 80)}`))
      if (/^\[[\d:.]+\] INFO: toolnexus agent listening$/.test(line)) afterListening = true
      const field = afterListening && /^ {4}url: "(http:\/\/[^"]+)"$/.exec(line)
      if (field) resolve(field[1])
    })
    child.once("exit", (code) => reject(new Error(`exited early with ${code}`)))
  })
  const card = (await (await fetch(`${await url}/.well-known/agent-card.json`)).json()) as { name: string }
  t.equal(card.name, "toolnexus agent", "the url in the pretty line is where the agent answers")
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  t.equal(await exited, 0)
  t.ok(lines.some((line) => /^\[[\d:.]+\] INFO: stopping: letting running tasks finish$/.test(line)), "the line written just before exit is there, pretty")
  for (const line of lines) t.throws(() => JSON.parse(line), `not a JSON line: ${line.slice(0, 80)}`)
})

t.test("parseCli: --a2a-agent URL, repeated, or TOOLNEXUS_A2A_AGENTS comma-separated", async (t) => {
  const flags = parseCli(["--a2a-agent", "http://127.0.0.1:1", "--a2a-agent", "https://agents.example/card.json"], { TOOLNEXUS_A2A_AGENTS: "http://ignored:1" })
  t.same(flags !== "help" && flags.a2aAgents, ["http://127.0.0.1:1", "https://agents.example/card.json"], "flags win over the variable")
  const fromEnv = parseCli([], { TOOLNEXUS_A2A_AGENTS: " http://a:1 , http://b:2/ ," })
  t.same(fromEnv !== "help" && fromEnv.a2aAgents, ["http://a:1", "http://b:2/"])
  const none = parseCli([], { TOOLNEXUS_A2A_AGENTS: "" })
  t.equal(none !== "help" && none.a2aAgents, undefined, "no agents unless told")
  t.throws(() => parseCli(["--a2a-agent", "agents.example"], {}), /--a2a-agent should be an A2A agent's http\(s\) base URL or its card's URL, got "agents\.example"/)
  t.throws(() => parseCli([], { TOOLNEXUS_A2A_AGENTS: "http://a:1,ftp://b" }), /--a2a-agent should be .*got "ftp:\/\/b"/)
})

t.test("the toolnexus command with --a2a-agent: its model calls the other agent as a tool and reads the answer", async (t) => {
  const other = await serve("127.0.0.1:0", {
    client: createLocalClient(({ messages }) => `B answers: ${messages.filter((m) => m.role === "user").at(-1)?.content ?? ""}`),
    a2a: { name: "helper desk", store: "memory" },
    logger: false,
  })
  t.teardown(() => other.stop())
  const toolCall = { id: "call-1", type: "function", function: { name: "helper_desk", arguments: JSON.stringify({ message: "hello B" }) } }
  const model = await modelServer(t, [{ json: { choices: [{ message: { content: null, tool_calls: [toolCall] } }] } }, openAIText("relayed")])
  const { url, lines } = await startCli(t, ["--port", "0", "--store", "memory", "--a2a-agent", other.url, "--base-url", model.url, "--model", "m"])
  t.same(lines.find((l) => l.msg === "toolnexus agent listening")?.a2aAgents, [other.url], "the start line names the agents")

  const res = await callRpc(url, rpc("SendMessage", { message: userMessage("ask B"), configuration: { blocking: true } }))
  t.equal(res.result.status.state, "completed")
  t.equal(res.result.artifacts[0].parts[0].text, "relayed")
  const offered = (model.requests[0].body.tools as Array<{ function: { name: string } }>).map((tool) => tool.function.name)
  t.ok(offered.includes("helper_desk"), `the model is offered the agent as a tool: ${offered.join(", ")}`)
  const toolMessage = model.requests[1].body.messages.find((m) => m.role === "tool")
  t.match(toolMessage?.content, /^B answers: hello B/, "the other agent's answer reaches the model's next turn")
})

t.test("the toolnexus command exits naming an --a2a-agent whose card cannot be read", async (t) => {
  const refused = `http://127.0.0.1:${await closedPort()}`
  const child = spawn(process.execPath, [CLI_BIN, "--port", "0", "--store", "memory", "--a2a-agent", refused], { cwd: ROOT })
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  t.equal(code, 1)
  t.match(stderr, `toolnexus: opts.a2aAgents[0] (${refused}): GET ${refused}/.well-known/agent-card.json failed: ECONNREFUSED`)
})
