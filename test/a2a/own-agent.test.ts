import { randomBytes } from "node:crypto"
import * as grpc from "@grpc/grpc-js"
import { Artifact, CancelTaskRequest, GetTaskRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk"
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, type Client } from "@a2a-js/sdk/client"
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc"
import { connect } from "nats"
import pg from "pg"
import t, { type Test } from "tap"
import type { AgentFunction } from "../../lib/a2a/agent.js"
import { createLocalClient } from "../../lib/client/client.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { NatsTaskStore } from "../../lib/stores/nats/store.js"
import { PostgresTaskStore } from "../../lib/stores/postgres/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import type { A2AMessage } from "../../lib/types.js"
import { serve } from "../../plugins/serve.js"
import Fastify from "fastify"
import { callRpc, deferred, NATS_URL, PG_URL, rpc, tmpDir, waitFor } from "../fixtures/helpers.js"

/**
 * An agent of the host's own, served on every store and driven by the
 * official 1.x client over each binding: what it says (status, chunks,
 * artifacts, a question) reaches the peer, and a cancel and an error end
 * it as they end the built-in loop's Tasks.
 */

/** A credential the agent's error leaks: the Task's status message must not show it. */
const SECRET = `sk-own-agent-${randomBytes(8).toString("hex")}`
process.env.TN_OWN_AGENT_TEST_API_KEY = SECRET
t.teardown(() => void delete process.env.TN_OWN_AGENT_TEST_API_KEY)

const REPORT = Buffer.from("the report's body").toString("base64")
const textOf = (message: A2AMessage | undefined) => (message?.parts ?? []).map((part) => (part.kind === "text" ? part.text : "")).join("")

/** The agent: "work" says all it can, "book" asks for a city, "hold" waits for its signal, "boom" throws. */
function ownAgent() {
  const aborts: string[] = []
  const holding: string[] = []
  const agent: AgentFunction = async (ctx) => {
    const said = textOf(ctx.message)
    if (ctx.history.some((message) => message.role === "agent" && textOf(message) === "Which city?")) return `booked for ${said}`
    switch (said) {
      case "work": {
        await ctx.status("looking it up")
        ctx.text("Hel")
        ctx.text("lo")
        ctx.artifact({ name: "report.txt", parts: [{ kind: "file", file: { name: "report.txt", mimeType: "text/plain", bytes: REPORT } }] })
        const figures = ctx.artifact({ name: "figures", parts: [{ kind: "data", data: { total: 3 } }], lastChunk: false })
        figures.append([{ kind: "data", data: { more: true } }], { lastChunk: true })
        return ", world"
      }
      case "book":
        return { inputRequired: "Which city?" }
      case "hold": {
        holding.push(ctx.taskId)
        const reason = await new Promise<string>((resolve) => {
          const why = () => resolve(String((ctx.signal.reason as Error).message))
          if (ctx.signal.aborted) why()
          else ctx.signal.addEventListener("abort", why, { once: true })
        })
        aborts.push(reason)
        throw new Error("stopped")
      }
      case "boom":
        throw new Error(`the upstream refused key ${SECRET}: ${"x".repeat(5000)}`)
      default:
        return `unexpected: ${said}`
    }
  }
  return { agent, aborts, holding }
}

type Binding = "JSONRPC" | "HTTP+JSON" | "GRPC"
type StoreMaker = (t: Test) => Promise<TaskStore>

const suffix = () => randomBytes(6).toString("hex")

const STORES: Array<[string, StoreMaker]> = [
  ["memory", async () => new InMemoryTaskStore()],
  ["file", async (t) => new FileTaskStore(tmpDir(t))],
  [
    "Postgres",
    async (t) => {
      const table = `tn_own_${suffix()}`
      const store = new PostgresTaskStore(PG_URL, { table, leaseTable: `${table}_leases` })
      t.teardown(() => dropPostgres(store, table))
      return store
    },
  ],
  [
    "NATS",
    async (t) => {
      const bucket = `tn_own_${suffix()}`
      const store = new NatsTaskStore(NATS_URL, { bucket, leaseBucket: `${bucket}_leases` })
      t.teardown(() => dropNats(store, bucket))
      return store
    },
  ],
]

async function dropPostgres(store: PostgresTaskStore, table: string): Promise<void> {
  await store.close()
  const admin = new pg.Client({ connectionString: PG_URL })
  await admin.connect()
  const tables = ["", "_leases", "_pushcfg", "_outbox", "_dead", "_events", "_events_ends"].map((end) => `"${table}${end}"`)
  await admin.query(`DROP TABLE IF EXISTS ${tables.join(", ")}`)
  await admin.end()
}

async function dropNats(store: NatsTaskStore, bucket: string): Promise<void> {
  await store.close()
  const nc = await connect({ servers: NATS_URL })
  const jsm = await nc.jetstreamManager()
  for (const name of [bucket, `${bucket}_leases`, `${bucket}_push`]) await jsm.streams.delete(`KV_${name}`).catch(() => {})
  await jsm.streams.delete(`${bucket}_events`).catch(() => {})
  await nc.drain()
}

/** The official client through one binding, chosen from the card as a peer preferring it would. */
async function clientOver(url: string, binding: Binding): Promise<Client> {
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory(), new RestTransportFactory(), new GrpcTransportFactory({ grpcChannelCredentials: grpc.credentials.createInsecure() })],
    preferredTransports: [binding],
  })
  return new ClientFactory(options).createFromUrl(url)
}

const say = (text: string, extra: Record<string, unknown> = {}) =>
  SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }], ...extra } })
const sayQuick = (text: string) => SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] }, configuration: { returnImmediately: true } })
const sdkText = (parts: Array<{ content?: { $case: string; value: unknown } }> | undefined) => (parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("")

/** What a stream said, event by event, in a form easy to compare. */
function describe(event: any): string {
  const payload = event.payload
  if (payload.$case === "task") return `task:${TaskState[payload.value.status.state]}`
  if (payload.$case === "statusUpdate") {
    const words = sdkText(payload.value.status.message?.parts)
    return `status:${TaskState[payload.value.status.state]}${words ? `:${words}` : ""}`
  }
  const { artifact, append, lastChunk } = payload.value
  const json = Artifact.toJSON(artifact) as { name?: string; parts: Array<Record<string, unknown>> }
  return `artifact:${json.name}:${JSON.stringify(json.parts)}:${append ? "append" : "new"}${lastChunk ? ":last" : ""}`
}

async function scenarios(t: Test, url: string, binding: Binding, { aborts, holding }: { aborts: string[]; holding: string[] }): Promise<void> {
  const sdk = await clientOver(url, binding)

  // A status message, streamed chunks, a file and a data artifact, and the rest of the answer returned.
  const seen: string[] = []
  let taskId = ""
  for await (const event of sdk.sendMessageStream(say("work"))) {
    seen.push(describe(event))
    if ((event as any).payload.$case === "task") taskId = (event as any).payload.value.id
  }
  t.same(
    seen,
    [
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "status:TASK_STATE_WORKING:looking it up",
      'artifact:answer:[{"text":"Hel"}]:new',
      'artifact:answer:[{"text":"lo"}]:append',
      `artifact:report.txt:[{"raw":"${REPORT}","filename":"report.txt","mediaType":"text/plain"}]:new:last`,
      'artifact:figures:[{"data":{"total":3}}]:new',
      'artifact:figures:[{"data":{"more":true}}]:append:last',
      'artifact:answer:[{"text":"Hello, world"}]:new:last',
      "status:TASK_STATE_COMPLETED",
    ],
    `${binding}: every event, in order`,
  )
  const done = await sdk.getTask(GetTaskRequest.fromJSON({ id: taskId }))
  t.same(
    done.artifacts.map((a) => (Artifact.toJSON(a) as { name: string; parts: unknown[] }).name),
    ["report.txt", "figures", "answer"],
    `${binding}: the Task keeps the artifacts, the answer last`,
  )
  t.same((Artifact.toJSON(done.artifacts[1]) as { parts: unknown[] }).parts, [{ data: { total: 3 } }, { data: { more: true } }], "the appended part is in the artifact")
  t.equal(sdkText(done.artifacts[2].parts), "Hello, world", "streamed text, then the string returned")

  // A question: input-required with it as the status message; the answer to it runs the agent again, the question in its history.
  const asked = (await sdk.sendMessage(say("book"))) as any
  t.equal(asked.status.state, TaskState.TASK_STATE_INPUT_REQUIRED, `${binding}: input-required`)
  t.equal(sdkText(asked.status.message.parts), "Which city?")
  const booked = (await sdk.sendMessage(say("Paris", { taskId: asked.id, contextId: asked.contextId }))) as any
  t.equal(booked.status.state, TaskState.TASK_STATE_COMPLETED, `${binding}: the follow-up completes the Task`)
  t.equal(sdkText(booked.artifacts.at(-1).parts), "booked for Paris")

  // A cancel aborts the agent's signal.
  const before = aborts.length
  const running = (await sdk.sendMessage(sayQuick("hold"))) as any
  await waitFor(() => holding.includes(running.id), 10_000, "the agent to hold the Task")
  const canceled = await sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id }))
  t.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED, `${binding}: canceled`)
  await waitFor(() => aborts.length > before, 10_000, "the agent to see the abort")
  t.match(aborts.at(-1), /canceled/, "the signal's reason says why")

  // A thrown error fails the Task with its message, cut and without the credential.
  const failed = (await sdk.sendMessage(say("boom"))) as any
  t.equal(failed.status.state, TaskState.TASK_STATE_FAILED, `${binding}: failed`)
  const why: string = sdkText(failed.status.message.parts)
  t.match(why, /^The agent failed: the upstream refused key \[redacted\]: x+…$/, "the error's message, redacted and cut")
  t.notOk(why.includes(SECRET), "no credential in the Task")
  t.ok(why.length < 2100, `cut (${why.length} characters)`)
}

for (const [storeName, makeStore] of STORES) {
  t.test(`${storeName}: an agent of your own over JSON-RPC, HTTP+JSON and gRPC`, async (t) => {
    const store = await makeStore(t)
    const { agent, ...seen } = ownAgent()
    const served = await serve("127.0.0.1:0", { agent, a2a: { store }, grpc: "127.0.0.1:0", logger: false })
    t.teardown(() => served.stop())
    for (const binding of ["JSONRPC", "HTTP+JSON", "GRPC"] as const) await scenarios(t, `${served.url}/`, binding, seen)
  })
}

t.test("exactly one of agent and client: both or neither is a TypeError naming them", async (t) => {
  const agent: AgentFunction = async () => "hi"
  const client = createLocalClient(() => "hi")
  await t.rejects(serve("127.0.0.1:0", { agent, client, logger: false }), new TypeError("toolnexus: give opts.agent or opts.client, not both: opts.agent is your own agent function, opts.client runs the built-in tool-calling loop"))
  await t.rejects(serve("127.0.0.1:0", { logger: false }), { name: "TypeError", message: /opts\.agent or opts\.client is required/ })
  await t.rejects(serve("127.0.0.1:0", { agent: "./agent.js" as never, logger: false }), { name: "TypeError", message: /opts\.agent should be a function/ })
})

t.test("an outcome that is neither a string nor { inputRequired } fails the Task saying what to return", async (t) => {
  const served = await serve("127.0.0.1:0", { agent: (async () => 42) as never, logger: false })
  t.teardown(() => served.stop())
  const sdk = await clientOver(`${served.url}/`, "JSONRPC")
  const failed = (await sdk.sendMessage(say("x"))) as any
  t.equal(failed.status.state, TaskState.TASK_STATE_FAILED)
  t.match(sdkText(failed.status.message.parts), /the agent returned number: return nothing or a string to complete the Task, or \{ inputRequired: "a question" \}/)
})

t.test("output past maxTaskBytes aborts the agent's signal and fails the Task without it", async (t) => {
  const stopped = deferred<string>()
  const agent: AgentFunction = async (ctx) => {
    const chunk = "z".repeat(1000)
    while (!ctx.signal.aborted) {
      ctx.text(chunk)
      await new Promise((resolve) => setImmediate(resolve))
    }
    stopped.resolve(String((ctx.signal.reason as Error).message))
    return "never kept"
  }
  const served = await serve("127.0.0.1:0", { agent, a2a: { maxTaskBytes: 20_000, progressSaveMs: 0 }, logger: false })
  t.teardown(() => served.stop())
  const sdk = await clientOver(`${served.url}/`, "JSONRPC")
  const failed = (await sdk.sendMessage(say("x"))) as any
  t.match(await stopped.promise, /over this agent's limit of 20000 bytes per Task \(maxTaskBytes\)/, "the signal says why")
  t.equal(failed.status.state, TaskState.TASK_STATE_FAILED)
  t.match(sdkText(failed.status.message.parts), /The agent's answer and artifacts so far made this Task \d+ bytes, over this agent's limit of 20000 bytes/)
  t.same(failed.artifacts, [], "nothing of the output kept")
})

t.test("Postgres: a stream from an agent of your own, cut on one replica, resumes on the other", async (t) => {
  const table = `tn_own_resume_${suffix()}`
  const stores = [0, 1].map(() => new PostgresTaskStore(PG_URL, { table, leaseTable: `${table}_leases` }))
  t.teardown(async () => {
    await stores[1].close()
    await dropPostgres(stores[0], table)
  })
  const gates = [deferred(), deferred()]
  const agent: AgentFunction = async (ctx) => {
    ctx.text("one ")
    await gates[0].promise
    ctx.text("two ")
    await gates[1].promise
    ctx.artifact({ name: "data", parts: [{ kind: "data", data: { n: 2 } }] })
    return "three"
  }
  // No save of the answer so far: B must go by A's event log.
  const a = await serve("127.0.0.1:0", { agent, a2a: { store: stores[0], progressSaveMs: 600_000 }, logger: false })
  t.teardown(() => a.stop())
  const b = await serve("127.0.0.1:0", { agent: async () => "B must not run it", a2a: { store: stores[1] }, logger: false })
  t.teardown(() => b.stop())

  const sdkA = await clientOver(`${a.url}/`, "JSONRPC")
  const first: string[] = []
  let taskId = ""
  for await (const event of sdkA.sendMessageStream(say("go"))) {
    first.push(describe(event))
    if ((event as any).payload.$case === "task") taskId = (event as any).payload.value.id
    if (first.length === 3) break // the Task, working, "one ": then the peer is cut off
  }
  t.same(first, ["task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", 'artifact:answer:[{"text":"one "}]:new'])
  gates[0].resolve() // "two " is said while the peer is away
  const resumed = await fetch(`${b.url}/`, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0", "last-event-id": "3" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SubscribeToTask", params: { id: taskId } }),
  })
  const text = resumed.body!.pipeThrough(new TextDecoderStream())
  let all = ""
  const frames: any[] = []
  for await (const piece of text) {
    all += piece
    const blocks = all.split("\n\n")
    all = blocks.pop()!
    for (const block of blocks) {
      const data = block.split("\n").find((line) => line.startsWith("data:"))
      if (data) frames.push(JSON.parse(data.slice(5)).result)
    }
    if (frames.length === 2) gates[1].resolve() // the Task and the missed chunk arrived: let the agent finish
  }
  const kinds = frames.map((frame) => Object.keys(frame)[0])
  t.same(kinds, ["task", "artifactUpdate", "artifactUpdate", "artifactUpdate", "statusUpdate"], "the Task, the missed chunk, the data artifact, the answer's end, completed")
  t.equal(frames[1].artifactUpdate.artifact.parts[0].text, "two ", "the chunk said while the peer was away, once")
  t.same(frames[2].artifactUpdate.artifact.parts, [{ data: { n: 2 } }])
  t.equal(frames[4].statusUpdate.status.state, "TASK_STATE_COMPLETED")
  const stored = await stores[1].get(taskId)
  t.same(stored?.artifacts?.at(-1)?.parts, [{ kind: "text", text: "one two three" }], "the answer whole in the store")
})

t.test("bad artifacts and appends to a finished artifact are TypeErrors the agent can catch", async (t) => {
  const thrown: string[] = []
  const attempt = (work: () => unknown) => {
    try {
      work()
    } catch (err) {
      thrown.push(`${(err as Error).name}: ${(err as Error).message}`)
    }
  }
  const agent: AgentFunction = async (ctx) => {
    attempt(() => ctx.artifact({ parts: [] }))
    attempt(() => ctx.artifact({ parts: [{ kind: "file", file: { name: "x" } }] }))
    attempt(() => ctx.artifact({ parts: [{ kind: "image" } as never] }))
    const whole = ctx.artifact({ parts: [{ kind: "text", text: "whole" }] })
    attempt(() => whole.append([{ kind: "text", text: "more" }]))
    return "done"
  }
  const served = await serve("127.0.0.1:0", { agent, logger: false })
  t.teardown(() => served.stop())
  const sdk = await clientOver(`${served.url}/`, "JSONRPC")
  const done = (await sdk.sendMessage(say("x"))) as any
  t.equal(done.status.state, TaskState.TASK_STATE_COMPLETED)
  t.same(thrown, [
    "TypeError: ctx.artifact({ parts }) should be a non-empty array of parts",
    "TypeError: ctx.artifact({ parts })[0] file should have either bytes (base64) or uri, a string",
    'TypeError: ctx.artifact({ parts })[0] kind should be "text", "file" or "data", got "image"',
    `TypeError: artifact ${done.artifacts[0].artifactId} is complete (its last chunk was sent): add a new artifact, or pass lastChunk: false to ctx.artifact() to stream into it`,
  ])
  t.same(done.artifacts.map((a: any) => sdkText(a.parts)), ["whole", "done"], "only the good artifact, then the answer")
})

t.test("push: a webhook gets the agent's status message as it is saved, and its artifacts with the last state", async (t) => {
  const hook = Fastify()
  const received: any[] = []
  // Notifications come as application/a2a+json: read as text, parsed here.
  hook.removeAllContentTypeParsers()
  hook.addContentTypeParser("*", { parseAs: "string" }, (_request, body, done) => done(null, body))
  hook.post("/hook", async (request) => {
    received.push(JSON.parse(request.body as string))
    return ""
  })
  await hook.listen({ port: 0, host: "127.0.0.1" })
  t.teardown(() => hook.close())
  const { port } = hook.server.address() as { port: number }
  const agent: AgentFunction = async (ctx) => {
    await ctx.status("halfway")
    ctx.artifact({ name: "table", parts: [{ kind: "data", data: { rows: 2 } }] })
    ctx.text("streamed ")
    return "answer"
  }
  const served = await serve("127.0.0.1:0", { agent, a2a: { push: { allow: [`127.0.0.1:${port}`] } }, logger: false })
  t.teardown(() => served.stop())
  const sent = await callRpc(
    served.url,
    rpc("SendMessage", { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "go" }] }, configuration: { taskPushNotificationConfig: { url: `http://127.0.0.1:${port}/hook` } } }),
    { "a2a-version": "1.0" },
  )
  t.equal(sent.result.task.status.state, "TASK_STATE_COMPLETED")
  await waitFor(() => received.some((body) => body.statusUpdate?.status.state === "TASK_STATE_COMPLETED"), 10_000, "the completed notification")
  const seen = received.map((body) =>
    body.statusUpdate
      ? `${body.statusUpdate.status.state}${body.statusUpdate.status.message ? `: ${body.statusUpdate.status.message.parts[0].text}` : ""}`
      : `artifact ${body.artifactUpdate.artifact.name}`,
  )
  t.same(seen, ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_WORKING: halfway", "artifact table", "artifact answer", "TASK_STATE_COMPLETED"])
  t.equal(received.at(-2).artifactUpdate.artifact.parts[0].text, "streamed answer")
})
