import { createHash } from "node:crypto"
import fs from "node:fs"
import path from "node:path"
import t from "tap"
import { readMcpConfig } from "../../lib/client/index.js"
import { checkMcpServers, DEFAULT_CALL_TIMEOUT_MS } from "../../lib/tools/mcp/config.js"
import { mcpToolName } from "../../lib/tools/mcp/names.js"
import { resultText } from "../../lib/tools/mcp/results.js"
import { toolInputSchema } from "../../lib/tools/mcp/schema.js"
import { createToolkit, type ToolSource } from "../../lib/tools/toolkit.js"
import { tmpDir } from "../fixtures/helpers.js"
import { alive, stdioServer } from "../fixtures/mcp.js"

/* The mcpServers option: what a bad entry is told, and the small rules (names, schemas, results) in isolation. */

t.test("checkMcpServers: each entry's settings, with the defaults", async (t) => {
  t.same(checkMcpServers({ files: { command: "npx", args: ["-y", "server"], env: { TOKEN: "x" }, cwd: "/tmp" }, web: { url: "https://mcp.example/mcp", headers: { authorization: "Bearer x" }, lazy: true, callTimeoutMs: 5000 } }), [
    { name: "files", lazy: false, callTimeoutMs: DEFAULT_CALL_TIMEOUT_MS, transport: "stdio", command: "npx", args: ["-y", "server"], env: { TOKEN: "x" }, cwd: "/tmp" },
    { name: "web", lazy: true, callTimeoutMs: 5000, transport: "http", url: new URL("https://mcp.example/mcp"), headers: { authorization: "Bearer x" }, maxMessageBytes: 32 * 1024 * 1024 },
  ])
  t.match(checkMcpServers({ a: { type: "stdio", command: "x" }, b: { type: "sse", url: "http://h/sse" }, c: { type: "streamable-http", url: "http://h/" } }), [{ transport: "stdio", args: [], env: {} }, { transport: "sse" }, { transport: "http" }], "the type field mcp.json files written for other clients carry")
})

t.test("checkMcpServers: a bad entry is refused naming the server and the field", async (t) => {
  const refusals: Array<[unknown, string]> = [
    [[], "mcpServers should be an object of MCP servers by name, such as { \"files\": { \"command\": \"npx\", \"args\": [...] } }, got a list"],
    [{ "": { command: "x" } }, 'mcpServers has a server with an empty name: give each server a name of letters, digits, "_" or "-"'],
    [{ files: "npx" }, 'mcpServers.files should be an object with "command" (a process to start) or "url" (a server to reach), got a string'],
    [{ files: {} }, 'mcpServers.files needs "command" (a process to start) or "url" (a server to reach)'],
    [{ files: { command: "x", url: "http://h" } }, 'mcpServers.files has both "command" and "url": a server is either a process to start or a URL to reach, keep one'],
    [{ files: { command: "x", headers: {} } }, 'mcpServers.files.headers is not a setting of a command server; it may have "type", "command", "args", "env", "cwd", "lazy", "callTimeoutMs"'],
    [{ web: { url: "http://h", disabled: true } }, 'mcpServers.web.disabled is not a setting of a URL server; it may have "type", "url", "headers", "lazy", "callTimeoutMs"'],
    [{ "my files": { command: "" } }, 'mcpServers."my files".command should be the program to start, such as "npx" or "node", got an empty string'],
    [{ files: { command: "x", args: "-y" } }, "mcpServers.files.args should be a list of strings, got a string"],
    [{ files: { command: "x", args: [1] } }, "mcpServers.files.args should be a list of strings, got a list"],
    [{ files: { command: "x", env: { TOKEN: 42 } } }, "mcpServers.files.env.TOKEN should be a string, got 42"],
    [{ files: { command: "x", env: ["A=1"] } }, "mcpServers.files.env should be an object of environment variables (names to strings), got a list"],
    [{ files: { command: "x", cwd: 1 } }, "mcpServers.files.cwd should be a directory, got 1"],
    [{ files: { command: "x", type: "http" } }, 'mcpServers.files.type should be "stdio" for a server with a command, got "http"'],
    [{ web: { url: "http://h", type: "ws" } }, 'mcpServers.web.type should be "http", "streamable-http" or "sse" for a server with a url, got "ws"'],
    [{ web: { url: "ftp://user:pw@h/" } }, 'mcpServers.web.url should be an http(s) URL, got "ftp://user:***@h/"'],
    [{ web: { url: 8080 } }, "mcpServers.web.url should be an http(s) URL, got 8080"],
    [{ web: { url: "http://h", headers: { authorization: null } } }, "mcpServers.web.headers.authorization should be a string, got null"],
    [{ web: { url: "http://h", lazy: "yes" } }, "mcpServers.web.lazy should be true or false, got a string"],
    [{ web: { url: "http://h", callTimeoutMs: 0 } }, "mcpServers.web.callTimeoutMs should be a whole number of milliseconds from 1 to 2147483647, got 0"],
    [{ web: { url: "http://h", callTimeoutMs: {} } }, "mcpServers.web.callTimeoutMs should be a whole number of milliseconds from 1 to 2147483647, got an object"],
  ]
  for (const [servers, message] of refusals) t.throws(() => checkMcpServers(servers), { name: "TypeError", message }, message)
})

t.test("readMcpConfig: an mcp.json's mcpServers, checked; every refusal names the file", async (t) => {
  const dir = tmpDir(t, "tn-mcp-json-")
  const write = (name: string, content: unknown) => {
    const file = path.join(dir, name)
    fs.writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content))
    return file
  }
  const servers = { files: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."] }, web: { url: "https://mcp.example/mcp", headers: { authorization: "Bearer x" } } }
  t.same(readMcpConfig(write("mcp.json", { mcpServers: servers, theme: "dark" })), servers, "the mcpServers object; the file's other fields are left out")
  t.same(readMcpConfig(write("empty.json", { mcpServers: {} })), {}, "no servers is a valid file")

  const missing = path.join(dir, "absent.json")
  t.throws(() => readMcpConfig(missing), { message: `MCP config ${JSON.stringify(missing)} could not be read: ENOENT` })
  t.throws(() => readMcpConfig(dir), { message: `MCP config ${JSON.stringify(dir)} could not be read: EISDIR` })
  const notJson = write("broken.json", "{ mcpServers: ")
  t.throws(() => readMcpConfig(notJson), { message: new RegExp(`^MCP config ${JSON.stringify(notJson)} is not JSON: `) })
  const hint = 'should hold an object with "mcpServers", as desktop clients write it: { "mcpServers": { "files": { "command": "npx", "args": [...] } } }'
  for (const [name, content] of [["servers.json", { servers: {} }], ["list.json", [{ mcpServers: {} }]], ["null.json", "null"]] as const) {
    const file = write(name, content)
    t.throws(() => readMcpConfig(file), { message: `MCP config ${JSON.stringify(file)} ${hint}` }, `${name} has no mcpServers object`)
  }
  const bad = write("bad.json", { mcpServers: { files: { command: "npx", args: "-y" } } })
  t.throws(() => readMcpConfig(bad), { message: `MCP config ${JSON.stringify(bad)}: mcpServers.files.args should be a list of strings, got a string` }, "a bad entry: the file, the server and the field")
  const secret = write("secret.json", { mcpServers: { web: { url: "http://h", headers: { authorization: 42 } } } })
  t.throws(() => readMcpConfig(secret), { message: `MCP config ${JSON.stringify(secret)}: mcpServers.web.headers.authorization should be a string, got 42` })
})

t.test("createToolkit fails on a server that cannot start, naming the server and the field, and leaves nothing running", async (t) => {
  await t.rejects(createToolkit({ mcpServers: { files: { command: "npx", nope: 1 } as never } }), { message: /^mcpServers\.files\.nope is not a setting/ }, "the option is checked as given")
  await t.rejects(createToolkit({ mcpServers: { files: { command: "toolnexus-no-such-command" } } }), {
    message: 'MCP server "files": mcpServers.files.command "toolnexus-no-such-command" could not be started (ENOENT): check that it is installed and on PATH',
  })
  const missing = path.join(import.meta.dirname, "no-such-dir")
  await t.rejects(createToolkit({ mcpServers: { files: { command: process.execPath, cwd: missing } } }), { message: `MCP server "files": mcpServers.files.cwd ${JSON.stringify(missing)} should be a directory (ENOENT)` })
  await t.rejects(createToolkit({ mcpServers: { files: { command: process.execPath, args: ["-e", "console.error('not an MCP server'); process.exit(2)"] } } }), {
    message: /^MCP server "files": mcpServers\.files\.command ".*node -e console\.error\('not an MCP server'\); process\.exit\(2\)" did not start an MCP server: MCP error -32000: Connection closed; it wrote: not an MCP server$/,
  })

  const unlisted = stdioServer(t)
  await t.rejects(createToolkit({ mcpServers: { files: { ...unlisted.config, env: { ...unlisted.config.env, MCP_FAIL_LIST: "1" } } } }), {
    message: /^MCP server "files" did not list its tools: MCP error -32603: the tools list is broken$/,
  })
  t.notOk(alive(unlisted.pids()[0]), "a server that started but could not list its tools is ended")

  // One server starts, two fail: both failures are told, and the one that started is ended, as is a source handed in.
  const good = stdioServer(t)
  let sourceClosed = false
  const source: ToolSource = { name: "handed in", tools: () => [], close: async () => void (sourceClosed = true) }
  const refused = await createToolkit({ sources: [source], mcpServers: { good: good.config, bad: { command: "toolnexus-no-such-command" }, worse: { command: "toolnexus-no-such-either" } } }).then(
    () => new Error("createToolkit did not fail"),
    (err: Error) => err,
  )
  t.match(refused.message, /^MCP server "bad": .*toolnexus-no-such-command.*\nMCP server "worse": .*toolnexus-no-such-either/)
  t.equal(good.pids().length, 1, "the good server had started")
  t.notOk(alive(good.pids()[0]), "and is ended before createToolkit rejects")
  t.ok(sourceClosed, "the sources handed in are closed too")
})

t.test("a lazy server's bad command is not a createToolkit failure", async (t) => {
  const toolkit = await createToolkit({ builtins: false, mcpServers: { later: { command: "toolnexus-no-such-command", lazy: true } } })
  t.same(toolkit.tools(), [])
  await toolkit.close()
})

t.test("mcpToolName: <server>__<tool> when valid; else sanitized, cut and given a stable hash", async (t) => {
  const hash = (name: string) => createHash("sha256").update(name).digest("hex").slice(0, 8)
  t.equal(mcpToolName("github", "search_issues"), "github__search_issues")
  t.equal(mcpToolName("my server", "get.file"), `my_server__get_file_${hash("my server__get.file")}`)
  t.not(mcpToolName("a", "b.c"), mcpToolName("a", "b_c"), "two names that sanitize alike stay apart")
  t.equal(mcpToolName("a", "b_c"), "a__b_c")
  const long = mcpToolName("s", "x".repeat(100))
  t.equal(long.length, 64)
  t.equal(long, `s__${"x".repeat(52)}_${hash(`s__${"x".repeat(100)}`)}`)
  t.equal(mcpToolName("s", "x".repeat(100)), long, "the same at every start")
  t.equal(mcpToolName("s", "x".repeat(59)), `s__${"x".repeat(59)}`, "64 characters exactly are kept")
})

t.test("toolInputSchema: what the toolkit can take", async (t) => {
  t.same(toolInputSchema({ properties: { a: { type: "string" } } }), { schema: { type: "object", properties: { a: { type: "string" } } } }, "no type: an object")
  t.same(toolInputSchema(undefined), { schema: { type: "object" }, note: "the server gave no input schema object, so its arguments are not checked here" })
  const withId = { $id: "https://example.com/s", type: "object", properties: { a: { $ref: "#/$defs/a" } }, $defs: { a: { type: "number" } } }
  t.same(toolInputSchema(withId), { schema: withId }, "an $id and $defs compile")
  t.same(toolInputSchema(withId), { schema: withId }, "and again: nothing is kept by its $id")
  t.match(toolInputSchema({ type: "object", properties: { a: { $ref: "#/nowhere" } } }), { schema: { type: "object" }, note: /can't resolve reference #\/nowhere/ })
})

t.test("resultText: the forms a result takes", async (t) => {
  t.equal(resultText({ content: [{ type: "text", text: "a" }, { type: "text", text: "b" }], structuredContent: { x: 1 } }, "t"), "a\nb", "text wins over structured content")
  t.equal(resultText({ content: [] }, "t"), "")
  t.equal(resultText({ toolResult: "old" }, "t"), "old", "the 2024-10-07 form")
  t.equal(resultText({ toolResult: { n: 1 } }, "t"), '{"n":1}')
  t.equal(resultText({ content: [{ type: "future" } as never] }, "t"), "[future content, not shown]")
  t.throws(() => resultText({ content: [], isError: true }, "t"), { message: "the tool t reported an error without saying what" })
})
