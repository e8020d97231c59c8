import { execFile } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { pathToFileURL } from "node:url"
import { promisify } from "node:util"
import t, { type Test } from "tap"

/*
 * What each entry point loads, recorded in a child process that imports the compiled module
 * as a user would: test/fixtures/record-modules.mjs logs every ES module the loader hooks see
 * and every CommonJS module in require's cache. Run `npm run build` first (npm test does).
 */

const root = path.resolve(import.meta.dirname, "..", "..")
const recorder = path.join(root, "test", "fixtures", "record-modules.mjs")
const run = promisify(execFile)

const importOf = (entry: string) => `await import(${JSON.stringify(path.join(root, "dist", entry))})`

/** The packages (by their node_modules directory) a child process loaded while running `script`, which imports `entry`. */
async function packagesLoaded(t: Test, entry: string, script = importOf(entry)): Promise<Set<string>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-loads-"))
  try {
    const log = path.join(dir, "modules.log")
    await run(process.execPath, ["--import", recorder, "--input-type=module", "-e", script], { cwd: root, env: { ...process.env, RECORD_MODULES_TO: log } })
    const files = fs.readFileSync(log, "utf8").split("\n").filter(Boolean)
    t.ok(files.includes(pathToFileURL(path.join(root, "dist", entry)).href), `the recorder saw dist/${entry} load`)
    const packages = new Set<string>()
    for (const file of files) {
      const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)
      if (match) packages.add(match[1])
    }
    return packages
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** The web server, its logger, the rate limiter and the optional drivers. */
const SERVER_OR_DRIVER = /^(fastify|fastify-plugin|@fastify\/.+|pino|pino-.+|pg|pg-.+|nats)$/

t.test("the recorder sees what an entry loads: toolnexus/fastify loads fastify and pino", async (t) => {
  const loaded = await packagesLoaded(t, "plugins/index.js")
  t.ok(loaded.has("fastify"), "fastify")
  t.ok(loaded.has("pino"), "pino")
})

t.test("toolnexus/stores loads no web server, logger or driver", async (t) => {
  const loaded = await packagesLoaded(t, "lib/stores/index.js")
  t.same([...loaded].filter((name) => SERVER_OR_DRIVER.test(name)), [], "none of fastify, @fastify/*, pino, pg, nats")
})

t.test("toolnexus/client loads no web server, logger or driver", async (t) => {
  const loaded = await packagesLoaded(t, "lib/client/index.js")
  t.same([...loaded].filter((name) => SERVER_OR_DRIVER.test(name)), [], "none of fastify, @fastify/*, pino, pg, nats")
})

/** A script that builds an agent in a Fastify app with the plugin `options` (source text), readies it and closes it. */
const agent = (options: string) => `
  const { default: Fastify } = await import("fastify")
  const { toolnexusA2A } = ${importOf("plugins/index.js")}
  const { createLocalClient } = ${importOf("lib/client/index.js")}
  const app = Fastify()
  await app.register(toolnexusA2A, { client: createLocalClient(() => "ok"), ${options} })
  await app.ready()
  await app.close()`

t.test("@fastify/rate-limit is loaded only by an agent that sets rateLimit", async (t) => {
  t.notOk((await packagesLoaded(t, "plugins/index.js", agent(""))).has("@fastify/rate-limit"), "without rateLimit: not loaded")
  t.ok((await packagesLoaded(t, "plugins/index.js", agent("rateLimit: { max: 5, timeWindow: 1000 }"))).has("@fastify/rate-limit"), "with rateLimit: loaded")
})

t.test("the MCP SDK is loaded only by a toolkit with mcpServers", async (t) => {
  const toolkit = (options: string) => `
    const { createToolkit } = ${importOf("lib/client/index.js")}
    const toolkit = await createToolkit(${options})
    await toolkit.close()`
  t.notOk((await packagesLoaded(t, "lib/client/index.js", toolkit("{}"))).has("@modelcontextprotocol/sdk"), "without mcpServers: not loaded")
  const server = JSON.stringify({ command: process.execPath, args: [path.join(root, "test", "fixtures", "mcp-stdio-server.mjs")] })
  t.ok((await packagesLoaded(t, "lib/client/index.js", toolkit(`{ mcpServers: { files: ${server} } }`))).has("@modelcontextprotocol/sdk"), "with mcpServers: loaded")
})

t.test("prom-client is loaded only by an agent with metrics on; the OpenTelemetry SDK never is", async (t) => {
  const without = await packagesLoaded(t, "plugins/index.js", agent(""))
  t.notOk(without.has("prom-client"), "without metrics: not loaded")
  t.ok(without.has("@opentelemetry/api"), "the API is (a no-op until an SDK is registered)")
  const withMetrics = await packagesLoaded(t, "plugins/index.js", agent("metrics: true"))
  t.ok(withMetrics.has("prom-client"), "with metrics: loaded")
  t.same([...withMetrics].filter((name) => name.startsWith("@opentelemetry/") && name !== "@opentelemetry/api"), [], "no SDK package")
})

t.test("the AI SDK is loaded only by an application that makes a language model: toolnexus never imports it", async (t) => {
  const AI_SDK = (name: string) => name === "ai" || name.startsWith("@ai-sdk/")
  const httpClient = `
    const { createClient } = ${importOf("index.js")}
    createClient({ baseUrl: "http://127.0.0.1:1/v1", style: "openai", model: "m" })`
  t.same([...(await packagesLoaded(t, "index.js", httpClient))].filter(AI_SDK), [], "toolnexus with an HTTP client: no ai, no @ai-sdk/*")
  t.same([...(await packagesLoaded(t, "lib/client/index.js"))].filter(AI_SDK), [], "toolnexus/client: none either")
  // The application's own import of a provider is seen: the check above could fail.
  const withModel = `
    const { createOpenAI } = await import("@ai-sdk/openai")
    const { createClient } = ${importOf("lib/client/index.js")}
    createClient({ languageModel: createOpenAI({ apiKey: "k" }).chat("m") })`
  t.ok((await packagesLoaded(t, "lib/client/index.js", withModel)).has("@ai-sdk/openai"), "a provider the application imports is recorded")
})
