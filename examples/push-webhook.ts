// Push notifications: the caller gives a webhook with its message, returns at once, and the agent POSTs
// each of the Task's updates to the webhook until it is done, with the caller's token and an
// Idempotency-Key that stays the same on retries.
// Run: npm run build && node dist/examples/push-webhook.js
import assert from "node:assert/strict"
import http from "node:http"
import type { AddressInfo } from "node:net"
import { createLocalClient } from "toolnexus/client"
import { serve } from "toolnexus/fastify"

interface Notification {
  token: string | undefined
  key: string | undefined
  body: { statusUpdate?: { taskId: string; status: { state: string } }; artifactUpdate?: { taskId: string } }
}

// The webhook: a plain HTTP server that records what it gets and resolves `completed` on the final update.
const received: Notification[] = []
let completed!: () => void
const done = new Promise<void>((resolve) => (completed = resolve))
const webhook = http.createServer((req, res) => {
  let text = ""
  req.setEncoding("utf8")
  req.on("data", (chunk: string) => (text += chunk))
  req.on("end", () => {
    const body = JSON.parse(text) as Notification["body"]
    received.push({ token: req.headers["x-a2a-notification-token"] as string | undefined, key: req.headers["idempotency-key"] as string | undefined, body })
    res.writeHead(200).end()
    if (body.statusUpdate?.status.state === "TASK_STATE_COMPLETED") completed()
  })
})
await new Promise<void>((resolve) => webhook.listen(0, "127.0.0.1", resolve))
const hookUrl = `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/hooks/a2a`

// Webhooks on loopback or private addresses are refused unless allowed by name: this one is.
const agent = await serve("127.0.0.1:0", {
  client: createLocalClient(() => "report filed"),
  a2a: { name: "filer", push: { allow: [new URL(hookUrl).host] } },
  logger: false,
})

try {
  const res = await fetch(agent.url, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "SendMessage",
      params: {
        message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "file my report" }] },
        // Answer at once with the submitted Task; the rest comes to the webhook.
        configuration: { returnImmediately: true, taskPushNotificationConfig: { url: hookUrl, token: "hook-token-123" } },
      },
    }),
  })
  const { result } = (await res.json()) as { result: { task: { id: string; status: { state: string } } } }
  console.log(`sent: ${result.task.id} is ${result.task.status.state}`)

  await done
  for (const { body, key } of received) {
    console.log(`webhook got ${body.statusUpdate ? `status ${body.statusUpdate.status.state}` : "artifact"} (Idempotency-Key ${key})`)
  }
  assert.ok(received.every((n) => n.token === "hook-token-123"), "every notification carries the caller's token")
  assert.ok(received.every((n) => (n.body.statusUpdate ?? n.body.artifactUpdate)?.taskId === result.task.id))
} finally {
  await agent.stop()
  await new Promise((resolve) => webhook.close(resolve))
}
console.log("ok: the webhook received the Task's updates to completed")
