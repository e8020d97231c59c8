/** "toolnexus/fastify": the Fastify plugin and the standalone server built on it. */
export { toolnexusA2A, toolnexusA2APlugin, type ToolnexusA2AOptions } from "./a2a.js"
export { serve, createLogger, type HttpsOptions, type SecureFastifyInstance, type ServeOptions, type ServedAgent } from "./serve.js"
export type { CardOptions } from "../lib/a2a/card.js"
