import { spawn, type ChildProcess } from "node:child_process"
import path from "node:path"
import readline from "node:readline"
import Fastify from "fastify"
import type { Test } from "tap"
import { ROOT } from "./helpers.js"

/**
 * A webhook receiver on 127.0.0.1 for the crash and replica tests of push
 * delivery, and the checks they share: every notification of every Task
 * arrives, in order per Task, and a duplicate only with the same key.
 */

/** How the receiver answers: 503, 200, or not at all until the mode changes (the request stays open). */
export type Mode = "refuse" | "accept" | "hold"

/** One request the receiver got. */
export interface Received {
  key: string
  taskId: string
  /** "artifact", or the status state the notification reports. */
  event: string
  body: string
  /** What it was answered with; 0: held, and its connection closed before it was answered (the sender gave up or died). */
  status: number
}

export async function receiver(t: Test) {
  const app = Fastify()
  const received: Received[] = []
  let mode: Mode = "refuse"
  /** The held requests still open, each with the function that answers it. */
  const held = new Set<() => void>()
  app.removeAllContentTypeParsers()
  app.addContentTypeParser("*", { parseAs: "string" }, (_request, body, done) => done(null, body))
  app.post("/*", async (request, reply) => {
    const body = request.body as string
    const json = JSON.parse(body)
    const update = json.statusUpdate ?? json.artifactUpdate
    const seen = {
      key: String(request.headers["idempotency-key"]),
      taskId: String(update.taskId),
      event: json.artifactUpdate ? "artifact" : String(json.statusUpdate.status.state),
      body,
    }
    if (mode === "hold") {
      const answered = await new Promise<boolean>((resolve) => {
        const answer = () => {
          held.delete(answer)
          resolve(true)
        }
        held.add(answer)
        reply.raw.once("close", () => {
          held.delete(answer)
          resolve(false)
        })
      })
      if (!answered) {
        received.push({ ...seen, status: 0 })
        return reply.code(503).send()
      }
    }
    const status = mode === "accept" ? 200 : 503
    received.push({ ...seen, status })
    return reply.code(status).send()
  })
  /** The gates the agent waits at (test/fixtures/push-server.mjs): answered once the test opens them. */
  const gates = new Map<string, { open: () => void; opened: Promise<void> }>()
  const gate = (name: string) => {
    let entry = gates.get(name)
    if (!entry) {
      let open!: () => void
      const opened = new Promise<void>((resolve) => (open = resolve))
      gates.set(name, (entry = { open, opened }))
    }
    return entry
  }
  app.get("/gate/:name", async (request) => {
    await gate((request.params as { name: string }).name).opened
    return "open"
  })
  await app.listen({ port: 0, host: "127.0.0.1" })
  t.teardown(async () => {
    for (const answer of [...held]) answer()
    for (const entry of gates.values()) entry.open()
    await app.close()
  })
  const { port } = app.server.address() as { port: number }
  return {
    received,
    host: `127.0.0.1:${port}`,
    url: (p: string) => `http://127.0.0.1:${port}${p}`,
    gateUrl: `http://127.0.0.1:${port}/gate`,
    openGate: (name: string) => gate(name).open(),
    /** Requests held open right now. */
    holding: () => held.size,
    setMode(next: Mode) {
      mode = next
      if (next !== "hold") for (const answer of [...held]) answer()
    },
    /** The distinct notifications answered 2xx. */
    deliveredKeys: () => new Set(received.filter((r) => r.status === 200).map((r) => r.key)).size,
  }
}

/**
 * The notifications of one Task run to its end, in this order: its config is
 * inline with SendMessage (see sendWithHook), stored before the first save,
 * so every one is reported, SUBMITTED included.
 */
export const RUN = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "artifact", "TASK_STATE_COMPLETED"]

/**
 * Checks what the receiver got for `taskIds`: each Task's notifications,
 * first 2xx of each key in arrival order, are exactly RUN; one key per
 * notification, so a duplicate carries the key (and the body) of the one it
 * repeats. Returns how many requests were answered 2xx again for a key already
 * delivered.
 */
export function checkDelivery(t: Test, received: Received[], taskIds: string[]): number {
  let redelivered = 0
  for (const id of taskIds) {
    const mine = received.filter((r) => r.taskId === id)
    const firstOk = new Map<string, Received>()
    for (const r of mine) {
      if (r.status !== 200) continue
      if (firstOk.has(r.key)) redelivered++
      else firstOk.set(r.key, r)
    }
    const events = [...firstOk.values()].map((r) => r.event)
    t.ok(
      JSON.stringify(events) === JSON.stringify(RUN),
      `${id}: every notification delivered, in order (${events.join(", ")})`,
    )
    const bodies = new Map<string, string>()
    for (const r of mine) {
      if (!bodies.has(r.key)) bodies.set(r.key, r.body)
      else if (bodies.get(r.key) !== r.body) t.fail(`${id}: key ${r.key} came with two different bodies`)
    }
    t.equal(bodies.size, events.length, `${id}: one key per notification: every repeat carried its notification's key`)
  }
  return redelivered
}

export interface PushServer {
  url: string
  child: ChildProcess
  /** Resolves once the process has exited. */
  exited: Promise<unknown>
}

/** Starts test/fixtures/push-server.mjs on `store`; killed (SIGKILL) when the test ends. */
export async function pushServer(t: Test, store: string, hook: { host: string; gateUrl: string }, timeoutMs: number): Promise<PushServer> {
  const child = spawn(process.execPath, [path.join(ROOT, "test", "fixtures", "push-server.mjs"), store, hook.host, String(timeoutMs), hook.gateUrl], { cwd: ROOT })
  const exited = new Promise((resolve) => child.once("exit", resolve))
  t.teardown(() => void child.kill("SIGKILL"))
  let stderr = ""
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const url = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout }).once("line", (line) => resolve((JSON.parse(line) as { url: string }).url))
    child.once("exit", (code) => reject(new Error(`push-server exited early (${code}): ${stderr}`)))
  })
  return { url, child, exited }
}

const call = async (url: string, method: string, params: unknown): Promise<any> => {
  const res = await fetch(url + "/", {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  })
  const answer = (await res.json()) as { result?: unknown; error?: unknown }
  if (answer.error !== undefined) throw new Error(`${method} failed: ${JSON.stringify(answer.error)}`)
  return answer.result
}

/**
 * Starts a Task on `url` with a push config to `hookUrl` inline, then opens
 * the gate its agent waits at. Resolves with the Task's id.
 */
export async function sendWithHook(url: string, hook: { openGate: (name: string) => void }, hookUrl: string): Promise<string> {
  const name = `gate-${crypto.randomUUID()}`
  const sent = await call(url, "SendMessage", {
    message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: name }] },
    configuration: { returnImmediately: true, taskPushNotificationConfig: { url: hookUrl } },
  })
  const id = String(sent.task.id)
  hook.openGate(name)
  return id
}

/** Resolves once every Task of `ids` has completed, as `url` reads them. */
export async function allCompleted(url: string, ids: string[]): Promise<boolean> {
  for (const id of ids) if ((await call(url, "GetTask", { id })).status.state !== "TASK_STATE_COMPLETED") return false
  return true
}
