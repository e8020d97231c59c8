// The official @a2a-js/sdk 1.3 over its three bindings, in one process around one DefaultRequestHandler, its
// InMemoryTaskStore and the echo executor of server C (sdk.mjs): JSON-RPC on Express (as server C), HTTP+JSON on
// Express (its restHandler, at the root of an app of its own) and gRPC (its grpcService on a @grpc/grpc-js server),
// each on its own 127.0.0.1 port. The card declares the three, A2A 1.0: the SDK's REST and gRPC handlers refuse a
// version the card does not declare for their binding.
import express from "express"
import * as grpc from "@grpc/grpc-js"
import { AGENT_CARD_PATH } from "@a2a-js/sdk"
import { DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server"
import { UserBuilder, agentCardHandler, jsonRpcHandler, restHandler } from "@a2a-js/sdk/server/express"
import { A2AService, grpcService, UserBuilder as GrpcUserBuilder } from "@a2a-js/sdk/server/grpc"
import { portOf, reportStartFailure, serveParent } from "../child.mjs"
import { sdkCard } from "./sdk-app.mjs"
import { EchoExecutor } from "./sdk-echo.mjs"

const HOST = "127.0.0.1"
const description = "echo agent for the benchmark, over JSON-RPC, HTTP+JSON and gRPC"

/**
 * An Express app listening on a free port; its routes are added once the card (which names every port) is known.
 * @param {import("express").Express} app
 */
async function listening(app) {
  const server = await new Promise((/** @type {(server: import("node:http").Server) => void} */ resolve, reject) => {
    const s = app.listen(0, HOST, (err) => (err ? reject(err) : resolve(s)))
  })
  return { server, url: `http://${HOST}:${portOf(server)}` }
}

try {
  const jsonRpcApp = express()
  const restApp = express()
  const jsonRpc = await listening(jsonRpcApp)
  const rest = await listening(restApp)
  const grpcServer = new grpc.Server()
  const grpcPort = await new Promise((/** @type {(port: number) => void} */ resolve, reject) =>
    grpcServer.bindAsync(`${HOST}:0`, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
  )
  const grpcAddress = `${HOST}:${grpcPort}`
  const card = sdkCard(description, [
    { url: `${jsonRpc.url}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    { url: rest.url, protocolBinding: "HTTP+JSON", tenant: "", protocolVersion: "1.0" },
    { url: grpcAddress, protocolBinding: "GRPC", tenant: "", protocolVersion: "1.0" },
  ])
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor())
  jsonRpcApp.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }))
  jsonRpcApp.use(jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }))
  restApp.use(restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }))
  grpcServer.addService(A2AService, grpcService({ requestHandler: handler, userBuilder: GrpcUserBuilder.noAuthentication }))

  /** @param {{ server: import("node:http").Server }} listener */
  const closeHttp = ({ server }) => new Promise((/** @type {(value?: undefined) => void} */ resolve) => server.close(() => resolve()))
  const closeGrpc = () => new Promise((/** @type {(value?: undefined) => void} */ resolve) => grpcServer.tryShutdown(() => resolve()))
  serveParent({}, async () => void (await Promise.all([closeHttp(jsonRpc), closeHttp(rest), closeGrpc()])))
  process.send?.({ ready: true, url: jsonRpc.url, rest: rest.url, grpc: grpcAddress })
} catch (err) {
  reportStartFailure(err)
}
