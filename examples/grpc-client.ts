// The agent over gRPC, called by the official A2A SDK's client (@a2a-js/sdk, installed beside toolnexus):
// serve() also listens for the spec's A2AService on a gRPC address, and the agent card names it, so the
// SDK finds it from the card alone. Run: npm run build && node dist/examples/grpc-client.js
import assert from "node:assert/strict"
import { GetTaskRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk"
import { ClientFactory } from "@a2a-js/sdk/client"
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc"
import { createLocalClient } from "toolnexus/client"
import { serve } from "toolnexus/fastify"

const agent = await serve("127.0.0.1:0", {
  client: createLocalClient(({ messages }) => `pong: ${String(messages.at(-1)?.content)}`),
  a2a: { name: "pinger" },
  // gRPC on an address of its own (port 0: any free one), plaintext here; give `https` for TLS.
  grpc: "127.0.0.1:0",
  logger: false,
})
console.log(`HTTP at ${agent.url}, gRPC at ${agent.grpc}`)

try {
  // The SDK reads the card over HTTP and, speaking only gRPC here, picks the card's GRPC interface.
  const sdk = await new ClientFactory({ transports: [new GrpcTransportFactory()] }).createFromUrl(agent.url)

  const sent = await sdk.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "ping" }] } }))
  assert.ok("status" in sent, "the answer is a Task")
  assert.equal(sent.status?.state, TaskState.TASK_STATE_COMPLETED)
  const part = sent.artifacts[0].parts[0].content
  console.log(`SendMessage over gRPC: ${TaskState[sent.status.state]}: ${part?.$case === "text" ? part.value : "?"}`)

  const got = await sdk.getTask(GetTaskRequest.fromJSON({ id: sent.id }))
  assert.equal(got.id, sent.id)
  console.log(`GetTask over gRPC: ${got.id} has ${got.history.length} messages`)
} finally {
  await agent.stop()
}
console.log("ok: the SDK's gRPC client sent and read a Task")
