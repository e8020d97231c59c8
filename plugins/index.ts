/** "toolnexus/fastify": the Fastify plugin and the standalone server built on it. */
export { toolnexusA2A, toolnexusA2APlugin, type ToolnexusA2AOptions } from "./a2a.js"
export { serve, createLogger, type HttpsOptions, type SecureFastifyInstance, type ServeOptions, type ServedAgent } from "./serve.js"
export type { CardOptions } from "../lib/a2a/card.js"
export type { CardSigningOptions } from "../lib/a2a/card-signing.js"
export type { ExtendedCardFields, ExtendedCardSource } from "../lib/a2a/extended-card.js"
export type { ToolnexusGrpc } from "./grpc.js"
export type { GrpcTlsOptions } from "../lib/grpc/server.js"
