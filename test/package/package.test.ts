import { execFile } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { promisify } from "node:util"
import t from "tap"

/*
 * The package as npm ships it, checked from the outside: what `npm pack` puts in the tarball,
 * and a fresh project that installs that tarball and uses it from TypeScript (skipLibCheck off)
 * and from CommonJS. Runs on the compiled dist/: `npm run build` first (npm test does).
 */

// tsc over every .d.ts the consumer reaches (skipLibCheck off) takes seconds of CPU, many more on a loaded machine.
t.setTimeout(300_000)

const root = path.resolve(import.meta.dirname, "..", "..")
const run = promisify(execFile)
const manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as {
  name: string
  main: string
  types: string
  bin: Record<string, string>
  exports: Record<string, string | { types: string; default: string }>
  dependencies: Record<string, string>
  peerDependencies: Record<string, string>
  peerDependenciesMeta?: Record<string, { optional?: boolean }>
}

interface PackResult {
  filename: string
  files: Array<{ path: string }>
}

async function npmPack(...args: string[]): Promise<PackResult> {
  const { stdout } = await run("npm", ["pack", "--json", "--ignore-scripts", ...args], { cwd: root, maxBuffer: 16 * 1024 * 1024 })
  return (JSON.parse(stdout) as PackResult[])[0]
}

const relative = (file: string) => file.replace(/^\.\//, "")

t.test("npm pack ships the types, the bin, README and LICENSE, and no tests, bench or example sources", async (t) => {
  const packed = new Set((await npmPack("--dry-run")).files.map((file) => file.path))
  for (const file of ["package.json", "README.md", "LICENSE", relative(manifest.main), relative(manifest.types)]) t.ok(packed.has(file), `${file} is packed`)
  const page = fs.readdirSync(path.join(root, "inspector")).map((name) => `inspector/${name}`)
  t.same(page.filter((file) => !packed.has(file)), [], "the task inspector's page is packed, every file of it")
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    if (typeof target === "string") continue
    t.ok(packed.has(relative(target.types)), `${subpath}: its types ${target.types} are packed`)
    t.ok(packed.has(relative(target.default)), `${subpath}: its module ${target.default} is packed`)
  }
  for (const [command, file] of Object.entries(manifest.bin)) {
    t.ok(packed.has(relative(file)), `the ${command} command ${file} is packed`)
    t.equal(fs.readFileSync(path.join(root, file), "utf8").split("\n")[0], "#!/usr/bin/env node", `${file} starts with its shebang`)
  }

  // An app's own Fastify serves the plugin: a dependency would nest a second copy whose types the app's register() refuses.
  t.notOk("fastify" in manifest.dependencies, "fastify is not a dependency")
  t.equal(manifest.peerDependencies.fastify, "^5.0.0", "fastify is a peer dependency, any 5.x")
  t.notOk(manifest.peerDependenciesMeta?.fastify?.optional, "and a required one")

  const unwanted = [...packed].filter((file) => /^(test|bench|examples|coverage|\.tap|node_modules|dist\/(test|bench|examples))\//.test(file) || (/\.ts$/.test(file) && !/\.d\.ts$/.test(file)))
  t.same(unwanted, [], "no tests, bench, example or TypeScript sources")

  // Every compiled file comes from a source that still exists: a stale build output would ship too.
  const stale = [...packed].filter((file) => file.startsWith("dist/")).filter((file) => {
    const source = file.replace(/^dist\//, "").replace(/(\.d)?\.js(\.map)?$|\.d\.ts$/, ".ts")
    return !fs.existsSync(path.join(root, source))
  })
  t.same(stale, [], "no compiled file without its source (after a rename: rm -rf dist && npm run build)")

  // Source maps carry their sources, so they never point at .ts files the package does not ship.
  const maps = [...packed].filter((file) => file.endsWith(".js.map"))
  t.ok(maps.length > 0, "source maps are shipped")
  const withoutSources = maps.filter((file) => {
    const map = JSON.parse(fs.readFileSync(path.join(root, file), "utf8")) as { sources: string[]; sourcesContent?: Array<string | null> }
    return map.sources.length === 0 || map.sourcesContent?.length !== map.sources.length || map.sourcesContent.some((text) => typeof text !== "string")
  })
  t.same(withoutSources, [], "every map holds the text of each source it names")
})

t.test("a fresh project installs the tarball and uses it from TypeScript (skipLibCheck off) and CommonJS, without pg or nats", { timeout: 280_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-consumer-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const { filename } = await npmPack("--pack-destination", dir)
  const project = path.join(dir, "app")
  const modules = path.join(project, "node_modules")
  fs.mkdirSync(path.join(modules, manifest.name), { recursive: true })
  await run("tar", ["-xzf", path.join(dir, filename), "-C", path.join(modules, manifest.name), "--strip-components=1"])

  // The installed package's dependencies and required peers, as npm would place them (ours, same versions), and the
  // consumer's own @types/node. Only what the tarball's package.json declares is there: an undeclared import fails.
  const shipped = JSON.parse(fs.readFileSync(path.join(modules, manifest.name, "package.json"), "utf8")) as typeof manifest
  const optional = (name: string) => shipped.peerDependenciesMeta?.[name]?.optional === true
  const needed = [...Object.keys(shipped.dependencies), ...Object.keys(shipped.peerDependencies).filter((name) => !optional(name)), "@types/node"]
  t.notOk(needed.includes("pg") || needed.includes("nats"), "the drivers are optional peers")
  for (const name of needed) {
    fs.mkdirSync(path.dirname(path.join(modules, name)), { recursive: true })
    fs.symlinkSync(path.join(root, "node_modules", name), path.join(modules, name), "dir")
  }
  t.notOk(fs.existsSync(path.join(modules, "pg")) || fs.existsSync(path.join(modules, "nats")) || fs.existsSync(path.join(modules, "@types", "pg")), "neither driver nor its types is installed")

  fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }))
  fs.writeFileSync(
    path.join(project, "tsconfig.json"),
    JSON.stringify({
      // A Node project's settings: Node's types, no DOM library.
      compilerOptions: { target: "ES2022", lib: ["ES2022"], module: "NodeNext", moduleResolution: "NodeNext", strict: true, skipLibCheck: false, outDir: "out", types: ["node"] },
      files: ["consumer.ts"],
    }),
  )
  fs.writeFileSync(
    path.join(project, "consumer.ts"),
    `import Fastify from "fastify"
import { createLocalClient, InMemoryTaskStore, toolnexusA2A, type A2ATask } from "toolnexus"
import { FileTaskStore, NatsTaskStore, PostgresTaskStore, resolveStore, type TaskStore } from "toolnexus/stores"
import { createClient, createToolkit, type AiSdkLanguageModel, type Toolkit } from "toolnexus/client"
import { serve, type ServeOptions } from "toolnexus/fastify"

// A language model typed without the AI SDK installed: the package's types for it are its own.
const languageModel: AiSdkLanguageModel = { specificationVersion: "v4", provider: "p.chat", modelId: "m", doGenerate: async () => ({ content: [] }), doStream: async () => Promise.reject(new Error("unused")) }
if (createClient({ languageModel }).model !== "m") throw new Error("the language model client took another model")

const store: TaskStore = new InMemoryTaskStore()
const task: A2ATask = { id: "t-1", contextId: "c-1", kind: "task", status: { state: "submitted" } }
await store.save(task)
const toolkit: Toolkit = await createToolkit({ builtins: false })
const app = Fastify()
await app.register(toolnexusA2A, { client: createLocalClient(() => "hi"), toolkit, store, name: "consumer", inspector: true })
const card = (await app.inject({ url: "/.well-known/agent-card.json" })).json() as { name: string }
const page = await app.inject({ url: "/inspector/inspector.js" })
await app.close()
const options: ServeOptions = { agent: async () => "hi", logger: false }
console.log(JSON.stringify({
  saved: (await store.get("t-1"))?.id,
  card: card.name,
  taskStore: app.taskStore === store,
  stores: [FileTaskStore, NatsTaskStore, PostgresTaskStore, resolveStore, serve].map((f) => typeof f),
  options: typeof options.agent,
  inspector: [page.statusCode, page.headers["content-type"]],
}))
`,
  )
  fs.writeFileSync(
    path.join(project, "consumer.cjs"),
    `const root = require("toolnexus")
const stores = require("toolnexus/stores")
const client = require("toolnexus/client")
const fastify = require("toolnexus/fastify")
console.log(JSON.stringify([root.toolnexusA2A, stores.FileTaskStore, client.createToolkit, fastify.serve].map((f) => typeof f)))
`,
  )

  const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc")
  const compiled = await run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: project }).then(
    () => "",
    (err: { stdout?: string; message: string }) => err.stdout || err.message,
  )
  t.equal(compiled, "", "tsc reports no error in the consumer or in any .d.ts it reaches")

  // tsc writes the JavaScript even when it reports type errors: the program runs either way.
  const esm = await run(process.execPath, ["out/consumer.js"], { cwd: project })
  t.same(JSON.parse(esm.stdout), { saved: "t-1", card: "consumer", taskStore: true, stores: ["function", "function", "function", "function", "function"], options: "function", inspector: [200, "text/javascript; charset=utf-8"] }, "the installed package serves the inspector's files from its own folder")
  const cjs = await run(process.execPath, ["consumer.cjs"], { cwd: project })
  t.same(JSON.parse(cjs.stdout), ["function", "function", "function", "function"], 'require("toolnexus") and each subpath work from CommonJS')
})

t.test("npm pack from a clean checkout builds first: the tarball has dist/ and the CLI", { timeout: 280_000 }, async (t) => {
  // The checkout's files as git knows them (committed or not, less what .gitignore leaves out): no dist/ among them.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-clean-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const { stdout } = await run("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], { cwd: root, maxBuffer: 16 * 1024 * 1024 })
  const files = stdout.split("\0").filter((file) => file !== "" && fs.existsSync(path.join(root, file)))
  t.notOk(files.some((file) => file.startsWith("dist/")), "a clean checkout has no dist/")
  for (const file of files) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true })
    fs.copyFileSync(path.join(root, file), path.join(dir, file))
  }
  fs.symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"), "dir")

  // Scripts on, as `npm pack` and `npm publish` run them: prepack builds.
  const packed = await run("npm", ["pack", "--dry-run", "--json"], { cwd: dir, maxBuffer: 16 * 1024 * 1024 })
  const json = packed.stdout.slice(packed.stdout.indexOf("[")) // what the build printed comes first
  const shipped = new Set((JSON.parse(json) as PackResult[])[0].files.map((file) => file.path))
  for (const file of ["dist/index.js", "dist/index.d.ts", ...Object.values(manifest.bin).map(relative)]) t.ok(shipped.has(file), `${file} is packed`)
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    if (typeof target !== "string") t.ok(shipped.has(relative(target.default)), `${subpath}: ${target.default} is packed`)
  }
})
