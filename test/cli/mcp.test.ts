import { spawn } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import t, { type Test } from "tap"
import { parseCli, USAGE } from "../../lib/cli.js"
import { callRpc, CLI_BIN, modelServer, ROOT, rpc, startCli, tmpDir, userMessage } from "../fixtures/helpers.js"
import { gone, stdioServer } from "../fixtures/mcp.js"

/* The command's --mcp-config FILE: an mcp.json as desktop clients and IDEs write it, its servers' tools given to the agent. */

/** Writes an mcp.json (or any text) in the test's directory; its path. */
function mcpJson(t: Test, content: unknown): string {
  const file = path.join(tmpDir(t, "tn-mcp-cli-"), "mcp.json")
  fs.writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content))
  return file
}

t.test("parseCli: --mcp-config / TOOLNEXUS_MCP_CONFIG reads the mcpServers of an mcp.json", async (t) => {
  const servers = { files: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."] }, web: { url: "https://mcp.example/mcp", headers: { authorization: "Bearer x" } } }
  const file = mcpJson(t, { mcpServers: servers, otherClientsSettings: { theme: "dark" } })
  const read = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    return config === "help" ? config : config.mcpServers
  }
  t.same(read(["--mcp-config", file]), servers, "the mcpServers object; the rest of the file is left to its other readers")
  t.same(read([], { TOOLNEXUS_MCP_CONFIG: file }), servers)
  t.equal(read([]), undefined, "none by default")
  t.match(USAGE, /--mcp-config FILE {4}an mcp\.json: .*\n.*\n.*\(TOOLNEXUS_MCP_CONFIG; default none\)/, "the usage names the flag and its variable")

  const missing = path.join(path.dirname(file), "absent.json")
  t.throws(() => parseCli(["--mcp-config", missing], {}), { message: `--mcp-config ${JSON.stringify(missing)} could not be read: ENOENT` })
  const notJson = mcpJson(t, "{ mcpServers: ")
  t.throws(() => parseCli(["--mcp-config", notJson], {}), { message: new RegExp(`^--mcp-config ${JSON.stringify(notJson)} is not JSON: `) })
  const noServers = mcpJson(t, { servers: {} })
  t.throws(() => parseCli(["--mcp-config", noServers], {}), { message: `--mcp-config ${JSON.stringify(noServers)} should hold an object with "mcpServers", as desktop clients write it: { "mcpServers": { "files": { "command": "npx", "args": [...] } } }` })
  const bad = mcpJson(t, { mcpServers: { files: { command: "npx", url: "http://h" } } })
  t.throws(() => parseCli(["--mcp-config", bad], {}), { message: `--mcp-config ${JSON.stringify(bad)}: mcpServers.files has both "command" and "url": a server is either a process to start or a URL to reach, keep one` })
})

t.test("the command serves an agent whose model calls an MCP server's tool, and SIGTERM ends the server's process", async (t) => {
  const server = stdioServer(t)
  const file = mcpJson(t, { mcpServers: { files: server.config } })
  const model = await modelServer(t, [
    { json: { choices: [{ message: { content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "files__whoami", arguments: "{}" } }] } }] } },
    { json: { choices: [{ message: { content: "asked the server" } }] } },
  ])
  const { url, child, lines } = await startCli(t, ["--port", "0", "--store", "memory", "--mcp-config", file, "--base-url", model.url, "--model", "m"])
  t.match(lines.find((line) => line.msg === "toolnexus agent listening"), { mcpServers: ["files"], tools: 14 }, "the start line names the servers and counts the tools (builtins too)")
  const [pid] = server.pids()

  const res = await callRpc(url, rpc("SendMessage", { message: userMessage("who serves you?"), configuration: { blocking: true } }))
  t.equal(res.result.status.state, "completed")
  t.equal(res.result.artifacts[0].parts[0].text, "asked the server")
  t.same(model.requests[1].body.messages.at(-1), { role: "tool", tool_call_id: "call_1", content: String(pid) }, "the MCP server's answer reached the model's next turn")

  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  t.equal(await exited, 0)
  await gone([pid])
  t.same(server.pids(), [pid], "one process for the whole run")
})

t.test("the command exits 1 naming the server and the field when an MCP server cannot start", async (t) => {
  const file = mcpJson(t, { mcpServers: { files: { command: "toolnexus-no-such-command" } } })
  const child = spawn(process.execPath, [CLI_BIN, "--port", "0", "--store", "memory", "--mcp-config", file], { cwd: ROOT })
  t.teardown(() => void child.kill("SIGKILL"))
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  t.equal(code, 1)
  t.equal(stderr.trim(), 'toolnexus: MCP server "files": mcpServers.files.command "toolnexus-no-such-command" could not be started (ENOENT): check that it is installed and on PATH')
})
