// The official @a2a-js/sdk 1.3 served as the bench's SDK servers serve it: Express, its DefaultRequestHandler and
// InMemoryTaskStore (or a task store of the caller's), on 127.0.0.1 (port 0), around an executor of the caller's; and
// the part and status shapes its executors publish.
import express from "express"
import { AGENT_CARD_PATH } from "@a2a-js/sdk"
import { DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server"
import { UserBuilder, agentCardHandler, jsonRpcHandler } from "@a2a-js/sdk/server/express"
import { reportStartFailure, serveParent } from "../child.mjs"

export const textPart = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" })
export const status = (state) => ({ state, message: undefined, timestamp: new Date().toISOString() })

/** The SDK servers' agent card: A2A 1.0, the interfaces given, one chat skill. */
export function sdkCard(description, supportedInterfaces) {
  return {
    name: "bench",
    description,
    supportedInterfaces,
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "chat", name: "chat", description, tags: ["bench"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  }
}

/**
 * Serves `executor` and tells the parent its URL; `description` goes on the agent card. `taskStore` (default: the
 * SDK's InMemoryTaskStore) is served instead of a new memory store; `close` runs after the server closes (the store's connections).
 */
export async function serveSdk(executor, description, { taskStore, close = async () => {} } = {}) {
  try {
    const app = express()
    const server = await new Promise((resolve, reject) => {
      const s = app.listen(0, "127.0.0.1", (err) => (err ? reject(err) : resolve(s)))
    })
    const port = server.address().port
    const card = sdkCard(description, [{ url: `http://127.0.0.1:${port}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }])
    const handler = new DefaultRequestHandler(card, taskStore ?? new InMemoryTaskStore(), executor)
    app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }))
    app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }))
    serveParent({}, async () => {
      await new Promise((resolve) => server.close(() => resolve()))
      await close()
    })
    process.send({ ready: true, url: `http://127.0.0.1:${port}`, port })
  } catch (err) {
    reportStartFailure(err)
  }
}
