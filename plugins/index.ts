/**
 * "toolnexus/fastify": the Fastify plugin and the standalone server built on it.
 *
 * @module toolnexus/fastify
 */
export { toolnexusA2A, toolnexusA2APlugin, type ToolnexusA2AOptions } from "./a2a.js"
export { serve, createLogger, type HttpsOptions, type SecureFastifyInstance, type ServeOptions, type ServedAgent, type StopOptions } from "./serve.js"
export type { CardOptions } from "../lib/a2a/card.js"
export type { AgentArtifact, AgentArtifactInput, AgentContext, AgentFunction, AgentOutcome } from "../lib/a2a/agent.js"
export type { CardSigningOptions } from "../lib/a2a/card-signing.js"
export type { ExtendedCardFields, ExtendedCardSource } from "../lib/a2a/extended-card.js"
export type { ToolnexusGrpc } from "./grpc.js"
export type { ToolnexusMetrics } from "./metrics-route.js"
export type { HealthOptions, ToolnexusReadiness } from "./health-routes.js"
export type { ServerPhase } from "../lib/readiness.js"
export type { MetricsOptions } from "./options.js"
export type { GrpcTlsOptions } from "../lib/grpc/server.js"
export type { ServerTimeouts } from "./server-timeouts.js"
export type { AuthSettings } from "../lib/a2a/auth.js"
export type { PushOptions } from "../lib/push/options.js"
export type { SigningKeyInput } from "../lib/signing-key.js"
