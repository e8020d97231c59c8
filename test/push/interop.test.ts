import { DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest, SendMessageRequest, TaskPushNotificationConfig } from "@a2a-js/sdk"
import { PushNotificationNotSupportedError, TaskNotFoundError } from "@a2a-js/sdk/errors"
import { Client, ClientFactory } from "@a2a-js/sdk/client"
import { LegacyJsonRpcTransport } from "@a2a-js/sdk/compat/v0_3/client"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import type { TaskStore } from "../../lib/stores/task-store.js"
import { serve } from "../../plugins/serve.js"
import { pushConfigRoundTrip } from "../fixtures/sdk-scenarios.js"

/** The official @a2a-js/sdk client's push-config methods against a live server: as a 1.0 client, and as a 0.3 peer. */

const HOOK = "http://127.0.0.1:9/hook"

async function start(t: Test, a2a: { store?: TaskStore; push?: { allow: string[] } | false } = {}) {
  const store = a2a.store ?? new InMemoryTaskStore()
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(() => "done"), a2a: { push: { allow: ["127.0.0.1"] }, ...a2a, store }, logger: false })
  t.teardown(() => srv.stop())
  const sdk = await new ClientFactory().createFromUrl(srv.url)
  return { srv, sdk, store }
}

const say = (text: string, configuration: Record<string, unknown> = {}) =>
  SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] }, configuration })

t.test("official SDK 1.0 client: create, get, list, delete push configs; an inline config is stored", async (t) => {
  const { sdk, store } = await start(t)
  const { taskId, lastPage } = await pushConfigRoundTrip(t, sdk, HOOK)
  t.equal(lastPage.nextPageToken, "")
  // Deleting a config already gone is not an error, and leaves it gone.
  await sdk.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId, id: "hook-1" }))
  await t.rejects(sdk.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId, id: "hook-1" })), TaskNotFoundError)
  await t.rejects(sdk.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: "no-such-task", url: HOOK })), TaskNotFoundError)

  const inline = (await sdk.sendMessage(say("hi", { taskPushNotificationConfig: { url: HOOK, token: "inline" } }))) as any
  const listed = await sdk.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: inline.id }))
  t.match(listed.configs, [{ taskId: inline.id, url: HOOK, token: "inline" }])
  t.equal((await store.push!.listConfigs(inline.id))[0].version, "1.0")
})

t.test("official SDK as a 0.3 peer (LegacyJsonRpcTransport): set, get, list, delete", async (t) => {
  const { srv, sdk, store } = await start(t)
  const legacy = new Client(new LegacyJsonRpcTransport({ endpoint: srv.url + "/" }), await sdk.getAgentCard())
  const task = (await sdk.sendMessage(say("hi"))) as any
  const set = await legacy.createTaskPushNotificationConfig(
    TaskPushNotificationConfig.fromJSON({ taskId: task.id, id: "old-hook", url: HOOK, token: "tok", authentication: { scheme: "Basic", credentials: "dTpw" } }),
  )
  t.match(set, { taskId: task.id, id: "old-hook", url: HOOK, token: "tok", authentication: { scheme: "Basic", credentials: "dTpw" } })
  t.equal((await store.push!.getConfig(task.id, "old-hook"))?.version, "0.3", "created by a 0.3 request: notified in 0.3")
  t.match(await legacy.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "old-hook" })), { id: "old-hook", url: HOOK })
  const listed = await legacy.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }))
  t.same(
    listed.configs.map((c) => c.id),
    ["old-hook"],
  )
  await legacy.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "old-hook" }))
  t.same((await legacy.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }))).configs, [])
})

t.test("official SDK against a server with push off: the card says so, the client refuses without asking", async (t) => {
  const { sdk } = await start(t, { push: false })
  t.equal((await sdk.getAgentCard()).capabilities?.pushNotifications, false)
  // The client's card gate throws before any request (synchronously, so inside a function here).
  await t.rejects(async () => sdk.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: "x", url: HOOK })), PushNotificationNotSupportedError)
  await t.rejects(async () => sdk.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: "x", id: "y" })), PushNotificationNotSupportedError, "delete, ungated in the client, gets -32003 from the server")
})
