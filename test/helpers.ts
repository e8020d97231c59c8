import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { randomUUID } from "node:crypto"
import { once } from "node:events"
import fs from "node:fs"
import fsp from "node:fs/promises"
import http, { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import os from "node:os"
import path from "node:path"
import readline from "node:readline"
import type { FastifyInstance } from "fastify"
import type { Test } from "tap"
import { EventRecorder } from "../lib/a2a/event-recorder.js"
import { TaskEvents } from "../lib/a2a/events.js"
import { StoreFollower } from "../lib/a2a/follower.js"
import { JsonRpcDispatcher, type DispatchOutcome } from "../lib/a2a/jsonrpc.js"
import { A2AOperations } from "../lib/a2a/operations.js"
import { TaskRunner } from "../lib/a2a/runner.js"
import { createLocalClient, type Client, type ModelFunction } from "../lib/client/client.js"
import type { Logger } from "../lib/log.js"
import type { FileSystem } from "../lib/stores/file.js"
import { InMemoryTaskStore } from "../lib/stores/memory.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import type { Tool } from "../lib/tools/types.js"
import type { A2ATask, TaskState } from "../lib/types.js"
import type { ToolnexusA2AOptions } from "../plugins/a2a.js"

/**
 * The fixtures the test files share, each written once. Fastify and the
 * plugin are imported only by the helpers that need them, so a test that
 * imports this file loads no server.
 */

export const ROOT = path.resolve(import.meta.dirname, "..")

/** The test database and NATS server: TOOLNEXUS_TEST_PG_URL / NATS_URL, or the local ones. */
export const PG_URL = process.env.TOOLNEXUS_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
export const NATS_URL = process.env.NATS_URL ?? "nats://127.0.0.1:4222"

/** A memory store that records every save, in order. */
export class RecordingStore extends InMemoryTaskStore {
  readonly saves: A2ATask[] = []
  override async save(task: A2ATask): Promise<void> {
    this.saves.push(structuredClone(task))
    await super.save(task)
  }
  statesOf(id: string): string[] {
    return this.saves.filter((s) => s.id === id).map((s) => s.status.state)
  }
}

/**
 * Holds every save of a Task in `state` on `store` until `release()`: the
 * test decides when that save lands. `started()` says whether one is waiting.
 */
export function holdSavesOf(store: RecordingStore, state: TaskState): { started: () => boolean; release: () => void } {
  const original = store.save.bind(store)
  const gate = deferred()
  let started = false
  store.save = async (task: A2ATask) => {
    if (task.status.state === state) {
      started = true
      await gate.promise
    }
    await original(task)
  }
  return { started: () => started, release: () => gate.resolve() }
}

/** A RecordingStore with a switch: while `failing` is set, saves reject (and are not recorded); reads still work. */
export class FlakyStore extends RecordingStore {
  failing = false
  override async save(task: A2ATask): Promise<void> {
    if (this.failing) throw new Error("the task store is down")
    await super.save(task)
  }
}

/** Polls until `check` is true; fails after `ms` (generous: tests run on loaded machines). */
export async function waitFor(check: () => boolean | Promise<boolean>, ms = 5000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** A logger that keeps its lines for assertions. */
export function memoryLogger(lines: Array<Record<string, unknown>> = []): Logger & { lines: Array<Record<string, unknown>> } {
  const make = (bindings: Record<string, unknown>): Logger => {
    const at = (level: string) => (fields: object, msg: string) => void lines.push({ level, ...bindings, ...fields, msg })
    return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: (more) => make({ ...bindings, ...more }) }
  }
  return Object.assign(make({}), { lines })
}

/** A deferred promise, to hold a fake model mid-answer. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (err: unknown) => void } {
  let resolve!: (value: T) => void
  let reject!: (err: unknown) => void
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)))
  return { promise, resolve, reject }
}

/** A 0.3 user message with the messageId both versions require (a fresh one per call). */
export const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: "user", parts: [{ kind: "text", text }], ...extra })

export const rpc = (method: string, params: unknown, id: string | number = 1) => ({ jsonrpc: "2.0", id, method, params })

/** The status time sampleTask stamps: fixed, so two builds of one task are the same text, whatever the clock did between them. */
export const SAMPLE_TIME = "2026-01-01T00:00:00.000Z"

/** A small Task as a store test saves it: one user message, the given state, SAMPLE_TIME as the status time. */
export const sampleTask = (id: string, state: TaskState = "submitted", extra: Partial<A2ATask> = {}): A2ATask => ({
  id,
  contextId: "ctx-1",
  kind: "task",
  status: { state, timestamp: SAMPLE_TIME },
  history: [{ kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "hello" }] }],
  ...extra,
})

// ---------------------------------------------------------------------------
// Files and processes

/** A fresh directory under the OS tmp dir, removed when the test ends. */
export function tmpDir(t: Test, prefix = "tn-test-"): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A self-signed certificate for 127.0.0.1 and localhost (P-256, one day), made by the openssl command in a directory removed when the test ends: the files and their PEM text. */
export function selfSignedCertificate(t: Test): { certFile: string; keyFile: string; cert: string; key: string } {
  const dir = tmpDir(t, "tn-tls-")
  const certFile = path.join(dir, "cert.pem")
  const keyFile = path.join(dir, "key.pem")
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", keyFile, "-out", certFile],
    { stdio: ["ignore", "ignore", "pipe"] },
  )
  return { certFile, keyFile, cert: fs.readFileSync(certFile, "utf8"), key: fs.readFileSync(keyFile, "utf8") }
}

/** A pid no process has any more: a child's, after it has exited and been reaped. */
export async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" })
  await once(child, "exit")
  return child.pid!
}

/**
 * Runs test/fixtures/journal-writer.mjs on `dir`, saving `states` of Task `id` (saved with its push configs before)
 * through a store that sends, so their notifications are in its journal; kills it (SIGKILL) once they are saved.
 */
export async function killedJournalWriter(t: Test, dir: string, id: string, states: string[]): Promise<void> {
  const child = spawn(process.execPath, [path.join(ROOT, "test", "fixtures", "journal-writer.mjs"), dir, id, states.join(",")], { stdio: ["ignore", "pipe", "inherit"] })
  t.teardown(() => void child.kill("SIGKILL"))
  const [line] = (await once(readline.createInterface({ input: child.stdout }), "line")) as [string]
  t.equal(JSON.parse(line).pid, child.pid, "the writer saved them")
  child.kill("SIGKILL")
  await once(child, "exit")
}

/** Runs before each file operation with its name ("open", "write", "sync", ...) and path; may throw to fail it, or wait. */
export type FsHook = (op: string, file: string) => void | Promise<void>

/**
 * node:fs/promises behind a FileSystem that logs each operation as
 * "<op> <path relative to dir>" ("." for dir itself) and lets `hook` fail or delay it.
 */
export function recordingFs(dir: string, calls: string[], hook: FsHook = () => {}): FileSystem {
  const rel = (file: string) => path.relative(dir, file) || "."
  const step = async (op: string, file: string, detail = "") => {
    calls.push(`${op} ${rel(file)}${detail}`)
    await hook(op, file)
  }
  return {
    mkdir: async (file, options) => {
      await step("mkdir", file)
      return fsp.mkdir(file, options)
    },
    async open(file, flags) {
      await step("open", file, ` ${flags}`)
      const handle = await fsp.open(file, flags)
      return {
        writeFile: async (data, encoding) => {
          await step("write", file)
          await handle.writeFile(data, encoding)
        },
        sync: async () => {
          await step("sync", file)
          await handle.sync()
        },
        close: async () => {
          calls.push(`close ${rel(file)}`)
          await handle.close()
        },
      }
    },
    rename: async (from, to) => {
      await step("rename", from, ` ${rel(to)}`)
      await fsp.rename(from, to)
    },
    link: async (from, to) => {
      await step("link", from, ` ${rel(to)}`)
      await fsp.link(from, to)
    },
    rm: async (file, options) => {
      await step("rm", file)
      await fsp.rm(file, options)
    },
    readFile: async (file, encoding) => {
      await step("readFile", file)
      return fsp.readFile(file, encoding)
    },
    readdir: async (file) => {
      await step("readdir", file)
      return fsp.readdir(file)
    },
    stat: async (file) => {
      await step("stat", file)
      return fsp.stat(file)
    },
  }
}

/** An error as the OS gives it, with its code, for a file system layer to throw. */
export const simulated = (code: string) => Object.assign(new Error(`${code}: simulated failure`), { code })

/** The compiled toolnexus command, as a user runs it (npm test builds first). */
export const CLI_BIN = path.join(ROOT, "dist", "bin", "toolnexus.js")

export interface RunningCli {
  url: string
  child: ChildProcess
  /** Every JSON log line the command printed so far; later ones are added as they come. */
  lines: Array<Record<string, unknown>>
}

/** Starts the toolnexus command with `args`; resolves once it logs that it listens. Killed when the test ends. */
export async function startCli(t: Test, args: string[], env: NodeJS.ProcessEnv = {}): Promise<RunningCli> {
  const child = spawn(process.execPath, [CLI_BIN, ...args], { cwd: ROOT, env: { ...process.env, ...env } })
  t.teardown(() => void child.kill("SIGKILL"))
  let stderr = ""
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const lines: Array<Record<string, unknown>> = []
  const url = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).on("line", (line) => {
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>)
      } catch {
        return reject(new Error(`toolnexus printed a line that is not JSON: ${line}`))
      }
      if (lines.at(-1)?.msg === "toolnexus agent listening") resolve(String(lines.at(-1)?.url))
    })
    child.once("exit", (code) => reject(new Error(`toolnexus exited early (${code}): ${stderr}`)))
  })
  return { url, child, lines }
}

// ---------------------------------------------------------------------------
// JSON-RPC

/** POSTs a JSON-RPC body to the route of an agent listening at `url`. */
export const postRpc = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url + "/", { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })

/** postRpc, and the answer parsed. */
export const callRpc = async (url: string, body: unknown, headers: Record<string, string> = {}): Promise<any> => (await postRpc(url, body, headers)).json()

/** POSTs a JSON-RPC body (an object, or raw text sent as it is) to an app through inject. */
export const injectRpc = (app: FastifyInstance, body: unknown, headers: Record<string, string> = {}, url = "/") =>
  app.inject({ method: "POST", url, headers: { "content-type": "application/json", ...headers }, payload: typeof body === "string" ? body : JSON.stringify(body) })

/** One server-sent event's text: its `id:` (a number, when it has one) and its `data:` parsed as JSON; comment lines are skipped. */
export function sseEvent(text: string): { id?: number; data: any } {
  let id: number | undefined
  const data: string[] = []
  for (const line of text.split("\n")) {
    if (line.startsWith("id: ")) id = Number(line.slice(4))
    else if (line.startsWith("data: ")) data.push(line.slice(6))
  }
  return { ...(id !== undefined && { id }), data: JSON.parse(data.join("\n")) }
}

/** The events of a whole server-sent event stream's text, keep-alive comments left out. */
export const sseEvents = (text: string): Array<{ id?: number; data: any }> =>
  text
    .split("\n\n")
    .filter((event) => event !== "" && !event.startsWith(":"))
    .map(sseEvent)

/** The JSON-RPC messages of a whole server-sent event stream's text. */
export const sseMessages = (text: string): any[] => sseEvents(text).map((event) => event.data)

/** Reads a server-sent event stream as it arrives: `messages` (and their `ids`) fill event by event; `done` resolves with them all once it ends. */
export function readSse(body: AsyncIterable<Uint8Array>): { messages: any[]; ids: Array<number | undefined>; done: Promise<any[]> } {
  const messages: unknown[] = []
  const ids: Array<number | undefined> = []
  const done = (async () => {
    const decoder = new TextDecoder()
    let buffered = ""
    for await (const chunk of body) {
      buffered += decoder.decode(chunk, { stream: true })
      for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
        const event = buffered.slice(0, end)
        if (!event.startsWith(":")) {
          const { id, data } = sseEvent(event)
          messages.push(data)
          ids.push(id)
        }
        buffered = buffered.slice(end + 2)
      }
    }
    return messages
  })()
  return { messages, ids, done }
}

/** The JSON-RPC answer a dispatch outcome carries, parsed; undefined for a notification. */
export const answerOf = (outcome: DispatchOutcome): any => (outcome.body === undefined ? undefined : JSON.parse(outcome.body))

/**
 * The protocol core without HTTP: a runner, a follower (polling a store
 * that cannot watch every 500 ms) and a dispatcher, on `store`; `call` dispatches a body and parses the answer.
 */
export function dispatcherFor(respond: ModelFunction | Client = () => "DONE", store: TaskStore = new RecordingStore()) {
  const log = memoryLogger()
  const client = typeof respond === "function" ? createLocalClient(respond) : respond
  const events = new TaskEvents()
  // As the plugin does: events go to the store's log when it has one.
  const recorder = store.events === undefined ? undefined : new EventRecorder(store.events, log)
  const runner = new TaskRunner({ store, client, log, events, recorder })
  const dispatcher = new JsonRpcDispatcher(new A2AOperations({ store, runner, events, recorder, follower: new StoreFollower({ store, runner, log, recorder }) }))
  const call = async (body: unknown, version?: string) => answerOf(await dispatcher.dispatch(body, { log, version }))
  return { store, log, events, runner, dispatcher, recorder, call }
}

/** A Fastify app with the plugin registered (`before` may set up the host's own routes first), ready; closed when the test ends. */
export async function a2aApp(t: Test, opts: ToolnexusA2AOptions, before?: (app: FastifyInstance) => void): Promise<FastifyInstance> {
  const [{ default: Fastify }, { toolnexusA2A }] = await Promise.all([import("fastify"), import("../plugins/a2a.js")])
  const app = Fastify()
  before?.(app)
  await app.register(toolnexusA2A, opts)
  t.teardown(() => app.close())
  await app.ready()
  return app
}

// ---------------------------------------------------------------------------
// A fake model endpoint

/** The parts of a model request body the assertions look at. */
export interface WireBody {
  model?: string
  max_tokens?: number
  system?: string
  messages: Array<{ role: string; content: unknown; tool_calls?: unknown; tool_call_id?: string }>
  tools?: unknown[]
}

/** One request the fake model endpoint took. */
export interface ModelRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: WireBody
  /** Set once the client went away before it had the answer. */
  abandoned: boolean
}

/** An answer: JSON or text, with a status and headers; "hang" never answers (the connection is closed when the test ends). */
export type Scripted = (({ json: unknown } | { text: string }) & { status?: number; headers?: Record<string, string> }) | "hang"

/** What a model answers when it says `text`, in the OpenAI chat completions form. */
export const openAIText = (text: string): Scripted => ({
  json: { choices: [{ message: { content: text } }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } },
})

/**
 * A real HTTP model endpoint on 127.0.0.1 that records each request and
 * answers it: from `script` in order (a 500 once the script runs out), or
 * with what `script` returns for it, which may be a promise the test settles.
 */
export async function modelServer(
  t: Test,
  script: Scripted[] | ((request: ModelRequest) => Scripted | Promise<Scripted>),
): Promise<{ url: string; requests: ModelRequest[] }> {
  const requests: ModelRequest[] = []
  const url = await localServer(t, (req, res) => {
    let raw = ""
    req.setEncoding("utf8")
    req.on("data", (chunk: string) => (raw += chunk))
    const answer = async () => {
      const request: ModelRequest = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body: JSON.parse(raw) as WireBody, abandoned: false }
      requests.push(request)
      res.on("close", () => (request.abandoned = !res.writableEnded))
      const scripted = Array.isArray(script)
        ? (script[requests.length - 1] ?? { status: 500, text: "the test script ran out of answers" })
        : await script(request)
      if (scripted === "hang" || res.destroyed) return
      const isJson = "json" in scripted
      res.writeHead(scripted.status ?? 200, { "content-type": isJson ? "application/json" : "text/html", ...scripted.headers })
      res.end(isJson ? JSON.stringify(scripted.json) : scripted.text)
    }
    req.on("end", () => {
      // A body that is not JSON or a script that throws gets a 500 saying so, for the test to see.
      answer().catch((err: unknown) => {
        if (res.destroyed) return
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" })
        res.end(`the fake model endpoint failed: ${String(err)}`)
      })
    })
  })
  return { url, requests }
}

/** An HTTP server on 127.0.0.1 (port 0) answering with `handle`, closed with its connections when the test ends; resolves with its URL. */
export async function localServer(t: Test, handle: http.RequestListener): Promise<string> {
  const server = createServer(handle)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const { port } = server.address() as AddressInfo
  return `http://127.0.0.1:${port}`
}

/** A port nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

// ---------------------------------------------------------------------------
// Streams: a model that streams what the test says, and a peer that reads, cuts and resumes

/** A model the test writes: each `say(text)` is a chunk streamed at once; `end()` finishes the answer. */
export function scriptedModel() {
  const chunks: string[] = []
  let wake: (() => void) | undefined
  let ended = false
  let runs = 0
  const client = createLocalClient(() => {
    runs++
    return (async function* () {
      for (let i = 0; ; i++) {
        while (i >= chunks.length && !ended) await new Promise<void>((resolve) => (wake = resolve))
        if (i >= chunks.length) return
        yield chunks[i]
      }
    })()
  })
  return {
    client,
    runs: () => runs,
    say(text: string) {
      chunks.push(text)
      wake?.()
    },
    end() {
      ended = true
      wake?.()
    },
  }
}

/** Opens a stream (a POST answered with SSE, on a connection of its own); `cut()` drops it as a failing network would. */
export async function openStream(url: string, body: unknown, headers: Record<string, string> = {}) {
  const payload = JSON.stringify(body)
  const req = http.request(url + "/", {
    method: "POST",
    agent: false,
    headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload), "a2a-version": "1.0", ...headers },
  })
  req.on("error", () => {}) // a cut stream errors
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    req.once("response", resolve)
    req.once("error", reject)
    req.end(payload)
  })
  const reader = readSse(res)
  reader.done.catch(() => {}) // a cut stream rejects its read
  return { status: res.statusCode, ...reader, cut: () => req.destroy() }
}

export const sendStreamingRpc = (text: string) => rpc("SendStreamingMessage", { message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] } })
export const resumeRpc = (id: string) => rpc("SubscribeToTask", { id }, 7)

/** The text of a stream's artifact chunks, in order, as a peer joins them (a chunk without `append` starts anew). */
export function joinedChunks(results: any[]): string {
  let text = ""
  for (const result of results) {
    const update = result.artifactUpdate
    if (update === undefined) continue
    const part = update.artifact.parts.map((p: { text: string }) => p.text).join("")
    text = update.append ? text + part : part
  }
  return text
}

export const kindsOf = (results: any[]) => results.map((r) => Object.keys(r)[0])

/** A tool that adds two numbers, recording each call in `calls`: the tool-calling loop's fixture. */
export function addTool(calls: Array<{ a: unknown; b: unknown }> = []): Tool {
  return {
    name: "add",
    description: "Adds two numbers",
    inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
    execute({ a, b }) {
      calls.push({ a, b })
      return String(Number(a) + Number(b))
    },
  }
}

/** The model: "echo: <prompt>", or held on a gate for prompts that start with "wait". */
export function gatedModel() {
  const gates = new Map<string, ReturnType<typeof deferred<string>>>()
  const signals: AbortSignal[] = []
  const respond: ModelFunction = ({ messages, signal }) => {
    const prompt = messages.at(-1)?.content ?? ""
    if (!prompt.startsWith("wait")) return `echo: ${prompt}`
    if (signal) signals.push(signal)
    const gate = deferred<string>()
    gates.set(prompt, gate)
    signal?.addEventListener("abort", () => gate.reject(signal.reason))
    return gate.promise
  }
  return { respond, gates, signals }
}
