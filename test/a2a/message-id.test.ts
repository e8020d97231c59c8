import t from "tap"
import { TaskEvents } from "../../lib/streams/events.js"
import { StoreFollower } from "../../lib/streams/follower.js"
import { JsonRpcDispatcher } from "../../lib/a2a/jsonrpc.js"
import { A2AOperations } from "../../lib/a2a/operations.js"
import { TaskRunner } from "../../lib/a2a/runner.js"
import { createLocalClient } from "../../lib/client/client.js"
import { memoryLogger, RecordingStore, rpc } from "../fixtures/helpers.js"

/** messageId is required by A2A 0.3 and 1.0; a message without one is refused, not given a made-up id. */

function setup() {
  const store = new RecordingStore()
  const log = memoryLogger()
  const events = new TaskEvents()
  // Every first message asks a question, so a follow-up has an input-required Task to continue.
  const runner = new TaskRunner({ store, client: createLocalClient(({ messages }) => (messages.length === 1 ? { text: "which?", inputRequired: true } : "done")), log, events })
  const dispatcher = new JsonRpcDispatcher(new A2AOperations({ store, runner, events, follower: new StoreFollower({ store, runner, log }) }))
  const dispatch = (body: unknown, version?: string) => dispatcher.dispatch(body, { log, version })
  const call = async (body: unknown, version?: string) => JSON.parse((await dispatch(body, version)).body!)
  return { store, dispatch, call }
}

const v10 = (extra: Record<string, unknown> = {}) => ({ role: "ROLE_USER", parts: [{ text: "hi" }], ...extra })
const v03 = (extra: Record<string, unknown> = {}) => ({ kind: "message", role: "user", parts: [{ kind: "text", text: "hi" }], ...extra })

t.test("1.0: SendMessage and SendStreamingMessage without messageId get -32602 naming the field, and nothing is saved", async (t) => {
  const { store, dispatch } = setup()
  for (const method of ["SendMessage", "message/send", "SendStreamingMessage", "message/stream"]) {
    const outcome = await dispatch(rpc(method, { message: v10() }), "1.0")
    t.equal(outcome.stream, undefined, `${method}: a plain answer, no stream`)
    const { error } = JSON.parse(outcome.body!)
    t.equal(error.code, -32602, method)
    t.equal(error.message, "Invalid params: params.message.messageId is required: a unique id the sender gives each message", method)
    t.match(error.data, [{ reason: "INVALID_PARAMS", metadata: { field: "params.message.messageId" } }], `${method}: 1.0 error details`)
  }
  t.same(store.saves, [], "no Task was created")
})

t.test("0.3: a message written in full (kind: \"message\") without messageId gets -32602 naming the field", async (t) => {
  const { store, dispatch } = setup()
  for (const method of ["SendMessage", "message/send", "SendStreamingMessage", "message/stream"]) {
    const outcome = await dispatch(rpc(method, { message: v03() }))
    t.equal(outcome.stream, undefined, `${method}: a plain answer, no stream`)
    t.match(JSON.parse(outcome.body!).error, { code: -32602, message: /params\.message\.messageId is required/, data: { field: "params.message.messageId" } }, method)
  }
  t.same(store.saves, [])
})

t.test("a follow-up to an input-required Task needs its messageId too; the Task waits on, untouched", async (t) => {
  const { store, call } = setup()
  for (const [version, message] of [["1.0", v10], [undefined, v03]] as const) {
    const asked = await call(rpc("SendMessage", { message: message({ messageId: "first" }), configuration: { blocking: true } }), version)
    const task = version === "1.0" ? asked.result.task : asked.result
    t.match(task.status.state, /input-required|INPUT_REQUIRED/, `${version ?? "0.3"}: the Task asks a question`)
    const saves = store.saves.length
    for (const method of ["SendMessage", "SendStreamingMessage"]) {
      const answer = await call(rpc(method, { message: message({ taskId: task.id }) }), version)
      t.match(answer.error, { code: -32602, message: /params\.message\.messageId is required/ }, `${version ?? "0.3"} ${method} follow-up`)
    }
    t.equal(store.saves.length, saves, "nothing saved for the refused follow-ups")
    t.equal((await store.get(task.id))?.status.state, "input-required")
    const answered = await call(rpc("SendMessage", { message: message({ taskId: task.id, messageId: "second" }), configuration: { blocking: true } }), version)
    t.match((version === "1.0" ? answered.result.task : answered.result).status.state, /completed|COMPLETED/, "with its messageId, the follow-up continues the Task")
    t.same((await store.get(task.id))?.history?.map((m) => m.messageId).filter((id) => id === "first" || id === "second"), ["first", "second"], "the sender's ids are kept")
  }
})

t.test("0.3: the short form the spec's example sends ({role, parts}, no kind) still works, and the server gives it an id", async (t) => {
  const { store, call } = setup()
  const sent = await call(rpc("SendMessage", { message: { role: "user", parts: [{ kind: "text", text: "go" }] } }))
  t.equal(sent.result.status.state, "submitted")
  const first = (await store.get(sent.result.id))?.history?.[0]
  t.match(first?.messageId, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, "a UUID messageId")
  const again = await call(rpc("SendMessage", { message: { role: "user", parts: [{ kind: "text", text: "go" }] } }))
  t.not((await store.get(again.result.id))?.history?.[0].messageId, first?.messageId, "a new id per message")
  const v1Short = await call(rpc("SendMessage", { message: { role: "user", parts: [{ kind: "text", text: "go" }] } }), "1.0")
  t.match(v1Short.error, { code: -32602, message: /messageId is required/ }, "1.0 has no short form")
})
