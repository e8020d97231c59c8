// The official @a2a-js/sdk 1.3 on Express (DefaultRequestHandler, InMemoryTaskStore) with an executor that streams:
// the SDK's equivalent of toolnexus streaming a local model's chunks. Per Task it publishes the Task, a working
// status, one artifact-update per chunk of the same async iterable ours reads (the first creates the artifact, the
// rest append), an empty closing chunk with lastChunk (as ours sends), then the completed status: the same events,
// in the same order, as toolnexus sends for SendStreamingMessage.
// argv: <chunks per Task>
import { randomUUID } from "node:crypto"
import express from "express"
import { AGENT_CARD_PATH, TaskState } from "@a2a-js/sdk"
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server"
import { UserBuilder, agentCardHandler, jsonRpcHandler } from "@a2a-js/sdk/server/express"
import { reportStartFailure, serveParent } from "../child.mjs"
import { streamChunks } from "../fixtures.mjs"

const chunks = streamChunks(Number(process.argv[2] ?? 200))

const textPart = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" })
const status = (state) => ({ state, message: undefined, timestamp: new Date().toISOString() })

/** The model: the chunks as an async iterable, yielded as fast as they are asked for (as ours reads its local model). */
async function* model() {
  yield* chunks
}

class StreamingExecutor {
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx
    bus.publish(AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED), history: [userMessage], artifacts: [], metadata: undefined }))
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_WORKING), metadata: undefined }))
    const artifactId = randomUUID()
    const chunk = (text, append, lastChunk) =>
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId, name: "answer", description: "", parts: [textPart(text)], metadata: undefined, extensions: [] },
        append,
        lastChunk,
        metadata: undefined,
      })
    let first = true
    for await (const text of model()) {
      bus.publish(chunk(text, !first, false))
      first = false
    }
    bus.publish(chunk("", true, true))
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined }))
    bus.finished()
  }

  async cancelTask() {}
}

try {
  const app = express()
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(0, "127.0.0.1", (err) => (err ? reject(err) : resolve(s)))
  })
  const port = server.address().port
  const card = {
    name: "bench",
    description: "streaming agent for the benchmark",
    supportedInterfaces: [{ url: `http://127.0.0.1:${port}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "chat", name: "chat", description: "streams", tags: ["stream"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  }
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new StreamingExecutor())
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }))
  app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }))
  serveParent({}, () => new Promise((resolve) => server.close(() => resolve())))
  process.send({ ready: true, url: `http://127.0.0.1:${port}`, port })
} catch (err) {
  reportStartFailure(err)
}
