#!/usr/bin/env node
import { clientFor, parseCli, USAGE } from "../lib/cli.js"
import { withoutPassword } from "../lib/url-credentials.js"

let config
let client
try {
  config = parseCli(process.argv.slice(2), process.env, process.stdout.isTTY === true)
  // A refused model option (such as a baseUrl with a password) is a usage error too, not a crash.
  if (config !== "help" && config.agentModule === undefined) client = clientFor(config)
} catch (err) {
  console.error(`toolnexus: ${(err as Error).message}\n\n${USAGE}`)
  process.exit(2)
}
if (config === "help") {
  console.log(USAGE)
  process.exit(0)
}

// The server's modules load once the flags are read: a refused flag or --help answers at once, even on a busy machine.
const [{ createToolkit }, { createLogger, logDestination, serve }] = await Promise.all([import("../lib/tools/toolkit.js"), import("../plugins/serve.js")])
const log = createLogger({}, await logDestination(config.logFormat))
let toolkit
let ownAgent
try {
  // Your own agent calls its own tools: the toolkit is the built-in loop's.
  if (config.agentModule !== undefined) ownAgent = await (await import("../lib/agent-module.js")).loadAgentModule(config.agentModule)
  toolkit = await createToolkit({
    ...(config.a2aAgents && { a2aAgents: config.a2aAgents.map((url) => ({ url })) }),
    ...(config.mcpServers && { mcpServers: config.mcpServers }),
    ...config.toolLimits,
    logger: log,
  })
} catch (err) {
  // A tool source that cannot be reached (an agent's card) is the operator's to fix: say which, without a stack.
  console.error(`toolnexus: ${(err as Error).message}`)
  process.exit(1)
}
const address = `${config.host.includes(":") ? `[${config.host}]` : config.host}:${config.port}`
const runs = ownAgent !== undefined ? { agent: ownAgent } : { client, toolkit }
const agent = await serve(address, {
  ...runs,
  a2a: {
    name: config.name,
    store: config.store,
    ...(config.retention && { retention: config.retention }),
    ...(config.publicUrl && { url: config.publicUrl }),
    ...(config.tokens && { auth: { tokens: config.tokens, unownedTasksBelongTo: config.unownedTasksBelongTo } }),
    ...config.streams,
    ...(config.push && { push: config.push }),
    ...(config.cardSigning && { cardSigning: config.cardSigning }),
    ...(config.inspector && { inspector: true }),
    ...(config.metrics && { metrics: config.metrics }),
  },
  timeouts: config.timeouts,
  ...(config.https && { https: config.https }),
  ...(config.grpc && { grpc: config.grpc }),
  logger: log,
})
log.info(
  {
    url: agent.url,
    ...(agent.grpc && { grpc: agent.grpc }),
    store: withoutPassword(config.store),
    retention: config.retention?.terminalTtl ?? "off",
    ...(client ? { model: client.model } : { agent: config.agentModule }),
    ...(config.a2aAgents && { a2aAgents: config.a2aAgents.map(withoutPassword) }),
    ...(config.mcpServers && { mcpServers: Object.keys(config.mcpServers), tools: toolkit.tools().length }),
    auth: config.tokens ? "tokens" : "none",
    ...(config.unownedTasksBelongTo && { unownedTasksBelongTo: config.unownedTasksBelongTo }),
    ...(config.timeouts && { timeouts: config.timeouts }),
    ...config.streams,
    ...(config.push && { pushAllow: config.push.allow, pushSigned: config.push.signingKey !== undefined }),
    ...(config.inspector && { inspector: `${agent.url}/inspector/` }),
    ...(config.metrics && { metrics: `${agent.app.toolnexusMetrics.address ? `http://${agent.app.toolnexusMetrics.address}` : agent.url}/metrics` }),
  },
  "toolnexus agent listening",
)
if (client && !config.model) {
  log.warn({ model: client.model }, "no model configured: serving an offline echo agent; set --base-url and --model (and TOOLNEXUS_API_KEY) to serve a real one")
}

// SIGTERM (what orchestrators and service managers send) drains: /readyz answers 503 for the drain delay while
// everything else keeps serving, then the server closes. SIGINT (a person's Ctrl-C) closes at once, and so does a
// second signal during the drain; a signal once closing stops waiting for running tasks and exits 1.
let phase: "serving" | "draining" | "closing" = "serving"
const closeAll = () => {
  phase = "closing"
  return toolkit.close()
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (phase === "closing") process.exit(1)
    if (phase === "draining") {
      log.info({ signal }, "stopping now: the drain delay is skipped")
      void agent.stop()
      return
    }
    const drainMs = signal === "SIGTERM" ? config.drainDelayMs : 0
    phase = drainMs > 0 ? "draining" : "closing"
    log.info({ signal, drainMs }, drainMs > 0 ? "draining: /readyz answers 503, then the server stops and lets running tasks finish" : "stopping: letting running tasks finish")
    agent
      .stop({ drainMs })
      .then(closeAll)
      .then(
        () => process.exit(0),
        (err: unknown) => {
          log.error({ err }, "stop failed")
          process.exit(1)
        },
      )
  })
}
