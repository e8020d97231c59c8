import { EventEmitter } from "node:events"
import type { FastifyReply } from "fastify"
import t, { type Test } from "tap"
import { EventRecorder } from "../../lib/streams/event-recorder.js"
import { eventQueue, TaskEvents } from "../../lib/streams/events.js"
import type { EventLog } from "../../lib/streams/event-log.js"
import { writeEvents } from "../../plugins/sse.js"
import { createClient } from "../../lib/client/client.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { serve } from "../../plugins/serve.js"
import { resumeAfterTheEnd, resumeMidAnswer } from "../fixtures/resume-scenarios.js"
import { callRpc, deferred, dispatcherFor as setup, joinedChunks as joined, localServer, memoryLogger, kindsOf as kinds, openStream, resumeRpc as resume, rpc, scriptedModel, sendStreamingRpc as send, tmpDir, userMessage, waitFor } from "../fixtures/helpers.js"

/**
 * Token streaming over A2A and streams that resume: the model's chunks
 * reach the peer as artifact-update events, every frame has an `id:`, and
 * SubscribeToTask with Last-Event-ID replays exactly what came after it.
 */

type Server = Awaited<ReturnType<typeof serve>>

async function server(t: Test, store: TaskStore, client: ReturnType<typeof scriptedModel>["client"], a2a: Record<string, unknown> = {}): Promise<Server> {
  const srv = await serve("127.0.0.1:0", { client, a2a: { store, ...a2a }, logger: false })
  t.teardown(() => srv.stop())
  return srv
}



t.test("the model's chunks reach the peer as they are written, and join into the final artifact exactly", async (t) => {
  const model = scriptedModel()
  const store = new InMemoryTaskStore()
  const srv = await server(t, store, model.client)
  const stream = await openStream(srv.url, send("hi"))
  await waitFor(() => stream.messages.length >= 2, 5000, "the task and its working status")
  model.say("Hel")
  await waitFor(() => stream.messages.length >= 3, 5000, "the first chunk, before the model wrote the rest")
  const first = stream.messages[2].result.artifactUpdate
  t.match(first, { artifact: { parts: [{ text: "Hel" }] }, lastChunk: false }, "the first chunk creates the artifact")
  t.notOk(first.append, "the first chunk does not append")
  model.say("lo, ")
  model.say("world")
  model.end()
  const results = (await stream.done).map((m) => m.result)
  t.same(kinds(results), ["task", "statusUpdate", "artifactUpdate", "artifactUpdate", "artifactUpdate", "artifactUpdate", "statusUpdate"])
  t.ok(results.slice(3, 6).every((r) => r.artifactUpdate.append === true), "every later chunk appends")
  t.equal(results[5].artifactUpdate.lastChunk, true, "the last chunk says so")
  t.equal(results.at(-1).statusUpdate.status.state, "TASK_STATE_COMPLETED")
  const taskId = results[0].task.id
  const stored = await store.get(taskId)
  t.equal(joined(results), "Hello, world", "the chunks join into the answer")
  t.equal(stored?.artifacts?.[0]?.parts[0]?.kind === "text" && stored.artifacts[0].parts[0].text, "Hello, world", "the final artifact is exactly the chunks' text")
  t.equal(results[2].artifactUpdate.artifact.artifactId, stored?.artifacts?.[0]?.artifactId, "the chunks build the stored artifact (same id)")
  t.same(stream.ids, [1, 2, 3, 4, 5, 6, 7], "every frame has an id, the Task snapshot's included, one more each")
})

t.test("a 0.3 peer gets artifact-update chunks with kind, append and lastChunk", async (t) => {
  const model = scriptedModel()
  const srv = await server(t, new InMemoryTaskStore(), model.client)
  model.say("a")
  model.say("b")
  model.end()
  const stream = await openStream(srv.url, rpc("message/stream", { message: userMessage("x") }), { "a2a-version": "0.3" })
  const results = (await stream.done).map((m) => m.result)
  const chunks = results.filter((r) => r.kind === "artifact-update")
  t.match(chunks, [
    { kind: "artifact-update", artifact: { parts: [{ kind: "text", text: "a" }] }, lastChunk: false },
    { kind: "artifact-update", append: true, artifact: { parts: [{ kind: "text", text: "b" }] }, lastChunk: false },
    { kind: "artifact-update", append: true, artifact: { parts: [{ kind: "text", text: "" }] }, lastChunk: true },
  ])
  t.match(results.at(-1), { kind: "status-update", final: true, status: { state: "completed" } })
})

t.test("GetTask mid-run shows the answer so far (saved every progressSaveMs); the final save holds it whole", async (t) => {
  const model = scriptedModel()
  const store = new InMemoryTaskStore()
  const srv = await server(t, store, model.client, { progressSaveMs: 20 })
  const sent = await callRpc(srv.url, rpc("SendMessage", { message: userMessage("x"), configuration: { blocking: false } }))
  const id = sent.result.id
  model.say("partial ")
  const soFar = async () => (await callRpc(srv.url, rpc("GetTask", { id }))).result
  await waitFor(async () => (await soFar()).artifacts?.[0]?.parts[0]?.text === "partial ", 5000, "the answer so far in GetTask")
  t.equal((await soFar()).status.state, "working", "still working")
  model.say("and the rest")
  model.end()
  await waitFor(async () => (await soFar()).status.state === "completed")
  const done = await soFar()
  t.equal(done.artifacts.length, 1, "one artifact: the answer so far became the answer")
  t.equal(done.artifacts[0].parts[0].text, "partial and the rest")
})

/** The stores a stream resumes on, on the same server. */
const sameServerStores: Array<[string, (t: Test) => TaskStore]> = [
  ["memory", () => new InMemoryTaskStore()],
  ["file", (t) => new FileTaskStore(tmpDir(t))],
]

for (const [name, makeStore] of sameServerStores) {
  t.test(`${name} store: a stream cut mid-answer resumes with Last-Event-ID, every event after it exactly once`, async (t) => {
    const model = scriptedModel()
    const srv = await server(t, makeStore(t), model.client)
    await resumeMidAnswer(t, { model, streamUrl: srv.url, resumeUrl: srv.url })
  })

  t.test(`${name} store: a Task that finished while the peer was away replays up to its end, then the stream closes`, async (t) => {
    const model = scriptedModel()
    const srv = await server(t, makeStore(t), model.client)
    await resumeAfterTheEnd(t, { model, streamUrl: srv.url, resumeUrl: srv.url })
  })
}

t.test("Last-Event-ID that is not a position, or past the Task's last event, is refused with -32602", async (t) => {
  const model = scriptedModel()
  const srv = await server(t, new InMemoryTaskStore(), model.client)
  const first = await openStream(srv.url, send("hi"))
  await waitFor(() => first.messages.length >= 2)
  const taskId = first.messages[0].result.task.id
  for (const bad of ["abc", "-1", "1.5", "99999999999999999"]) {
    const answer = await callRpc(srv.url, resume(taskId), { "a2a-version": "1.0", "last-event-id": bad })
    t.match(answer.error, { code: -32602, message: /Last-Event-ID/ }, `Last-Event-ID ${bad}`)
  }
  const past = await callRpc(srv.url, resume(taskId), { "a2a-version": "1.0", "last-event-id": "500" })
  t.match(past.error, { code: -32602, message: /past the last event/ })
  model.end()
  await first.done
})

t.test("a Last-Event-ID older than the log keeps is told to re-read the Task", async (t) => {
  const model = scriptedModel()
  const store = new InMemoryTaskStore({ eventRetentionMs: 300 })
  const srv = await server(t, store, model.client)
  model.say("x")
  model.end()
  const first = await openStream(srv.url, send("hi"))
  const taskId = (await first.done)[0].result.task.id
  // Written (in the background, batched), then gone once its retention passed.
  await waitFor(async () => (await store.events.read(taskId, 0, 10)).length > 0, 15_000, "the Task's events in the log")
  await waitFor(async () => (await store.events.read(taskId, 0, 10)).length === 0, 15_000, "the ended Task's log to go")
  const answer = await callRpc(srv.url, resume(taskId), { "a2a-version": "1.0", "last-event-id": "1" })
  t.match(answer.error, { code: -32602, message: /no longer kept; read the task with GetTask/ })
})

t.test("a store without an event log answers Last-Event-ID with -32004, and streams without it as before", async (t) => {
  const model = scriptedModel()
  const inner = new InMemoryTaskStore()
  const hostStore: TaskStore = { get: (id) => inner.get(id), save: (task) => inner.save(task) }
  const srv = await server(t, hostStore, model.client)
  const first = await openStream(srv.url, send("hi"))
  await waitFor(() => first.messages.length >= 2)
  const taskId = first.messages[0].result.task.id
  const answer = await callRpc(srv.url, resume(taskId), { "a2a-version": "1.0", "last-event-id": "1" })
  t.match(answer.error, { code: -32004, message: /cannot be resumed/ })
  model.say("ok")
  model.end()
  t.equal(joined((await first.done).map((m) => m.result)), "ok")
})

t.test("an event queue whose reader falls maxQueued behind drops what it holds, ends, and says so", async (t) => {
  const events = new TaskEvents()
  const queue = eventQueue(events, "t-1", 3)
  const event = (position: number) => ({ position, event: { type: "status" as const, taskId: "t-1", status: { state: "working" as const } } })
  for (let position = 1; position <= 3; position++) events.publish(event(position))
  t.notOk(queue.overflow.aborted, "three queued: within the bound")
  events.publish(event(4))
  t.ok(queue.overflow.aborted, "the fourth passes it")
  t.same(await queue.next(), { value: undefined, done: true }, "the queue ends without handing out what it held")
  events.publish(event(5))
  t.same(await queue.next(), { value: undefined, done: true }, "and takes nothing more")
})

t.test("a stream whose reader falls 10000 events behind is cut off; the peer resumes from its last id", async (t) => {
  const CHUNKS = 12_000
  const { dispatcher, store } = setup(async function* () {
    for (let i = 0; i < CHUNKS; i++) yield `${i} `
  }, new InMemoryTaskStore())
  const log = memoryLogger()
  // The peer reads nothing: every event waits in its queue.
  const outcome = await dispatcher.dispatch(send("hi"), { log, version: "1.0", endSignal: () => new AbortController().signal })
  await waitFor(() => outcome.cutOff?.aborted === true, 15_000, "the stream to be cut off")
  const frames = []
  for await (const frame of outcome.stream!) frames.push(frame)
  t.same(frames.map((f) => f.id), [1], "what waited was dropped: the peer has the Task alone, id 1")
  const taskId = (frames[0].response as { result: { task: { id: string } } }).result.task.id
  await waitFor(async () => (await store.get(taskId))?.status.state === "completed", 15_000, "the Task to go on and complete")
  const again = await dispatcher.dispatch(resume(taskId), { log, version: "1.0", lastEventId: "1", endSignal: () => new AbortController().signal })
  const results = []
  for await (const frame of again.stream!) results.push((frame.response as { result: unknown }).result)
  t.equal((results.at(-1) as any).statusUpdate?.status.state, "TASK_STATE_COMPLETED", "a resume gets the rest, to the end")
  t.equal(joined(results.slice(1)), Array.from({ length: CHUNKS }, (_, i) => `${i} `).join(""), "every chunk after the last id it had")
})

t.test("the SSE writer drops the connection of a stream cut off, though it waits for the socket to drain", async (t) => {
  const writes: string[] = []
  let destroyed = false
  const raw = Object.assign(new EventEmitter(), {
    writableEnded: false,
    writeHead: () => {},
    write: (text: string) => (writes.push(text), false), // the peer never drains
    end: () => {},
    destroy: () => {
      destroyed = true
      raw.emit("close")
    },
  })
  const peerGone = new AbortController()
  raw.once("close", () => peerGone.abort())
  const cutOff = new AbortController()
  const reply = { raw, request: { raw: { httpVersionMajor: 1 } }, log: memoryLogger() } as unknown as FastifyReply
  async function* frames() {
    for (let id = 1; ; id++) yield { id, response: { jsonrpc: "2.0" as const, id: 1, result: {} } }
  }
  const writing = writeEvents(reply, frames(), peerGone.signal, 60_000, cutOff.signal)
  await waitFor(() => writes.length === 1, 5000, "the first frame, then a wait for drain")
  cutOff.abort()
  await writing
  t.ok(destroyed, "the connection was dropped")
  t.equal(writes.length, 1, "nothing more was written")
  t.match(writes[0], /^id: 1\ndata: /, "the frame carried its id")
})

t.test("an OpenAI-style endpoint's streamed chunks reach the A2A peer as artifact updates while the model still writes", async (t) => {
  const rest = deferred()
  const modelUrl = await localServer(t, (req, res) => {
    req.resume()
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      const chunk = (content: string) => res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`)
      chunk("Hello")
      // The rest only once the peer has the first chunk.
      void rest.promise.then(() => {
        chunk(", world")
        res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })}\n\n`)
        res.end("data: [DONE]\n\n")
      })
    })
  })
  const store = new InMemoryTaskStore()
  const srv = await server(t, store, createClient({ baseUrl: modelUrl, style: "openai", model: "m", apiKey: "k" }))
  const stream = await openStream(srv.url, send("hi"))
  await waitFor(() => stream.messages.some((m) => m.result.artifactUpdate), 5000, "the first chunk at the peer")
  t.match(stream.messages.at(-1).result.artifactUpdate, { artifact: { parts: [{ text: "Hello" }] }, lastChunk: false }, "it came before the model wrote the rest")
  rest.resolve()
  const results = (await stream.done).map((m) => m.result)
  t.equal(joined(results), "Hello, world")
  t.equal(results.at(-1).statusUpdate.status.state, "TASK_STATE_COMPLETED")
})

t.test("memory store: a Task nobody streams costs no event log; one subscribed mid-run is logged from the subscription on, and resumes", async (t) => {
  const model = scriptedModel()
  const store = new InMemoryTaskStore()
  const srv = await server(t, store, model.client)
  const sent = await callRpc(srv.url, rpc("SendMessage", { message: userMessage("x"), configuration: { returnImmediately: true } }), { "a2a-version": "1.0" })
  const taskId = sent.result.task.id
  model.say("before ")
  await waitFor(async () => (await callRpc(srv.url, rpc("GetTask", { id: taskId }), { "a2a-version": "1.0" })).result.status.state === "TASK_STATE_WORKING")
  t.same(await store.events.read(taskId, 0, 10), [], "nothing logged while no stream follows it")
  const first = await openStream(srv.url, resume(taskId))
  await waitFor(() => first.messages.length >= 1, 5000, "the Task")
  const snapshotId = first.ids[0]!
  t.ok(snapshotId >= 3, "the snapshot's id counts the events before it (created, working, a chunk)")
  model.say("after ")
  await waitFor(() => first.messages.length >= 2, 5000, "the chunk said once it streamed")
  first.cut()
  model.say("away")
  model.end()
  const again = await openStream(srv.url, resume(taskId), { "last-event-id": String(first.ids.at(-1)) })
  const results = (await again.done).map((m) => m.result)
  t.same(kinds(results), ["task", "artifactUpdate", "artifactUpdate", "statusUpdate"], "the chunk said while away, the last chunk, the end")
  t.equal(joined(results.slice(1)), "away", "only what came after the last id")
  t.equal((await store.events.read(taskId, 0, 100))[0]?.position, snapshotId + 1, "the log starts after the first stream's snapshot")
})

t.test("the recorder's idle() waits for the logs it marks ended, not only for its appends", async (t) => {
  const ending = deferred()
  let endedCalls = 0
  const log: EventLog = {
    append: async () => [],
    read: async () => [],
    lastPosition: async () => 0,
    ended: async () => {
      endedCalls++
      await ending.promise
    },
  }
  const recorder = new EventRecorder(log, memoryLogger())
  recorder.record({ position: 1, event: { type: "status", taskId: "t-1", status: { state: "completed" } } })
  recorder.ended("t-1")
  let idle = false
  const stopping = recorder.idle().then(() => (idle = true))
  await waitFor(() => endedCalls === 1, 5000, "the end to be written, after the append")
  t.notOk(idle, "still writing the end")
  ending.resolve()
  await stopping
  t.ok(idle, "idle once the end is written")
})
