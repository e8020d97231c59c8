/**
 * "toolnexus": everything, from the stores to the Fastify server. The subpaths load less: "toolnexus/stores", "toolnexus/client", "toolnexus/fastify".
 *
 * @module toolnexus
 */
export * from "./lib/stores/index.js"
export * from "./lib/client/index.js"
export * from "./plugins/index.js"
export type { AgentCard, AgentCardSignature, AgentProvider, AgentSkill } from "./lib/types.js"
export { A2AError, ErrorCode, type JsonRpcErrorObject } from "./lib/a2a/errors.js"
export type { Logger } from "./lib/log.js"
