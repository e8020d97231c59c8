import { JsonRpcTransport, TaskNotFoundError } from "a2a-sdk-v03/client"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { serve } from "../../plugins/serve.js"
import { postRpc, rpc, userMessage } from "../fixtures/helpers.js"

/*
 * The official 0.3 client (@a2a-js/sdk 0.3.14) reads a streaming method's answer only as an event stream:
 * an error that comes before the stream starts must arrive as one event holding the JSON-RPC error, or the
 * client throws about the content type instead of the error. 1.0 keeps the plain JSON error.
 */

async function start(t: Test) {
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(({ messages }) => `echo: ${messages.length}`), a2a: { name: "v03" }, logger: false })
  t.teardown(() => srv.stop())
  return { srv, client: new JsonRpcTransport({ endpoint: srv.url + "/" }) }
}

/** Reads a stream to its end, or to the error it throws. */
async function drain(stream: AsyncIterable<unknown>): Promise<unknown[]> {
  const events: unknown[] = []
  for await (const event of stream) events.push(event)
  return events
}

t.test("0.3 client: tasks/resubscribe to an unknown Task throws TaskNotFoundError", async (t) => {
  const { client } = await start(t)
  const error = await drain(client.resubscribeTask({ id: "no-such-task" })).then(
    () => undefined,
    (err: unknown) => err as Error & { cause?: unknown },
  )
  t.ok(error, "the stream failed")
  t.match(error!.message, /SSE event contained an error: .*no-such-task.*\(Code: -32001\)/, "the client read the error from the event")
  t.ok(error!.cause instanceof TaskNotFoundError, "as the SDK's TaskNotFoundError")
})

t.test("0.3 client: message/stream to a finished Task throws the server's error, not a content-type error", async (t) => {
  const { client } = await start(t)
  const done = (await client.sendMessage({ message: { kind: "message", messageId: "m-1", role: "user", parts: [{ kind: "text", text: "hi" }] }, configuration: { blocking: true } })) as { id: string; status: { state: string } }
  t.equal(done.status.state, "completed")
  const again = drain(client.sendMessageStream({ message: { kind: "message", messageId: "m-2", role: "user", taskId: done.id, parts: [{ kind: "text", text: "more" }] } }))
  await t.rejects(again, { message: /SSE event contained an error: .*\(Code: -32\d{3}\)/ })
  await t.rejects(drain(client.sendMessageStream({ message: { kind: "message", messageId: "m-3", role: "user", taskId: "nope", parts: [{ kind: "text", text: "x" }] } })), {
    cause: TaskNotFoundError,
  })
})

t.test("1.0 keeps the plain JSON error for a refused stream; 0.3's is one event without an id", async (t) => {
  const { srv } = await start(t)
  const v10 = await postRpc(srv.url, rpc("SubscribeToTask", { id: "no-such-task" }), { "a2a-version": "1.0" })
  t.match(v10.headers.get("content-type"), /^application\/json/)
  t.match(await v10.json(), { error: { code: -32001 } })
  const v03 = await postRpc(srv.url, rpc("message/stream", { message: { ...userMessage("x"), taskId: "nope" } }), { accept: "text/event-stream" })
  t.equal(v03.status, 200)
  t.match(v03.headers.get("content-type"), /^text\/event-stream/)
  const text = await v03.text()
  t.match(text, /^data: \{"jsonrpc":"2\.0","id":1,"error":\{"code":-32001,/, "one data frame holding the error")
  t.notMatch(text, /^id:/m, "with no event id to resume from")
})
