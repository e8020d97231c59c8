import { execFile } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import { promisify } from "node:util"
import t from "tap"
import { ROOT as root } from "../fixtures/helpers.js"

/**
 * The spec's three examples, run as a user would: compiled, importing
 * "toolnexus" through the package's own exports (npm test builds first).
 */
const run = promisify(execFile)
const examples = [
  ["01-file-store-roundtrip", /^ok: round-tripped abc-123$/m],
  ["02-resolve-store", /^ok: every selector resolved$/m],
  ["03-served-toolkit-host-store", /^ok: submitted → working → completed$/m],
] as const

for (const [name, expected] of examples) {
  t.test(`spec example ${name} runs unchanged`, async (t) => {
    const source = path.join(root, "examples", `${name}.ts`)
    const compiled = path.join(root, "dist", "examples", `${name}.js`)
    t.ok(fs.existsSync(compiled), `${compiled} exists (run npm run build first)`)
    t.ok(fs.statSync(compiled).mtimeMs >= fs.statSync(source).mtimeMs, "the build is not older than the example")
    t.match(fs.readFileSync(source, "utf8"), /from "toolnexus"/, "the example imports the package by name")
    const { stdout } = await run(process.execPath, [compiled], { cwd: root, timeout: 30_000 })
    t.match(stdout, expected)
  })
}
