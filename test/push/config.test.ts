import { Writable } from "node:stream"
import { pino } from "pino"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import type { A2ATask } from "../../lib/types.js"
import type { ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { serve } from "../../plugins/serve.js"
import { a2aApp, callRpc, FlakyStore, injectRpc, rpc, sseMessages, userMessage } from "../fixtures/helpers.js"

/** A webhook the guard lets through (an allowed loopback port nobody listens on): nothing here is delivered. */
const HOOK = "http://127.0.0.1:9/hook"
const ALLOW = { allow: ["127.0.0.1"] }
const V1 = { "a2a-version": "1.0" }
const ALICE = { authorization: "Bearer alice-secret-0123456789" }
const BOB = { authorization: "Bearer bob-secret-0123456789abc" }
const tokens = { "alice-secret-0123456789": "alice", "bob-secret-0123456789abc": "bob" }

async function app(t: Test, opts: Partial<ToolnexusA2AOptions> = {}) {
  const store = (opts.store as TaskStore | undefined) ?? new InMemoryTaskStore()
  const server = await a2aApp(t, { client: createLocalClient(() => "done"), push: ALLOW, ...opts, store })
  const call = async (method: string, params: unknown, headers: Record<string, string> = {}) => (await injectRpc(server, rpc(method, params), headers)).json()
  /** A finished Task of `headers`' principal. */
  const task = async (headers: Record<string, string> = {}): Promise<string> => (await call("SendMessage", { message: userMessage("hi"), configuration: { blocking: true } }, headers)).result.id
  return { server, store, call, task }
}

t.test("1.0: Create (the peer's id or a UUID), Get, List in pages, Delete (idempotent); the card says push is on", async (t) => {
  const { server, store, call, task } = await app(t)
  t.equal((await server.inject({ method: "GET", url: "/.well-known/agent-card.json" })).json().capabilities.pushNotifications, true)
  const taskId = await task()
  const auth = { scheme: "Bearer", credentials: "hook-secret" }
  const created = await call("CreateTaskPushNotificationConfig", { taskId, id: "b-hook", url: HOOK, token: "tok-1", authentication: auth }, V1)
  t.same(created.result, { id: "b-hook", taskId, url: HOOK, token: "tok-1", authentication: auth })
  const unnamed = await call("CreateTaskPushNotificationConfig", { taskId, id: "", url: HOOK, token: "" }, V1)
  t.match(unnamed.result.id, /^[0-9a-f-]{36}$/, "no id (or protobuf's empty one): the server gives a UUID")
  t.notOk("token" in unnamed.result, "an empty token is no token")
  await call("CreateTaskPushNotificationConfig", { taskId, id: "a-hook", url: HOOK }, V1)

  t.same((await call("GetTaskPushNotificationConfig", { taskId, id: "b-hook" }, V1)).result, created.result)
  const stored = await store.push!.getConfig(taskId, "b-hook")
  t.equal(stored?.version, "1.0", "the config records the version of the request that created it")

  const ids = ["a-hook", "b-hook", unnamed.result.id].sort()
  const first = (await call("ListTaskPushNotificationConfigs", { taskId, pageSize: 2 }, V1)).result
  t.same(
    first.configs.map((c: { id: string }) => c.id),
    ids.slice(0, 2),
    "in id order",
  )
  t.ok(first.nextPageToken)
  const second = (await call("ListTaskPushNotificationConfigs", { taskId, pageSize: 2, pageToken: first.nextPageToken }, V1)).result
  t.same(
    second.configs.map((c: { id: string }) => c.id),
    ids.slice(2),
  )
  t.equal(second.nextPageToken, "", "empty on the last page")
  t.equal((await call("ListTaskPushNotificationConfigs", { taskId, pageSize: 0 }, V1)).result.configs.length, 3, "pageSize 0 (unset) lists all")
  t.match((await call("ListTaskPushNotificationConfigs", { taskId, pageToken: "nonsense" }, V1)).error, { code: -32602, message: /params\.pageToken is not a nextPageToken/ })

  t.same(await call("DeleteTaskPushNotificationConfig", { taskId, id: "b-hook" }, V1), { jsonrpc: "2.0", id: 1, result: null })
  t.same(await call("DeleteTaskPushNotificationConfig", { taskId, id: "b-hook" }, V1), { jsonrpc: "2.0", id: 1, result: null }, "deleting again is no error")
  const gone = await call("GetTaskPushNotificationConfig", { taskId, id: "b-hook" }, V1)
  t.match(gone.error, { code: -32001, message: `Push notification config not found: b-hook for task ${taskId}` })
  t.match(gone.error.data, [{ reason: "TASK_NOT_FOUND" }])
  t.same(
    (await call("ListTaskPushNotificationConfigs", { taskId }, V1)).result.configs.map((c: { id: string }) => c.id),
    ["a-hook", unnamed.result.id].sort(),
  )
})

t.test("0.3: set (id defaults to the Task's), get without pushNotificationConfigId, list as an array, delete", async (t) => {
  const { store, call, task } = await app(t)
  const taskId = await task()
  const config = { url: HOOK, token: "tok", authentication: { schemes: ["Bearer", "Basic"], credentials: "c" } }
  const set = await call("tasks/pushNotificationConfig/set", { taskId, pushNotificationConfig: config })
  t.same(set.result, { taskId, pushNotificationConfig: { id: taskId, url: HOOK, token: "tok", authentication: { schemes: ["Bearer"], credentials: "c" } } })
  t.same((await store.push!.getConfig(taskId, taskId))?.authentication, { scheme: "Bearer", credentials: "c" }, "the first scheme is the one used")
  t.equal((await store.push!.getConfig(taskId, taskId))?.version, "0.3")
  t.same((await call("tasks/pushNotificationConfig/get", { id: taskId })).result, set.result)
  await call("tasks/pushNotificationConfig/set", { taskId, pushNotificationConfig: { id: "second", url: HOOK } })
  t.same((await call("tasks/pushNotificationConfig/get", { id: taskId, pushNotificationConfigId: "second" })).result, { taskId, pushNotificationConfig: { id: "second", url: HOOK } })
  const list = (await call("tasks/pushNotificationConfig/list", { id: taskId })).result
  t.ok(Array.isArray(list))
  t.same(list.map((c: any) => c.pushNotificationConfig.id).sort(), ["second", taskId].sort())
  t.same((await call("tasks/pushNotificationConfig/delete", { id: taskId, pushNotificationConfigId: "second" })).result, null)
  t.match((await call("tasks/pushNotificationConfig/delete", { id: taskId })).error, { code: -32602, message: /params\.pushNotificationConfigId is required/ })
  t.equal((await call("tasks/pushNotificationConfig/list", { id: taskId })).result.length, 1)
  // The 1.0 names answer in the version asked for: no header is 0.3.
  t.ok(Array.isArray((await call("ListTaskPushNotificationConfigs", { id: taskId })).result))
})

t.test("a config belongs to its Task's owner: another principal gets the same 'task not found' as for no Task, and no credentials", async (t) => {
  const { call, task } = await app(t, { auth: { tokens } })
  const taskId = await task(ALICE)
  await call("CreateTaskPushNotificationConfig", { taskId, id: "h", url: HOOK, authentication: { scheme: "Bearer", credentials: "alice-hook-secret" } }, { ...V1, ...ALICE })
  const none = await call("GetTaskPushNotificationConfig", { taskId: "no-such-task", id: "h" }, { ...V1, ...BOB })
  for (const [method, params] of [
    ["GetTaskPushNotificationConfig", { taskId, id: "h" }],
    ["ListTaskPushNotificationConfigs", { taskId }],
    ["DeleteTaskPushNotificationConfig", { taskId, id: "h" }],
    ["CreateTaskPushNotificationConfig", { taskId, id: "h", url: HOOK }],
  ] as const) {
    const answer = await call(method, params, { ...V1, ...BOB })
    t.equal(answer.error?.code, -32001, method)
    t.equal(answer.error.message, none.error.message.replace("no-such-task", taskId), `${method}: the same text as a missing Task`)
    t.notMatch(JSON.stringify(answer), /alice-hook-secret/)
  }
  const kept = await call("GetTaskPushNotificationConfig", { taskId, id: "h" }, { ...V1, ...ALICE })
  t.equal(kept.result.authentication.credentials, "alice-hook-secret", "bob's delete and create changed nothing; alice reads her own")
})

t.test("limits: 10 configs per Task, URL, token, credentials and scheme; each refused with -32602 naming the field and the limit", async (t) => {
  const { call, task, store } = await app(t)
  const taskId = await task()
  for (let i = 0; i < 10; i++) t.ok((await call("CreateTaskPushNotificationConfig", { taskId, id: `h${i}`, url: HOOK }, V1)).result, `config ${i + 1}`)
  const eleventh = await call("CreateTaskPushNotificationConfig", { taskId, id: "h10", url: HOOK }, V1)
  t.match(eleventh.error, { code: -32602, message: /^Invalid params: params would be push notification config 11 of task .*; a Task has at most 10: delete one/ })
  t.ok((await call("CreateTaskPushNotificationConfig", { taskId, id: "h3", url: HOOK, token: "new" }, V1)).result, "replacing one at the cap is allowed")
  // Twenty creates at once, on a store whose listing takes a while: the count each one checks is the count stored, so ten land.
  const racing = await task()
  const push = store.push!
  const list = push.listConfigs.bind(push)
  push.listConfigs = async (id) => {
    const configs = await list(id)
    await new Promise((resolve) => setTimeout(resolve, 5))
    return configs
  }
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => call("CreateTaskPushNotificationConfig", { taskId: racing, id: `r${i}`, url: HOOK }, V1)))
  t.equal(answers.filter((answer) => answer.result).length, 10, "ten created")
  t.equal(answers.filter((answer) => answer.error?.code === -32602).length, 10, "ten refused")
  t.equal((await list(racing)).length, 10, "ten stored")
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ url: "http://127.0.0.1:9/" + "a".repeat(2048) }, /^Invalid params: params\.url must be at most 2048 characters$/],
    [{ url: HOOK, token: "t".repeat(8193) }, /^Invalid params: params\.token must be at most 8192 characters$/],
    [{ url: HOOK, authentication: { scheme: "Bearer", credentials: "c".repeat(8193) } }, /^Invalid params: params\.authentication\.credentials must be at most 8192 characters$/],
    [{ url: HOOK, authentication: { scheme: "Bear er" } }, /^Invalid params: params\.authentication\.scheme must be an HTTP authentication scheme such as Bearer/],
    [{ url: HOOK, token: "a\r\nX-Injected: 1" }, /^Invalid params: params\.token must be printable ASCII: it is sent in an HTTP header$/],
    [{ url: HOOK, authentication: {} }, /^Invalid params: params\.authentication\.scheme is required$/],
    [{}, /^Invalid params: params\.url is required$/],
  ]
  for (const [config, message] of cases) {
    const other = await task()
    t.match((await call("CreateTaskPushNotificationConfig", { taskId: other, ...config }, V1)).error, { code: -32602, message }, JSON.stringify(config).slice(0, 80))
  }
  const set03 = await call("tasks/pushNotificationConfig/set", { taskId, pushNotificationConfig: { url: HOOK, authentication: { schemes: [] } } })
  t.match(set03.error, { code: -32602, message: /params\.pushNotificationConfig\.authentication\.schemes must NOT have fewer than 1 items/ })
})

t.test("the SSRF guard: refused URLs get -32602 naming the reason; the allow list lets a host through", async (t) => {
  const { call, task } = await app(t, { push: {} })
  const taskId = await task()
  const refused: Array<[string, RegExp]> = [
    ["http://10.0.0.5/hook", /^Invalid params: params\.url is a private address \(10\.0\.0\.5\); add the host to the push allow list/],
    ["http://localhost:8080/hook", /^Invalid params: params\.url resolves to a loopback address/],
    ["http://169.254.169.254/latest", /cloud metadata address/],
    ["ftp://example.com/x", /^Invalid params: params\.url should be an http: or https: URL, not ftp:$/],
    ["https://user:pw@example.com/", /should not carry a user name or password/],
    ["not a url", /params\.url is not a valid absolute URL/],
  ]
  for (const [url, message] of refused) {
    t.match((await call("CreateTaskPushNotificationConfig", { taskId, url }, V1)).error, { code: -32602, message, data: [{ reason: "INVALID_PARAMS" }] }, url)
  }
  const set03 = await call("tasks/pushNotificationConfig/set", { taskId, pushNotificationConfig: { url: "http://192.168.1.1/" } })
  t.match(set03.error, { code: -32602, message: /^Invalid params: params\.pushNotificationConfig\.url is a private address \(192\.168\.1\.1\)/ })
  const allowed = await app(t, { push: { allow: ["localhost:8080"] } })
  const other = await allowed.task()
  t.ok((await allowed.call("CreateTaskPushNotificationConfig", { taskId: other, url: "http://localhost:8080/hook" }, V1)).result)
  t.match((await allowed.call("CreateTaskPushNotificationConfig", { taskId: other, url: "http://localhost:8081/hook" }, V1)).error, { code: -32602 }, "the port narrows the allowance")
})

/** A memory store that notes, at each Task's first save, how many push configs the Task already had. */
class ConfigsAtFirstSave extends InMemoryTaskStore {
  readonly configsAtFirstSave = new Map<string, number>()
  override async save(task: A2ATask): Promise<void> {
    if (!this.configsAtFirstSave.has(task.id)) this.configsAtFirstSave.set(task.id, (await this.push.listConfigs(task.id)).length)
    await super.save(task)
  }
}

t.test("inline configs (1.0 taskPushNotificationConfig, 0.3 pushNotificationConfig) are stored before the Task's first save", async (t) => {
  const store = new ConfigsAtFirstSave()
  const { server, call } = await app(t, { store })
  const sent = await call("SendMessage", { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] }, configuration: { taskPushNotificationConfig: { url: HOOK, token: "t1" } } }, V1)
  const id10 = sent.result.task.id
  t.equal(store.configsAtFirstSave.get(id10), 1)
  const [config10] = await store.push.listConfigs(id10)
  t.match(config10, { taskId: id10, version: "1.0", url: HOOK, token: "t1" })
  t.match(config10.id, /^[0-9a-f-]{36}$/)

  const streamed = await injectRpc(server, rpc("message/stream", { message: userMessage("hi"), configuration: { pushNotificationConfig: { url: HOOK, authentication: { schemes: ["Basic"], credentials: "dTpw" } } } }))
  const id03 = sseMessages(streamed.body)[0].result.id
  t.equal(store.configsAtFirstSave.get(id03), 1)
  t.match(await store.push.getConfig(id03, id03), { version: "0.3", authentication: { scheme: "Basic", credentials: "dTpw" } })
})

t.test("inline configs: a refused URL starts no Task; a save that fails takes its config away; push off answers -32003", async (t) => {
  const store = new FlakyStore()
  const { call } = await app(t, { store, push: {} })
  const refused = await call("SendMessage", { message: userMessage("hi"), configuration: { pushNotificationConfig: { url: "http://10.1.1.1/" } } })
  t.match(refused.error, { code: -32602, message: /params\.configuration\.pushNotificationConfig\.url is a private address \(10\.1\.1\.1\)/ })
  t.equal(store.saves.length, 0, "no Task was created")

  const allowed = new FlakyStore()
  const flaky = await app(t, { store: allowed })
  allowed.failing = true
  const failed = await flaky.call("SendMessage", { message: userMessage("hi"), configuration: { pushNotificationConfig: { url: HOOK } } })
  t.equal(failed.error.code, -32603)
  t.equal(allowed.push.usage.configs, 0, "the config of the Task that was never saved is gone")

  const off = await app(t, { push: false })
  t.equal((await off.server.inject({ method: "GET", url: "/.well-known/agent-card.json" })).json().capabilities.pushNotifications, false)
  const inline = await off.call("SendMessage", { message: userMessage("hi"), configuration: { pushNotificationConfig: { url: HOOK } } })
  t.match(inline.error, { code: -32003, message: /Push notifications are not supported/ })
})

t.test("a store without the capability (a host's get/save store) or push: false answers -32003 to every push method", async (t) => {
  const tasks = new Map<string, A2ATask>()
  const hostStore: TaskStore = { get: async (id) => tasks.get(id), save: async (task) => void tasks.set(task.id, structuredClone(task)) }
  for (const opts of [{ store: hostStore }, { push: false as const }]) {
    const { server, call, task } = await app(t, opts)
    t.equal((await server.inject({ method: "GET", url: "/.well-known/agent-card.json" })).json().capabilities.pushNotifications, false)
    const taskId = await task()
    for (const method of [
      "CreateTaskPushNotificationConfig",
      "GetTaskPushNotificationConfig",
      "ListTaskPushNotificationConfigs",
      "DeleteTaskPushNotificationConfig",
      "tasks/pushNotificationConfig/set",
      "tasks/pushNotificationConfig/get",
      "tasks/pushNotificationConfig/list",
      "tasks/pushNotificationConfig/delete",
    ]) {
      t.equal((await call(method, { taskId, id: taskId, url: HOOK }, V1)).error?.code, -32003, method)
    }
  }
})

t.test("a config's credentials and token never reach the log", async (t) => {
  const lines: string[] = []
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => void (lines.push(chunk.toString()), done()) })
  const logger = pino({ level: "trace" }, sink)
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "done"), a2a: { push: ALLOW }, logger })
  t.teardown(() => srv.stop())
  const taskId = (await callRpc(srv.url, rpc("SendMessage", { message: userMessage("hi"), configuration: { blocking: true, pushNotificationConfig: { url: HOOK, token: "inline-token-xyz" } } }))).result.id
  await callRpc(srv.url, rpc("CreateTaskPushNotificationConfig", { taskId, url: HOOK, token: "token-xyz", authentication: { scheme: "Bearer", credentials: "credential-xyz" } }), V1)
  await callRpc(srv.url, rpc("CreateTaskPushNotificationConfig", { taskId, url: "http://10.0.0.5/", authentication: { scheme: "Bearer", credentials: "refused-xyz" } }), V1)
  await callRpc(srv.url, rpc("ListTaskPushNotificationConfigs", { taskId }), V1)
  t.ok(lines.some((line) => /CreateTaskPushNotificationConfig/.test(line)), "the calls were logged")
  t.notMatch(lines.join(""), /xyz/)
})
