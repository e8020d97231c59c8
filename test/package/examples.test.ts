import { execFile } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import { promisify } from "node:util"
import t from "tap"
import { ROOT as root } from "../fixtures/helpers.js"

/**
 * Every example listed in examples/README.md, run as a user would: compiled,
 * importing "toolnexus" (or a subpath) through the package's own exports (npm
 * test builds first). Each must exit 0 and print its `ok:` line; an example
 * missing from the README's table fails, so none goes unrun.
 */
const run = promisify(execFile)
const EACH_MS = 120_000

/** The line each example ends with; a listed example not named here must still print a line starting "ok:". */
const expected: Record<string, RegExp> = {
  "01-file-store-roundtrip": /^ok: round-tripped abc-123$/m,
  "02-resolve-store": /^ok: every selector resolved$/m,
  "03-served-toolkit-host-store": /^ok: submitted → working → completed$/m,
  "fastify-plugin-auth": /^ok: the agent served inside the host's Fastify app, behind its tokens$/m,
  "postgres-replicas": /^ok: a Task created on one replica was read on the other$/m,
  "mcp-tools": /^ok: the MCP server's tool ran in the toolkit, from an mcp.json$/m,
  "push-webhook": /^ok: the webhook verified the Task's signed updates to completed, and refused a forged and a tampered one$/m,
  "agent-as-tool": /^ok: the translator agent answered as a tool$/m,
  "streaming-resume": /^ok: the stream was cut and resumed with Last-Event-ID$/m,
  "grpc-client": /^ok: the SDK's gRPC client sent and read a Task$/m,
  "ai-sdk-model": /^ok: the AI SDK model called the tool and its answer streamed through the served agent$/m,
  "own-agent": /^ok: an agent of your own streamed, added a file and a data artifact, and asked for input$/m,
}

const examplesDir = path.join(root, "examples")
const readme = fs.readFileSync(path.join(examplesDir, "README.md"), "utf8")
/** The examples in the README's table, by the file each row's first cell links to: "| [name.ts](name.ts) | ... |". */
const listed = [...readme.matchAll(/^\|\s*\[[^\]]+\]\(([^)]+)\.ts\)\s*\|/gm)].map((m) => m[1])

t.setTimeout(EACH_MS * (listed.length + 1))

t.test("every example in examples/ is listed in examples/README.md, and every one listed exists", async (t) => {
  const files = fs.readdirSync(examplesDir).filter((name) => name.endsWith(".ts")).map((name) => name.slice(0, -3))
  t.ok(listed.length >= 3, "the README lists the examples in a table")
  t.same(files.filter((name) => !listed.includes(name)), [], "no example is missing from the README")
  t.same(listed.filter((name) => !files.includes(name)), [], "no row names a file that is not there")
  t.equal(new Set(listed).size, listed.length, "no example is listed twice")
})

for (const name of listed) {
  t.test(`example ${name} runs to its ok: line`, async (t) => {
    const source = path.join(examplesDir, `${name}.ts`)
    const compiled = path.join(root, "dist", "examples", `${name}.js`)
    t.ok(fs.existsSync(compiled), `${compiled} exists (run npm run build first)`)
    t.ok(fs.statSync(compiled).mtimeMs >= fs.statSync(source).mtimeMs, "the build is not older than the example")
    t.match(fs.readFileSync(source, "utf8"), /from "toolnexus(\/[a-z]+)?"/, "the example imports the package by name")
    // execFile rejects on a non-zero exit or the timeout, with the output in the error.
    const { stdout } = await run(process.execPath, [compiled], { cwd: root, timeout: EACH_MS })
    t.match(stdout, expected[name] ?? /^ok: /m)
  })
}
