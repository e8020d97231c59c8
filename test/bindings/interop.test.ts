import { TaskNotFoundError } from "@a2a-js/sdk/errors"
import { CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest, TaskState } from "@a2a-js/sdk"
import { ClientFactory } from "@a2a-js/sdk/client"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { serve, type ServedAgent } from "../../plugins/serve.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { errorWith, gatedModel, postRpc, RecordingStore, sseMessages, waitFor } from "../fixtures/helpers.js"
import { sendAndGet } from "../fixtures/sdk-scenarios.js"

/**
 * A real listening server driven by the official @a2a-js/sdk 1.x client
 * (A2A-Version 1.0) and by a header-less 0.3 peer speaking raw JSON-RPC.
 */


async function start(t: Test, store?: TaskStore) {
  const m = gatedModel()
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(m.respond), a2a: { name: "interop", store }, logger: false })
  t.teardown(() => srv.stop())
  const sdk = await new ClientFactory().createFromUrl(srv.url)
  return { srv, sdk, ...m }
}

const say = (text: string, extra: Record<string, unknown> = {}) =>
  SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] }, ...extra })

const textOf = (part: { content?: { $case: string; value: unknown } } | undefined) => (part?.content?.$case === "text" ? part.content.value : undefined)

t.test("official SDK: blocking send, returnImmediately, get with historyLength", async (t) => {
  const { sdk } = await start(t)
  await sendAndGet(t, sdk)
})

t.test("official SDK: list with paging and filters", async (t) => {
  const { sdk } = await start(t)
  const contextId = "ctx-list"
  const ids: string[] = []
  for (let i = 0; i < 5; i++) {
    const task = (await sdk.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: `l-${i}`, contextId, role: "ROLE_USER", parts: [{ text: `n${i}` }] } }))) as any
    ids.push(task.id)
  }
  await sdk.sendMessage(say("other context"))
  const seen: string[] = []
  let pageToken = ""
  do {
    const page = await sdk.listTasks(ListTasksRequest.fromJSON({ contextId, pageSize: 2, pageToken, status: "TASK_STATE_UNSPECIFIED" }))
    t.equal(page.totalSize, 5)
    t.ok(page.tasks.length <= 2)
    seen.push(...page.tasks.map((task) => task.id))
    pageToken = page.nextPageToken
  } while (pageToken)
  t.same(seen.sort(), [...ids].sort(), "the pages hold each task of the context once")
  const completed = await sdk.listTasks(ListTasksRequest.fromJSON({ status: "TASK_STATE_COMPLETED", includeArtifacts: true }))
  t.equal(completed.totalSize, 6)
  t.ok(completed.tasks.every((task) => task.artifacts.length === 1), "includeArtifacts brings the artifacts")
  const unset = await sdk.listTasks({} as never)
  t.equal(unset.totalSize, 6, "the SDK's UNRECOGNIZED status (none set) lists everything")
})

t.test("official SDK: cancel stops a running task for good", async (t) => {
  const store = new RecordingStore()
  const { sdk, signals, srv } = await start(t, store)
  const running = (await sdk.sendMessage(say("wait for cancel", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => signals.length === 1)
  const canceled = (await sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id }))) as any
  t.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED)
  t.equal(signals[0].aborted, true, "the model request saw the abort")
  const later = (await sdk.getTask(GetTaskRequest.fromJSON({ id: running.id }))) as any
  t.equal(later.status.state, TaskState.TASK_STATE_CANCELED)
  await t.rejects(sdk.cancelTask(CancelTaskRequest.fromJSON({ id: running.id })), errorWith({ envelopeCode: -32002 }), "a terminal task is not cancelable")
  // stop() waits for the canceled run to let go: whatever it would still save is saved by then.
  await srv.stop()
  t.same(store.statesOf(running.id), ["submitted", "working", "canceled"], "no later save overwrote canceled")
})

t.test("official SDK: stream and resubscribe", async (t) => {
  const { sdk, gates } = await start(t)
  const cases: string[] = []
  let artifactText: unknown
  for await (const event of sdk.sendMessageStream(say("stream me"))) {
    const payload = (event as any).payload
    cases.push(payload.$case === "statusUpdate" ? `status:${TaskState[payload.value.status.state]}` : payload.$case)
    if (payload.$case === "artifactUpdate") artifactText = textOf(payload.value.artifact.parts[0])
  }
  t.same(cases, ["task", "status:TASK_STATE_WORKING", "artifactUpdate", "status:TASK_STATE_COMPLETED"], "task first, then updates; the stream closes at completion")
  t.equal(artifactText, "echo: stream me")

  const pending = (await sdk.sendMessage(say("wait to resubscribe", { configuration: { returnImmediately: true } }))) as any
  await waitFor(() => gates.has("wait to resubscribe"))
  const resubscribed: string[] = []
  const reading = (async () => {
    for await (const event of sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: pending.id }))) {
      const payload = (event as any).payload
      resubscribed.push(payload.$case === "task" ? `task:${TaskState[payload.value.status.state]}` : payload.$case === "statusUpdate" ? `status:${TaskState[payload.value.status.state]}` : payload.$case)
      if (resubscribed.length === 1) gates.get("wait to resubscribe")!.resolve("released")
    }
  })()
  await reading
  t.same(resubscribed, ["task:TASK_STATE_WORKING", "artifactUpdate", "status:TASK_STATE_COMPLETED"])
  await t.rejects(
    (async () => {
      for await (const _ of sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: pending.id }))) break
    })(),
    errorWith({ envelopeCode: -32004 }),
    "resubscribing to a finished task is unsupported",
  )
})

t.test("official SDK: a streaming model's chunks arrive in order as artifact updates that join into the answer", async (t) => {
  const chunks = ["Str", "eam", "ed ", "answer"]
  const client = createLocalClient(async function* () {
    for (const chunk of chunks) yield chunk
  })
  const srv = await serve("127.0.0.1:0", { client, a2a: { name: "interop" }, logger: false })
  t.teardown(() => srv.stop())
  const sdk = await new ClientFactory().createFromUrl(srv.url)
  const updates: Array<{ text: unknown; append: boolean; lastChunk: boolean; id: string }> = []
  const cases: string[] = []
  for await (const event of sdk.sendMessageStream(say("stream it"))) {
    const payload = (event as any).payload
    cases.push(payload.$case === "statusUpdate" ? `status:${TaskState[payload.value.status.state]}` : payload.$case)
    if (payload.$case === "artifactUpdate") {
      const { artifact, append, lastChunk } = payload.value
      updates.push({ text: textOf(artifact.parts[0]), append, lastChunk, id: artifact.artifactId })
    }
  }
  t.same(cases, ["task", "status:TASK_STATE_WORKING", ...chunks.map(() => "artifactUpdate"), "artifactUpdate", "status:TASK_STATE_COMPLETED"])
  t.same(
    updates.map((u) => u.text),
    [...chunks, ""],
    "each chunk in order, then the empty last chunk",
  )
  t.same(updates.map((u) => u.append), [false, true, true, true, true], "the first creates the artifact, the rest append")
  t.same(updates.map((u) => u.lastChunk), [false, false, false, false, true])
  t.equal(new Set(updates.map((u) => u.id)).size, 1, "one artifact")
})

t.test("official SDK: not-found errors", async (t) => {
  const { sdk } = await start(t)
  const missing = GetTaskRequest.fromJSON({ id: "no-such-task" })
  await t.rejects(sdk.getTask(missing), TaskNotFoundError)
  await t.rejects(sdk.cancelTask(CancelTaskRequest.fromJSON({ id: "no-such-task" })), errorWith({ envelopeCode: -32001 }))
  await t.rejects(
    (async () => {
      for await (const _ of sdk.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: "no-such-task" }))) break
    })(),
    { name: "TaskNotFoundError", message: /no-such-task/ },
  )
})

/** A 0.3 peer: no A2A-Version header, `kind` on parts, bare Task results. */
const post = (srv: ServedAgent, body: unknown, headers: Record<string, string> = {}) => postRpc(srv.url, body, headers)

t.test("a 0.3 peer: SendMessage then GetTask polling, with kind parts", async (t) => {
  const { srv } = await start(t)
  const sent = await (await post(srv, { jsonrpc: "2.0", id: "a", method: "message/send", params: { message: { kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "old peer" }] } } })).json()
  t.equal(sent.result.kind, "task", "a bare Task")
  t.equal(sent.result.status.state, "submitted", "0.3 answers at once by default")
  let task: any
  await waitFor(async () => {
    task = (await (await post(srv, { jsonrpc: "2.0", id: "b", method: "tasks/get", params: { id: sent.result.id } })).json()).result
    return task.status.state === "completed"
  })
  t.same(task.artifacts[0].parts, [{ kind: "text", text: "echo: old peer" }])
  t.same(task.history.map((m: any) => m.role), ["user", "agent"])
})

t.test("a 0.3 peer: message/stream events carry kind and final", async (t) => {
  const { srv } = await start(t)
  const res = await post(srv, { jsonrpc: "2.0", id: 9, method: "message/stream", params: { message: { messageId: "s1", role: "user", parts: [{ kind: "text", text: "s" }] } } })
  t.match(res.headers.get("content-type"), /^text\/event-stream/)
  const events = sseMessages(await res.text())
  t.ok(events.every((e) => e.jsonrpc === "2.0" && e.id === 9), "each event is a response to the request id")
  t.same(
    events.map((e) => [e.result.kind, e.result.status?.state, e.result.final]),
    [
      ["task", "submitted", undefined],
      ["status-update", "working", false],
      ["artifact-update", undefined, undefined],
      ["status-update", "completed", true],
    ],
  )
})

t.test("versions: 1.0 shapes on request, -32009 for the rest", async (t) => {
  const { srv } = await start(t)
  const v1 = await (await post(srv, { jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "v", role: "ROLE_USER", parts: [{ text: "x" }] } } }, { "a2a-version": "1.0" })).json()
  t.equal(v1.result.task.status.state, "TASK_STATE_COMPLETED")
  t.same(v1.result.task.history[0].parts, [{ text: "x" }], "parts without kind")
  t.equal(v1.result.task.history[0].role, "ROLE_USER")
  t.notOk("kind" in v1.result.task)
  const patch = await (await post(srv, { jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: v1.result.task.id } }, { "a2a-version": "1.0.1" })).json()
  t.equal(patch.result.status.state, "TASK_STATE_COMPLETED", "patch versions do not count")
  const future = await (await post(srv, { jsonrpc: "2.0", id: 3, method: "GetTask", params: { id: "x" } }, { "a2a-version": "2.0" })).json()
  t.match(future, { id: 3, error: { code: -32009, message: /"2.0" is not supported/ } })
  const notFound = await (await post(srv, { jsonrpc: "2.0", id: 4, method: "GetTask", params: { id: "x" } }, { "a2a-version": "1.0" })).json()
  t.match(notFound.error, { code: -32001, data: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "TASK_NOT_FOUND", domain: "a2a-protocol.org", metadata: { taskId: "x" } }] })
})
