import { spawn } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import t, { type Test } from "tap"
import { parseCli, USAGE } from "../../lib/cli.js"
import { callRpc, CLI_BIN, ROOT, rpc, startCli, tmpDir } from "../fixtures/helpers.js"

/** The toolnexus command serving an agent module of the user's own (--agent). */

/** Writes `source` as an ES module in a fresh directory; its path relative to the repository root (the command's working directory here). */
function agentModule(t: Test, source: string): string {
  const file = path.join(tmpDir(t), "my-agent.mjs")
  fs.writeFileSync(file, source)
  return `./${path.relative(ROOT, file)}`
}

/** Runs the command to its exit; its code and what it wrote to stderr. */
async function runToExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CLI_BIN, ...args], { cwd: ROOT })
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  return { code, stderr }
}

t.test("parseCli: --agent FILE (or TOOLNEXUS_AGENT) resolved against the working directory; not with the built-in loop's flags", async (t) => {
  const config = parseCli(["--agent", "./agents/desk.js"], {})
  t.equal(config !== "help" && config.agentModule, path.resolve("agents/desk.js"))
  const fromEnv = parseCli([], { TOOLNEXUS_AGENT: "desk.js" })
  t.equal(fromEnv !== "help" && fromEnv.agentModule, path.resolve("desk.js"))
  t.throws(() => parseCli(["--agent", "a.js", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"], {}), {
    message: "--agent serves your own agent module, and --base-url is for the built-in tool-calling loop: give one or the other (your agent calls its own model and tools)",
  })
  t.throws(() => parseCli(["--agent", "a.js", "--a2a-agent", "http://127.0.0.1:1"], {}), /--agent serves your own agent module, and --a2a-agent is for the built-in tool-calling loop/)
  t.throws(() => parseCli(["--agent", "a.js", "--max-tool-result", "1KiB"], {}), /and --max-tool-\* limits is for the built-in/)
  t.match(USAGE, /--agent FILE [\s\S]*?TOOLNEXUS_AGENT/, "the usage text names the flag and its variable")
})

t.test("the toolnexus command serves an agent module: its answer, streamed text and question reach the peer", async (t) => {
  const file = agentModule(
    t,
    `export default async function (ctx) {
  const said = ctx.message.parts.map((p) => p.text ?? "").join("")
  if (ctx.history.some((m) => m.role === "agent")) return "thanks for " + said
  if (said === "ask") return { inputRequired: "which one?" }
  ctx.text("you said ")
  return said
}
`,
  )
  const { url, child, lines } = await startCli(t, ["--port", "0", "--store", "memory", "--agent", file])
  t.match(lines.at(-1), { msg: "toolnexus agent listening", agent: path.resolve(ROOT, file) }, "the log names the module")
  const done = await callRpc(url, rpc("SendMessage", { message: { messageId: "m1", role: "user", parts: [{ kind: "text", text: "hello" }] }, configuration: { blocking: true } }))
  t.equal(done.result.status.state, "completed")
  t.equal(done.result.artifacts[0].parts[0].text, "you said hello")
  const asked = await callRpc(url, rpc("SendMessage", { message: { messageId: "m2", role: "user", parts: [{ kind: "text", text: "ask" }] }, configuration: { blocking: true } }))
  t.equal(asked.result.status.state, "input-required")
  const answered = await callRpc(url, rpc("SendMessage", { message: { messageId: "m3", taskId: asked.result.id, role: "user", parts: [{ kind: "text", text: "the red one" }] }, configuration: { blocking: true } }))
  t.equal(answered.result.artifacts[0].parts[0].text, "thanks for the red one")
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  t.equal(await exited, 0, "exits cleanly on SIGTERM")
})

t.test("the toolnexus command exits naming an --agent module without a function default export, or that cannot be loaded", async (t) => {
  const named = agentModule(t, "export const agent = async () => 'hi'\n")
  const noDefault = await runToExit(["--port", "0", "--store", "memory", "--agent", named])
  t.equal(noDefault.code, 1)
  t.match(noDefault.stderr, `toolnexus: --agent ${JSON.stringify(path.resolve(ROOT, named))} has no default export (it exports agent): its default export should be the agent function`)
  const notAFunction = await runToExit(["--port", "0", "--store", "memory", "--agent", agentModule(t, "export default { run() {} }\n")])
  t.equal(notAFunction.code, 1)
  t.match(notAFunction.stderr, /has a default export of type object: its default export should be the agent function/)
  const missing = await runToExit(["--port", "0", "--store", "memory", "--agent", "./no-such-agent.mjs"])
  t.equal(missing.code, 1)
  t.match(missing.stderr, /toolnexus: --agent ".*no-such-agent\.mjs" could not be loaded: Cannot find module/)
})
