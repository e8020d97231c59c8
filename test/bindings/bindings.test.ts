import { CancelTaskRequest, GetTaskRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk"
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, type CallInterceptor, type Client } from "@a2a-js/sdk/client"
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc"
import * as grpc from "@grpc/grpc-js"
import t, { type Test } from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { serve, type ServedAgent } from "../../plugins/serve.js"
import { callRpc, rpc } from "../fixtures/helpers.js"

// One agent, three bindings: the card lists every interface, the official client reaches the agent through
// any of them, a Task is the same Task on all three, and the extended card answers on each.

const TOKEN = "bindings-secret-0123456789"
const auth = { authorization: `Bearer ${TOKEN}` }

async function agent(t: Test): Promise<ServedAgent & { base: string }> {
  const client = createLocalClient(({ messages }) => (messages.at(-1)?.content === "wait" ? { text: "Waiting for you", inputRequired: true } : "DONE"))
  const served = await serve("127.0.0.1:0", {
    client,
    logger: false,
    grpc: "127.0.0.1:0",
    a2a: { auth: { tokens: { [TOKEN]: "alice" } }, extendedCard: (principal: string) => ({ description: `The agent, as ${principal} sees it` }) },
  })
  t.teardown(() => served.stop())
  // The card's endpoint URL: the origin and the routes' prefix (none), with its slash.
  return Object.assign(served, { base: `${served.url}/` })
}

/** The official client through one binding, chosen from the card as a peer preferring it would. */
async function clientOver(url: string, binding: "JSONRPC" | "HTTP+JSON" | "GRPC"): Promise<Client> {
  const bearer: CallInterceptor = {
    before: async (args) => {
      args.options = { ...args.options, serviceParameters: { ...args.options?.serviceParameters, authorization: `Bearer ${TOKEN}` } }
    },
    after: async () => {},
  }
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory(), new RestTransportFactory(), new GrpcTransportFactory({ grpcChannelCredentials: grpc.credentials.createInsecure() })],
    preferredTransports: [binding],
    clientConfig: { interceptors: [bearer] },
  })
  return new ClientFactory(options).createFromUrl(url)
}

const say = (text: string) => SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] } })

t.test("the card lists JSON-RPC, HTTP+JSON and gRPC, and the official client runs a Task over each", async (t) => {
  const served = await agent(t)
  const card = (await (await fetch(`${served.base}.well-known/agent-card.json`, { headers: { "a2a-version": "1.0" } })).json())
  t.same(
    card.supportedInterfaces.map((i: any) => `${i.protocolBinding} ${i.protocolVersion} ${i.url}`),
    [`JSONRPC 1.0 ${served.base}`, `JSONRPC 0.3 ${served.base}`, `HTTP+JSON 1.0 ${served.base}`, `HTTP+JSON 0.3 ${served.base}`, `GRPC 1.0 ${served.grpc}`],
    "every interface, gRPC at the host:port it is bound to",
  )
  t.same(card.additionalInterfaces, [{ url: served.base, transport: "JSONRPC" }, { url: served.base, transport: "HTTP+JSON" }], "and the 0.3 form of the HTTP ones")
  t.equal(card.capabilities.extendedAgentCard, true)

  const answers: Record<string, unknown> = {}
  for (const binding of ["JSONRPC", "HTTP+JSON", "GRPC"] as const) {
    const sdk = await clientOver(served.base, binding)
    // The client gives the Task itself (a Message would have no status).
    const task = (await sdk.sendMessage(say(`hello over ${binding}`))) as { id: string; status?: { state: number } }
    t.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED, `${binding}: a Task, completed`)
    const read = await sdk.getTask(GetTaskRequest.fromJSON({ id: task.id }))
    t.equal(read.id, task.id, `${binding}: read back`)
    answers[binding] = { state: read.status?.state, artifacts: read.artifacts.map((a) => a.parts.map((p) => (p.content?.$case === "text" ? p.content.value : ""))), history: read.history.length }
    const extended = await sdk.getAgentCard()
    t.equal(extended.description, "The agent, as alice sees it", `${binding}: the extended card for the caller`)
  }
  t.same(answers["HTTP+JSON"], answers.JSONRPC, "REST and JSON-RPC give the same Task")
  t.same(answers.GRPC, answers.JSONRPC, "gRPC too")
})

t.test("a Task created over REST is read over JSON-RPC and gRPC, canceled over gRPC and seen canceled over REST", async (t) => {
  const served = await agent(t)
  const created = await fetch(`${served.base}message:send`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/a2a+json", "a2a-version": "1.0" },
    body: JSON.stringify({ message: { messageId: "m-rest", role: "ROLE_USER", parts: [{ text: "wait" }] } }),
  })
  t.equal(created.status, 200)
  const task = ((await created.json())).task
  t.equal(task.status.state, "TASK_STATE_INPUT_REQUIRED", "waiting for input: it can be canceled")

  const overRpc = await callRpc(served.url, rpc("GetTask", { id: task.id }), { ...auth, "a2a-version": "1.0" })
  t.equal(overRpc.result?.id, task.id, "JSON-RPC reads it")
  const grpcClient = await clientOver(served.base, "GRPC")
  t.equal((await grpcClient.getTask(GetTaskRequest.fromJSON({ id: task.id }))).status?.state, TaskState.TASK_STATE_INPUT_REQUIRED, "gRPC reads it")
  const canceled = await grpcClient.cancelTask(CancelTaskRequest.fromJSON({ id: task.id }))
  t.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED, "gRPC cancels it")

  const overRest = await fetch(`${served.base}tasks/${task.id}`, { headers: { ...auth, "a2a-version": "1.0" } })
  t.equal(((await overRest.json())).status?.state, "TASK_STATE_CANCELED", "REST sees it canceled")
})

t.test("GetExtendedAgentCard refuses a peer without credentials on every binding", async (t) => {
  const served = await agent(t)
  const rest = await fetch(`${served.base}extendedAgentCard`, { headers: { "a2a-version": "1.0" } })
  t.equal(rest.status, 401, "REST: 401")
  const overRpc = await fetch(served.base, { method: "POST", headers: { "content-type": "application/json", "a2a-version": "1.0" }, body: JSON.stringify(rpc("GetExtendedAgentCard", {})) })
  t.equal(overRpc.status, 401, "JSON-RPC: 401")
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new GrpcTransportFactory({ grpcChannelCredentials: grpc.credentials.createInsecure() })],
    preferredTransports: ["GRPC"],
  })
  const card = (await (await fetch(`${served.base}.well-known/agent-card.json`, { headers: { "a2a-version": "1.0" } })).json())
  card.supportedInterfaces = card.supportedInterfaces.filter((i: any) => i.protocolBinding === "GRPC")
  const { AgentCard } = await import("@a2a-js/sdk")
  const anonymous = await new ClientFactory(options).createFromAgentCard(AgentCard.fromJSON(card))
  await t.rejects(anonymous.getAgentCard(), /UNAUTHENTICATED|Unauthorized|16/, "gRPC: UNAUTHENTICATED")
})

t.test("a message in the agent's role is refused as invalid params on every binding", async (t) => {
  const served = await agent(t)
  const asAgent = { messageId: "m-agent", role: "ROLE_AGENT", parts: [{ text: "I am the agent now" }] }
  const overRpc = await fetch(served.base, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0", ...auth },
    body: JSON.stringify(rpc("SendMessage", { message: asAgent })),
  })
  t.match(await overRpc.json(), { error: { code: -32602, message: /params\.message\.role must be "user"/ } }, "JSON-RPC 1.0: -32602")
  const over03 = await fetch(served.base, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify(rpc("message/send", { message: { kind: "message", messageId: "m-03", role: "agent", parts: [{ kind: "text", text: "x" }] } })),
  })
  t.match(await over03.json(), { error: { code: -32602, message: /role must be "user"/ } }, "JSON-RPC 0.3: -32602")
  const rest = await fetch(`${served.base}message:send`, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0", ...auth },
    body: JSON.stringify({ message: asAgent }),
  })
  t.equal(rest.status, 400, "HTTP+JSON: 400")
  t.match(await rest.json(), { error: { message: /role must be "user"/ } })
  const grpcClient = await clientOver(served.base, "GRPC")
  await t.rejects(grpcClient.sendMessage(SendMessageRequest.fromJSON({ message: asAgent })), /role must be "user"/, "gRPC: refused naming the role")
  const listed = await callRpc(served.url, rpc("ListTasks", {}), { "a2a-version": "1.0", ...auth })
  t.same(listed.result.tasks, [], "no Task was made")
})
