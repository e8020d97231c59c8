// The official @a2a-js/sdk 1.3 served as the bench's SDK servers serve it: Express, its DefaultRequestHandler and
// InMemoryTaskStore (or a task store of the caller's), on 127.0.0.1 (port 0), around an executor of the caller's; and
// the part and status shapes its executors publish.
import express from "express"
import { AGENT_CARD_PATH } from "@a2a-js/sdk"
import { DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server"
import { UserBuilder, agentCardHandler, jsonRpcHandler } from "@a2a-js/sdk/server/express"
import { portOf, reportStartFailure, serveParent } from "../child.mjs"

/**
 * @param {string} text
 * @returns {import("@a2a-js/sdk").Part}
 */
export const textPart = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" })
/**
 * @param {import("@a2a-js/sdk").TaskState} state
 * @returns {import("@a2a-js/sdk").TaskStatus}
 */
export const status = (state) => ({ state, message: undefined, timestamp: new Date().toISOString() })

/**
 * The SDK servers' agent card: A2A 1.0, the interfaces given, one chat skill.
 * @param {string} description
 * @param {import("@a2a-js/sdk").AgentInterface[]} supportedInterfaces
 * @returns {import("@a2a-js/sdk").AgentCard}
 */
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
 * @param {import("@a2a-js/sdk/server").AgentExecutor} executor
 * @param {string} description
 * @param {{ taskStore?: import("@a2a-js/sdk/server").TaskStore, close?: () => Promise<void> }} [opts]
 */
export async function serveSdk(executor, description, { taskStore, close = async () => {} } = {}) {
  try {
    const app = express()
    const server = await new Promise((/** @type {(server: import("node:http").Server) => void} */ resolve, reject) => {
      const s = app.listen(0, "127.0.0.1", (err) => (err ? reject(err) : resolve(s)))
    })
    const port = portOf(server)
    const card = sdkCard(description, [{ url: `http://127.0.0.1:${port}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }])
    const handler = new DefaultRequestHandler(card, taskStore ?? new InMemoryTaskStore(), executor)
    app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }))
    app.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }))
    serveParent({}, async () => {
      await new Promise((/** @type {(value?: undefined) => void} */ resolve) => server.close(() => resolve()))
      await close()
    })
    process.send?.({ ready: true, url: `http://127.0.0.1:${port}`, port })
  } catch (err) {
    reportStartFailure(err)
  }
}
