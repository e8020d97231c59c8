// Replicas of the toolnexus command on one Postgres store behind Debian's HAProxy, all on 127.0.0.1: what the
// end-to-end test (haproxy.test.mjs) and the restart bench (bench/restarts.mjs) drive. Plain JavaScript, so both run it as it is.
import { spawn, execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import fs from "node:fs"
import http from "node:http"
import os from "node:os"
import path from "node:path"
import readline from "node:readline"
import pg from "pg"

const ROOT = path.resolve(import.meta.dirname, "..")
const CLI_BIN = path.join(ROOT, "dist", "bin", "toolnexus.js")
export const PG_URL = process.env.TOOLNEXUS_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/**
 * @typedef {import("node:child_process").ChildProcess} ChildProcess
 * @typedef {number | NodeJS.Signals | null} ExitCode a replica's exit code, or the signal that ended it
 * @typedef {{ chunk(text: string): void, end(): void }} ModelStream the fake model's streamed answer, written by the caller
 * @typedef {{ url: string, opened(name: string): Promise<ModelStream>, close(): Promise<Error | undefined> }} Model
 * @typedef {{
 *   name: string,
 *   port: number,
 *   child: ChildProcess | undefined,
 *   exited?: Promise<ExitCode>,
 *   exits: ExitCode[],
 *   lines: string[],
 * }} Replica one replica of the command: `child` and `exited` are its current run's, `exits` every run's exit code,
 *   `lines` its last stdout lines
 * @typedef {{ status: number | undefined, headers: import("node:http").IncomingHttpHeaders, text: string }} HttpAnswer
 * @typedef {{ at: number, ms: number, ok: boolean, what: string, detail?: string }} Sample one call of the load: sent at
 *   `at` (performance.now()), answered in `ms`, with what was wrong in `detail`
 * @typedef {http.IncomingMessage & { headers: { "x-served-by"?: string } }} ProxiedResponse a response through HAProxy, which
 *   names the replica that served it (node gives every header but set-cookie as one string)
 * @typedef {{ id: number | undefined, data: any }} SseEvent one event of an SSE stream: its id (when it has one), its data parsed
 */

/** The haproxy binary: $HAPROXY, else the one on PATH or in /usr/sbin; undefined when there is none. */
export function findHaproxy() {
  for (const candidate of [process.env.HAPROXY, "haproxy", "/usr/sbin/haproxy"]) {
    if (!candidate) continue
    try {
      execFileSync(candidate, ["-v"], { stdio: "ignore" })
      return candidate
    } catch {
      // not this one
    }
  }
  return undefined
}

/**
 * Waits for `check()` to be true, polling; throws naming `what` after `ms`.
 * @param {() => boolean | undefined | Promise<boolean | undefined>} check
 * @param {number} ms
 * @param {string} what
 */
export async function waitFor(check, ms, what) {
  const deadline = performance.now() + ms
  for (;;) {
    if (await check()) return
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** A free TCP port on 127.0.0.1 (listened on, then let go). */
async function freePort() {
  const server = http.createServer()
  await new Promise((/** @type {(value?: undefined) => void} */ resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = /** @type {import("node:net").AddressInfo} */ (server.address())
  await new Promise((/** @type {(err?: Error) => void} */ resolve) => server.close(resolve))
  return port
}

/**
 * A fake OpenAI-style model on 127.0.0.1: a prompt "stream:<name>" gets a streamed answer whose chunks the caller
 * writes (`streams.get(name)`: `{ chunk(text), end() }`, once `opened(name)` resolves); any other prompt gets
 * "done: <prompt>" at once.
 * @returns {Promise<Model>}
 */
export async function startModel() {
  /** @type {Map<string, ModelStream>} */
  const streams = new Map()
  /** @type {Map<string, (stream: ModelStream) => void>} */
  const waiting = new Map()
  const server = http.createServer((req, res) => {
    let raw = ""
    req.setEncoding("utf8")
    req.on("data", (chunk) => (raw += chunk))
    req.on("end", () => {
      const body = JSON.parse(raw)
      const prompt = String(body.messages.filter((/** @type {{ role: string, content?: unknown }} */ m) => m.role === "user").at(-1)?.content ?? "")
      if (!prompt.startsWith("stream:")) {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ choices: [{ message: { content: `done: ${prompt}` } }] }))
        return
      }
      const name = prompt.slice("stream:".length)
      res.writeHead(200, { "content-type": "text/event-stream" })
      /** @type {ModelStream} */
      const stream = {
        chunk: (text) => res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }] })}\n\n`),
        end: () => res.end(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`),
      }
      streams.set(name, stream)
      waiting.get(name)?.(stream)
    })
  })
  await new Promise((/** @type {(value?: undefined) => void} */ resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${/** @type {import("node:net").AddressInfo} */ (server.address()).port}`,
    opened: (name) => (streams.has(name) ? Promise.resolve(/** @type {ModelStream} */ (streams.get(name))) : new Promise((resolve) => waiting.set(name, resolve))),
    close: () => {
      server.closeAllConnections()
      return new Promise((/** @type {(err?: Error) => void} */ resolve) => server.close(resolve))
    },
  }
}

/**
 * One HTTP request on a keep-alive agent, never retried; resolves with status, headers and body text, or rejects on a transport error.
 * @param {http.Agent} agent
 * @param {string} url
 * @param {{ method?: string, body?: unknown, headers?: Record<string, string>, timeoutMs?: number }} [options] `body` is sent as JSON
 * @returns {Promise<HttpAnswer>}
 */
export function request(agent, url, { method = "GET", body, headers = {}, timeoutMs = 30_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: { ...(body !== undefined && { "content-type": "application/json" }), ...headers }, timeout: timeoutMs })
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)))
    req.on("error", reject)
    req.on("response", (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk) => (text += chunk))
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, text }))
      res.on("error", reject)
    })
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })
}

/**
 * A JSON-RPC 1.0 call's body.
 * @param {string} method
 * @param {unknown} params
 * @param {number} [id]
 */
export const rpc = (method, params, id = 1) => ({ jsonrpc: "2.0", id, method, params })
export const A2A_1 = { "a2a-version": "1.0" }

/**
 * Starts `count` replicas of the command (each on a port it keeps across restarts) on a Postgres table of this run's
 * own, and HAProxy in front checking `GET /readyz` every 250 ms. `close()` stops everything and drops the tables.
 * @param {{ count?: number, drainDelay?: string, model: Model }} options `model` is the one the replicas talk to (`startModel()`)
 */
export async function startCluster({ count = 3, drainDelay = "2s", model }) {
  const haproxy = findHaproxy()
  if (!haproxy) throw new Error("haproxy is not installed: apt-get install -y haproxy (or set HAPROXY)")
  const table = `tn_e2e_${randomBytes(4).toString("hex")}`
  const store = `${PG_URL}?table=${table}`
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-haproxy-"))
  /** @type {Replica[]} */
  const replicas = []
  for (let i = 0; i < count; i++) replicas.push({ name: `r${i}`, port: await freePort(), child: undefined, exits: [], lines: [] })

  /** @param {Replica} replica */
  const start = async (replica) => {
    const child = spawn(
      process.execPath,
      [CLI_BIN, "--port", String(replica.port), "--store", store, "--base-url", model.url, "--model", "m", "--drain-delay", drainDelay, "--log-format", "json", "--name", replica.name],
      { cwd: ROOT, env: { ...process.env, TOOLNEXUS_DRAIN_DELAY: "" }, stdio: ["ignore", "pipe", "pipe"] },
    )
    replica.child = child
    const exited = new Promise((/** @type {(code: ExitCode) => void} */ resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)))
    replica.exited = exited
    let stderr = ""
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr = (stderr + chunk).slice(-4000)))
    await new Promise((/** @type {(value?: undefined) => void} */ resolve, reject) => {
      readline.createInterface({ input: child.stdout }).on("line", (line) => {
        replica.lines.push(line)
        if (replica.lines.length > 200) replica.lines.shift()
        if (line.includes('"msg":"toolnexus agent listening"')) resolve()
      })
      exited.then((code) => reject(new Error(`replica ${replica.name} exited (${code}) before listening: ${stderr}`)))
    })
  }
  // The first creates the tables; the others then find them (concurrent CREATE TABLE IF NOT EXISTS can collide).
  await start(replicas[0])
  await Promise.all(replicas.slice(1).map(start))

  const frontPort = await freePort()
  const statsPort = await freePort()
  const config = [
    "global",
    "  maxconn 2000",
    "defaults",
    "  mode http",
    "  timeout connect 2s",
    "  timeout client 60s",
    "  timeout server 60s",
    // A connection refused (a replica between its close and its check failing) is tried again on another server:
    // safe for any request, none of it was sent. Nothing else is retried.
    "  retries 3",
    "  option redispatch 1",
    "frontend front",
    `  bind 127.0.0.1:${frontPort}`,
    "  default_backend replicas",
    "backend replicas",
    "  balance roundrobin",
    "  option httpchk GET /readyz",
    "  http-check expect status 200",
    "  http-response set-header x-served-by %s",
    // Without "timeout check" a check must answer within inter: a replica busy for 250 ms would be taken out.
    "  timeout check 3s",
    "  default-server inter 250ms fall 2 rise 2",
    ...replicas.map((r) => `  server ${r.name} 127.0.0.1:${r.port} check`),
    "listen stats",
    `  bind 127.0.0.1:${statsPort}`,
    "  stats enable",
    "  stats uri /stats",
    "",
  ].join("\n")
  const configFile = path.join(dir, "haproxy.cfg")
  fs.writeFileSync(configFile, config)
  const proxy = spawn(haproxy, ["-db", "-f", configFile], { stdio: ["ignore", "ignore", "pipe"] })
  let proxyErr = ""
  proxy.stderr.setEncoding("utf8").on("data", (chunk) => (proxyErr = (proxyErr + chunk).slice(-4000)))
  const proxyExited = new Promise((resolve) => proxy.once("exit", resolve))

  const statsAgent = new http.Agent({ keepAlive: false })
  /**
   * HAProxy's view: server name → "UP", "DOWN", ...
   * @returns {Promise<Record<string, string>>}
   */
  const states = async () => {
    const { text } = await request(statsAgent, `http://127.0.0.1:${statsPort}/stats;csv`)
    const rows = text.split("\n").map((line) => line.split(","))
    const statusAt = rows[0].indexOf("status")
    return Object.fromEntries(rows.filter((row) => row[0] === "replicas" && row[1] !== "BACKEND").map((row) => [row[1], row[statusAt]]))
  }
  /** @param {string} name @param {string} wanted @param {number} [ms] */
  const waitState = (name, wanted, ms = 30_000) =>
    waitFor(async () => (await states().catch(() => /** @type {Record<string, string>} */ ({})))[name]?.startsWith(wanted), ms, `HAProxy to see ${name} ${wanted} (${proxyErr})`)
  await Promise.race([
    Promise.all(replicas.map((r) => waitState(r.name, "UP"))),
    proxyExited.then((code) => Promise.reject(new Error(`haproxy exited (${code}): ${proxyErr}`))),
  ])

  return {
    url: `http://127.0.0.1:${frontPort}`,
    replicas,
    table,
    states,
    waitState,
    /**
     * SIGTERMs the replica; resolves with its exit code.
     * @param {Replica} replica
     */
    async terminate(replica) {
      /** @type {ChildProcess} */ (replica.child).kill("SIGTERM")
      const code = await /** @type {Promise<ExitCode>} */ (replica.exited)
      replica.exits.push(code)
      return code
    },
    /**
     * Starts the replica again on its port, and waits for HAProxy to see it up.
     * @param {Replica} replica
     */
    async restart(replica) {
      await start(replica)
      await waitState(replica.name, "UP")
    },
    async close() {
      proxy.kill("SIGTERM")
      await proxyExited
      await Promise.all(
        replicas.map(async (r) => {
          if (r.child && r.child.exitCode === null && r.child.signalCode === null) {
            r.child.kill("SIGKILL")
            await r.exited
          }
        }),
      )
      statsAgent.destroy()
      const admin = new pg.Client({ connectionString: PG_URL })
      await admin.connect()
      const { rows } = await admin.query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND (tablename = $1 OR tablename LIKE $2)", [table, `${table}\\_%`])
      if (rows.length > 0) await admin.query(`DROP TABLE IF EXISTS ${rows.map((row) => row.tablename).join(", ")} CASCADE`)
      await admin.end()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

/**
 * A steady load through `url` from `workers` clients that never retry: each sends SendMessage (A2A 1.0, answered once
 * the Task completed), then GetTask of a Task acknowledged so far, until `stop()`. Every answer is recorded.
 * @param {string} url
 * @param {{ workers?: number, maxRequests?: number }} [options]
 */
export function startLoad(url, { workers = 4, maxRequests = 50_000 } = {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: workers })
  /** @type {Sample[]} */
  const samples = []
  /** @type {string[]} the ids of the Tasks SendMessage answered completed */
  const acknowledged = []
  let stopped = false
  let sent = 0
  /** @param {string} what @param {number} started @param {boolean} ok @param {string} [detail] */
  const record = (what, started, ok, detail) => samples.push({ at: started, ms: performance.now() - started, ok, what, ...(detail && { detail }) })
  /**
   * @param {string} what
   * @param {object} body
   * @param {(result: any) => string | undefined} check what is wrong with the JSON-RPC result, if anything
   * @returns {Promise<any>} the result, when it passed
   */
  const call = async (what, body, check) => {
    const started = performance.now()
    sent++
    try {
      const res = await request(agent, `${url}/`, { method: "POST", body, headers: A2A_1 })
      const parsed = res.status === 200 ? JSON.parse(res.text) : undefined
      const problem = res.status !== 200 ? `HTTP ${res.status}: ${res.text.slice(0, 200)}` : parsed.error ? `error ${JSON.stringify(parsed.error)}` : check(parsed.result)
      record(what, started, problem === undefined, problem)
      return problem === undefined ? parsed.result : undefined
    } catch (err) {
      record(what, started, false, `transport: ${/** @type {Error} */ (err).message}`)
      return undefined
    }
  }
  /** @param {number} w */
  const worker = async (w) => {
    for (let n = 0; !stopped && sent < maxRequests; n++) {
      const text = `w${w}-${n}-${randomBytes(3).toString("hex")}`
      const result = await call("SendMessage", rpc("SendMessage", { message: { messageId: text, role: "ROLE_USER", parts: [{ text }] } }), (r) =>
        r?.task?.status?.state === "TASK_STATE_COMPLETED" ? undefined : `not completed: ${JSON.stringify(r).slice(0, 200)}`,
      )
      if (result) acknowledged.push(result.task.id)
      if (acknowledged.length === 0) continue
      const id = acknowledged[Math.floor(Math.random() * acknowledged.length)]
      await call("GetTask", rpc("GetTask", { id }), (r) => (r?.id === id && r.status?.state === "TASK_STATE_COMPLETED" ? undefined : `unexpected task: ${JSON.stringify(r).slice(0, 200)}`))
    }
  }
  const running = Promise.all(Array.from({ length: workers }, (_, w) => worker(w)))
  return {
    samples,
    acknowledged,
    async stop() {
      stopped = true
      await running
      agent.destroy()
    },
  }
}

/**
 * Reads an SSE response body (node's IncomingMessage) as it comes: `events` fills with { id, data }; `done` resolves when it ends.
 * @param {http.IncomingMessage} res
 */
export function readEvents(res) {
  /** @type {SseEvent[]} */
  const events = []
  let buffer = ""
  res.setEncoding("utf8")
  const done = new Promise((/** @type {(events: SseEvent[]) => void} */ resolve, reject) => {
    res.on("data", (/** @type {string} */ chunk) => {
      buffer += chunk
      let end
      while ((end = buffer.indexOf("\n\n")) !== -1) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        let id
        const data = []
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) id = Number(line.slice(4))
          else if (line.startsWith("data: ")) data.push(line.slice(6))
        }
        if (data.length > 0) events.push({ id, data: JSON.parse(data.join("\n")) })
      }
    })
    res.on("end", () => resolve(events))
    res.on("error", reject)
  })
  return { events, done }
}

/**
 * Opens a streaming call through `url`; resolves with the response once its headers came.
 * @param {string} url
 * @param {unknown} body sent as JSON
 * @param {Record<string, string>} [headers]
 * @returns {Promise<ProxiedResponse>}
 */
export function openStream(url, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/`, { method: "POST", agent: false, headers: { "content-type": "application/json", ...A2A_1, ...headers } })
    req.on("error", reject)
    req.on("response", resolve)
    req.end(JSON.stringify(body))
  })
}

/**
 * The p-th percentile of numbers (0-100).
 * @param {number[]} values
 * @param {number} p
 */
export function percentile(values, p) {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}
