import t from "tap"
import { withJsonNames } from "../../lib/a2a/proto-names.js"
import { createLocalClient } from "../../lib/client/client.js"
import { serve } from "../../plugins/serve.js"
import { callRpc, rpc } from "../fixtures/helpers.js"

/**
 * ProtoJSON field names on input: a peer may name a field by its proto name
 * (message_id) as well as its JSON name (messageId); both are read, on every
 * binding, and answers use the JSON names.
 */

const V1 = { "a2a-version": "1.0", "content-type": "application/json" }

t.test("withJsonNames renames proto names, leaves the peer's own data alone, and copies only what changes", async (t) => {
  const params = {
    message: {
      message_id: "m-1",
      role: "ROLE_USER",
      context_id: "ctx",
      parts: [{ text: "hi", media_type: "text/plain" }, { data: { snake_key: 1, nested: { deep_key: 2 } } }],
      metadata: { trace_id: "t-1" },
    },
    configuration: { history_length: 2, return_immediately: true, accepted_output_modes: ["text/plain"] },
  }
  const renamed = withJsonNames(params)
  t.same(renamed, {
    message: {
      messageId: "m-1",
      role: "ROLE_USER",
      contextId: "ctx",
      parts: [{ text: "hi", mediaType: "text/plain" }, { data: { snake_key: 1, nested: { deep_key: 2 } } }],
      metadata: { trace_id: "t-1" },
    },
    configuration: { historyLength: 2, returnImmediately: true, acceptedOutputModes: ["text/plain"] },
  })
  t.equal(params.message.message_id, "m-1", "the request as sent is not changed")
  const plain = { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "x" }] } }
  t.equal(withJsonNames(plain), plain, "nothing to rename: the same object, no copy")
  t.same(withJsonNames({ task_id: "from-body", taskId: "from-path" }), { taskId: "from-path" }, "given both ways, the JSON name wins")
  t.same(withJsonNames({ taskId: "first", task_id: "second" }), { taskId: "first" }, "whatever their order")
  const hostile = JSON.parse('{"__proto__": {"polluted": true}, "page_size": 1}') as Record<string, unknown>
  const safe = withJsonNames(hostile)
  t.same(Object.keys(safe), ["__proto__", "pageSize"], "a __proto__ field stays a field")
  t.equal(Object.getPrototypeOf(safe), Object.prototype, "and never becomes the prototype")
  let deep: Record<string, unknown> = { leaf_name: 1 }
  for (let i = 0; i < 10_000; i++) deep = { a: deep }
  t.equal(withJsonNames(deep), deep, "a deep value is left as it is past the depth requests have, without recursing through it")
})

t.test("every binding reads the proto names: SendMessage, push config create, ListTasks paging", async (t) => {
  const served = await serve("127.0.0.1:0", { client: createLocalClient(({ messages }) => `echo: ${messages.at(-1)?.content}`), logger: false, a2a: { push: { allow: ["127.0.0.1"] } } })
  t.teardown(() => served.stop())
  const base = `${served.url}/`

  // JSON-RPC 1.0
  const sent = await callRpc(served.url, rpc("SendMessage", { message: { message_id: "m-rpc", role: "ROLE_USER", context_id: "ctx-proto", parts: [{ text: "one" }] } }), V1)
  t.equal(sent.error, undefined, "message_id is read as messageId")
  t.equal(sent.result.task.contextId, "ctx-proto", "context_id as contextId")
  t.equal(sent.result.task.history[0].messageId, "m-rpc")
  t.notOk(JSON.stringify(sent).includes("_id"), "the answer uses the JSON names")
  const taskId = sent.result.task.id as string

  const created = await callRpc(served.url, rpc("CreateTaskPushNotificationConfig", { task_id: taskId, url: "http://127.0.0.1:9/hook" }), V1)
  t.equal(created.error, undefined, "task_id is read as taskId")
  t.equal(created.result.taskId, taskId)

  // HTTP+JSON 1.0: a body in proto names, then a query
  const rest = await fetch(`${base}message:send`, { method: "POST", headers: V1, body: JSON.stringify({ message: { message_id: "m-rest", role: "ROLE_USER", context_id: "ctx-proto", parts: [{ text: "two" }] } }) })
  t.equal(rest.status, 200, "REST: message_id in the body")
  await callRpc(served.url, rpc("SendMessage", { message: { message_id: "m-3", role: "ROLE_USER", context_id: "ctx-proto", parts: [{ text: "three" }] } }), V1)

  const paged = await callRpc(served.url, rpc("ListTasks", { context_id: "ctx-proto", page_size: 2 }), V1)
  t.equal(paged.result.tasks.length, 2, "JSON-RPC: page_size is read as pageSize")
  t.ok(paged.result.nextPageToken, "with a next page")
  const query = await fetch(`${base}tasks?context_id=ctx-proto&page_size=2`, { headers: V1 })
  t.equal(query.status, 200)
  const listed = (await query.json()) as { tasks: unknown[]; pageSize: number }
  t.equal(listed.tasks.length, 2, "REST: page_size in the query is read as pageSize")
  const bad = await fetch(`${base}tasks?page_size=many`, { headers: V1 })
  t.equal(bad.status, 400, "and checked as pageSize is")
  t.match(await bad.text(), /pageSize/)
})
