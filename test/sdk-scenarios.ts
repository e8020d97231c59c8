import { DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest, Role, SendMessageRequest, TaskPushNotificationConfig, TaskState } from "@a2a-js/sdk"
import type { Client } from "@a2a-js/sdk/client"
import { TaskNotFoundError } from "@a2a-js/sdk/errors"
import type { Test } from "tap"
import { waitFor } from "./helpers.js"

// What the official SDK's 1.x client does against the agent, the same over every binding: each binding's test runs it
// through its own transport, so the bindings are held to one expectation.

const say = (text: string, extra: Record<string, unknown> = {}) => SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] }, ...extra })
const textOf = (part: { content?: { $case: string; value: unknown } } | undefined) => (part?.content?.$case === "text" ? part.content.value : undefined)

/** A blocking send answered completed, a send with returnImmediately answered submitted and polled to its end, and GetTask's historyLength. */
export async function sendAndGet(t: Test, sdk: Client): Promise<void> {
  const done = (await sdk.sendMessage(say("hello"))) as any
  t.equal(done.status.state, TaskState.TASK_STATE_COMPLETED, "1.0 blocks until the task is done")
  t.equal(textOf(done.artifacts[0].parts[0]), "echo: hello")
  t.match(done.status.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)

  const quick = (await sdk.sendMessage(say("again", { configuration: { returnImmediately: true } }))) as any
  t.equal(quick.status.state, TaskState.TASK_STATE_SUBMITTED, "returnImmediately answers with the submitted task")
  let polled: any
  await waitFor(async () => (polled = await sdk.getTask(GetTaskRequest.fromJSON({ id: quick.id }))).status.state === TaskState.TASK_STATE_COMPLETED)
  t.equal(polled.history.length, 2)
  const trimmed = (await sdk.getTask(GetTaskRequest.fromJSON({ id: quick.id, historyLength: 1 }))) as any
  t.same(trimmed.history.map((m: any) => m.role), [Role.ROLE_AGENT], "the last message only: the agent's")
}

/**
 * A Task's push configs: one created with its id, token and credentials, one without an id (the server gives a
 * UUID), read back, listed a page of one at a time, and deleted (then not found). Resolves with the Task and the
 * last page, for what a binding checks besides.
 */
export async function pushConfigRoundTrip(t: Test, sdk: Client, hook: string): Promise<{ taskId: string; lastPage: { nextPageToken: string } }> {
  const task = (await sdk.sendMessage(say("hi"))) as any
  const created = await sdk.createTaskPushNotificationConfig(
    TaskPushNotificationConfig.fromJSON({ taskId: task.id, id: "hook-1", url: hook, token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } }),
  )
  t.match(created, { taskId: task.id, id: "hook-1", url: hook, token: "tok", authentication: { scheme: "Bearer", credentials: "secret" } })
  const unnamed = await sdk.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: task.id, url: hook }))
  t.match(unnamed.id, /^[0-9a-f-]{36}$/, "the server gives an id")
  t.same(await sdk.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "hook-1" })), created)
  const page = await sdk.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id, pageSize: 1 }))
  t.equal(page.configs.length, 1)
  const rest = await sdk.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id, pageSize: 1, pageToken: page.nextPageToken }))
  t.same([...page.configs, ...rest.configs].map((c) => c.id).sort(), ["hook-1", unnamed.id].sort())
  await sdk.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "hook-1" }))
  await t.rejects(sdk.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: "hook-1" })), TaskNotFoundError)
  return { taskId: task.id, lastPage: rest }
}
