// Server C: the official @a2a-js/sdk 1.3 on Express, its InMemoryTaskStore, an executor that answers at once.
import { randomUUID } from "node:crypto"
import express from "express"
import { AGENT_CARD_PATH, TaskState } from "@a2a-js/sdk"
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server"
import { UserBuilder, agentCardHandler, jsonRpcHandler } from "@a2a-js/sdk/server/express"
import { reportStartFailure, serveParent } from "../child.mjs"

const textPart = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" })
const status = (state) => ({ state, message: undefined, timestamp: new Date().toISOString() })

/** Publishes the task, its answer as an artifact and the completed status, in one go. */
class EchoExecutor {
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx
    const prompt = userMessage.parts.map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("\n")
    bus.publish(AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED), history: [userMessage], artifacts: [], metadata: undefined }))
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId: randomUUID(), name: "answer", description: "", parts: [textPart(`echo: ${prompt}`)], metadata: undefined, extensions: [] },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    )
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
    description: "echo agent for the benchmark",
    supportedInterfaces: [{ url: `http://127.0.0.1:${port}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "chat", name: "chat", description: "echoes", tags: ["echo"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  }
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor())
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }))
  app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }))
  serveParent({}, () => new Promise((resolve) => server.close(() => resolve())))
  process.send({ ready: true, url: `http://127.0.0.1:${port}`, port })
} catch (err) {
  reportStartFailure(err)
}
