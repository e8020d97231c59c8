import { createHash } from "node:crypto"
import t, { type Test } from "tap"
import { createClient, createLocalClient } from "../../lib/client/client.js"
import { createToolkit, type Toolkit } from "../../lib/tools/toolkit.js"
import { modelServer, memoryLogger, waitFor } from "../fixtures/helpers.js"
import { alive, gone, stdioServer } from "../fixtures/mcp.js"

/*
 * MCP servers over stdio as tool sources: test/fixtures/mcp-stdio-server.mjs, a real server made with the
 * official SDK, started by the toolkit as an mcp.json's "command" entry.
 */

const openAIToolCall = (id: string, name: string, args: string) => ({ id, type: "function", function: { name, arguments: args } })

/** The documented rule for a name that had to change: "_" and the first 8 hex digits of the SHA-256 of `<server>__<tool>`. */
const hashOf = (name: string) => createHash("sha256").update(name).digest("hex").slice(0, 8)

/** A toolkit with the fixture as server "files" (and nothing else); closed when the test ends. */
async function filesToolkit(t: Test, extra: Record<string, unknown> = {}) {
  const server = stdioServer(t)
  const toolkit = await createToolkit({ builtins: false, mcpServers: { files: { ...server.config, ...extra } } })
  t.teardown(() => toolkit.close())
  return { toolkit, ...server }
}

t.test("a stdio server's tools join the toolkit: names made valid and unique, schemas the toolkit takes", async (t) => {
  const { toolkit } = await filesToolkit(t)
  const names = toolkit.tools().map((tool) => tool.name)
  const long = "files__a_tool_whose_name_is_long_enough_to_push_the_whole_name_past_64"
  t.same(names, [
    "files__echo",
    `files__weather_today_${hashOf("files__weather.today")}`,
    "files__picture",
    "files__fail",
    "files__crash",
    "files__slow",
    "files__hang",
    "files__whoami",
    "files__grow",
    "files__break_list",
    "files__odd_schema",
    `${long.slice(0, 55)}_${hashOf(long)}`,
  ], "every page of tools/list, in order; the second \"echo\" of the server is left out")
  t.ok(names.every((name) => /^[a-zA-Z0-9_-]{1,64}$/.test(name)), "every name is valid for both model APIs")
  const echo = toolkit.get("files__echo")
  t.same(echo?.inputSchema, { type: "object", properties: { text: { type: "string" } }, required: ["text"] }, "the draft 2020-12 $schema is dropped")
  t.equal(echo?.description, "Says the text back.")
  t.equal(toolkit.get(names[1])?.description, "Today's weather", "the title stands in for a missing description")
  const odd = toolkit.get("files__odd_schema")
  t.same(odd?.inputSchema, { type: "object" }, "a schema Ajv cannot compile is replaced by one taking any object")
  t.match(odd?.description, /^Lists schemas Ajv cannot compile\. \(Note: its input schema could not be compiled \(.*data\/properties\/x\/type.*\), so its arguments are not checked here\.\)$/)
  t.same(await toolkit.execute("files__odd_schema", { x: "anything" }), { output: "odd but fine", isError: false }, "callable, and an outputSchema the SDK cannot compile fails neither the list nor the call")
  t.same(toolkit.toOpenAI()[0], { type: "function", function: { name: "files__echo", description: "Says the text back.", parameters: echo?.inputSchema } })
})

t.test("results: text, structured content as JSON, media described, isError as an error result", async (t) => {
  const { toolkit } = await filesToolkit(t)
  t.same(await toolkit.execute("files__echo", { text: "hi" }), { output: "echo: hi", isError: false })
  t.same(await toolkit.execute(`files__weather_today_${hashOf("files__weather.today")}`, { city: "Lyon" }), { output: '{"city":"Lyon","sky":"clear"}', isError: false }, "structured content with no text block")
  const pixelBytes = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64").length
  t.same(await toolkit.execute("files__picture", {}), {
    output: [
      `[image: image/png, ${pixelBytes} bytes, not shown]`,
      "a note",
      "[resource blob://1: application/octet-stream, 3 bytes, not shown]",
      "[resource link file:///tmp/x: a file]",
      "[audio: audio/wav, 3 bytes, not shown]",
    ].join("\n"),
    isError: false,
  })
  t.same(await toolkit.execute("files__fail", {}), { output: "Tool files__fail failed: no such city", isError: true }, "isError: the server's text, as an error result")
  const invalid = await toolkit.execute("files__echo", { text: 3 })
  t.match(invalid, { output: /^Invalid arguments for files__echo: args\/text must be string/, isError: true }, "arguments are checked against the server's schema first")
})

t.test("a fake model calls an MCP tool over stdio, and the result reaches its next turn", async (t) => {
  const { toolkit } = await filesToolkit(t)
  const model = await modelServer(t, [
    { json: { choices: [{ message: { role: "assistant", content: null, tool_calls: [openAIToolCall("call_1", "files__echo", '{"text":"from the model"}')] } }] } },
    { json: { choices: [{ message: { content: "the server said: echo: from the model" } }] } },
  ])
  const result = await createClient({ baseUrl: model.url, style: "openai", model: "m" }).run("say it", { toolkit })
  t.equal(result.text, "the server said: echo: from the model")
  const offered = (model.requests[0].body.tools as Array<{ function: { name: string } }>).map((tool) => tool.function.name)
  t.ok(offered.includes("files__echo"), "the model was offered the MCP tools")
  t.same(model.requests[1].body.messages.at(-1), { role: "tool", tool_call_id: "call_1", content: "echo: from the model" }, "the MCP result is the tool message of the next turn")
})

t.test("a server that crashes gives an error result, is started again at the next call, and works", async (t) => {
  const logger = memoryLogger()
  const server = stdioServer(t)
  const toolkit = await createToolkit({ builtins: false, mcpServers: { files: server.config }, logger })
  t.teardown(() => toolkit.close())
  const listed = toolkit.tools()
  const first = Number((await toolkit.execute("files__whoami", {})).output)
  t.same(server.pids(), [first])
  const crash = await toolkit.execute("files__crash", {})
  t.equal(crash.isError, true)
  t.match(crash.output, /^Tool files__crash failed: MCP server "files" went away during the call \(.*Connection closed\); it wrote: crashing on purpose; it is restarted at the next call$/)
  await gone([first])
  t.match(logger.lines.filter((line) => line.msg === "MCP server went away; it is restarted at the next call"), [{ level: "warn", mcpServer: "files", stderr: "crashing on purpose" }])
  t.match(logger.lines[0], { level: "warn", mcpServer: "files", tool: "echo", msg: "MCP server lists a tool name twice; the first is kept" })
  const second = await toolkit.execute("files__whoami", {})
  t.equal(second.isError, false)
  t.not(Number(second.output), first, "a new process answers")
  t.same(server.pids(), [first, Number(second.output)])
  t.same(await toolkit.execute("files__echo", { text: "again" }), { output: "echo: again", isError: false })
  t.equal(toolkit.tools(), listed, "the new process lists the same tools: the toolkit's list is left as it was")
})

t.test("a cancel during a slow tool reaches the server as notifications/cancelled; the server keeps running", async (t) => {
  const { toolkit, events, pids } = await filesToolkit(t)
  const controller = new AbortController()
  const client = createLocalClient(({ messages }) => (messages.some((m) => m.role === "tool") ? "done" : { toolCalls: [{ id: "c1", name: "files__slow" }] }))
  const run = client.run("go", { toolkit, signal: controller.signal })
  await waitFor(() => events().includes("slow started"), 10_000, "the slow tool to start")
  controller.abort(new Error("the user canceled"))
  await t.rejects(run)
  await waitFor(() => events().some((line) => line.startsWith("canceled ")), 10_000, "the server to see the cancellation")
  t.match(events().find((line) => line.startsWith("canceled ")), /the user canceled/, "with the run's reason")
  t.same(await toolkit.execute("files__echo", { text: "still here" }), { output: "echo: still here", isError: false })
  t.equal(pids().length, 1, "not restarted: a cancel is not a failure")
})

t.test("a call past callTimeoutMs is an error result; the hung server is ended and started again at the next call", async (t) => {
  const { toolkit, events, pids } = await filesToolkit(t, { callTimeoutMs: 1500 })
  const hung = await toolkit.execute("files__hang", {})
  t.same(hung, { output: 'Tool files__hang failed: MCP server "files" did not answer within 1500 ms (callTimeoutMs); the call was canceled and the server is restarted at the next call', isError: true })
  t.ok(events().includes("hang started"))
  const [first] = pids()
  await gone([first])
  const next = await toolkit.execute("files__whoami", {})
  t.equal(next.isError, false)
  t.same(pids(), [first, Number(next.output)])
})

t.test("tools/list_changed: a tool the server adds joins the toolkit", async (t) => {
  const { toolkit } = await filesToolkit(t)
  t.equal(toolkit.get("files__extra_13"), undefined)
  const echo = toolkit.get("files__echo")
  t.same(await toolkit.execute("files__grow", {}), { output: "added extra_13", isError: false })
  await waitFor(() => toolkit.get("files__extra_13") !== undefined, 10_000, "the new tool to be listed")
  t.same(await toolkit.execute("files__extra_13", {}), { output: "ran extra_13", isError: false })
  t.equal(toolkit.tools().length, 13)
  t.equal(toolkit.get("files__echo"), echo, "an unchanged tool keeps its object (and the toolkit its compiled schema)")
})

t.test("a list that fails after list_changed is logged, and the last list stays", async (t) => {
  const logger = memoryLogger()
  const server = stdioServer(t)
  const toolkit = await createToolkit({ builtins: false, mcpServers: { files: server.config }, logger })
  t.teardown(() => toolkit.close())
  const before = toolkit.tools()
  t.same(await toolkit.execute("files__break_list", {}), { output: "broken", isError: false })
  await waitFor(() => logger.lines.some((line) => /listing them failed/.test(String(line.msg))), 10_000, "the failed listing to be logged")
  t.match(logger.lines.find((line) => /listing them failed/.test(String(line.msg))), { level: "warn", mcpServer: "files", msg: "MCP server said its tools changed, but listing them failed; the last list stays", err: { message: /the tools list is broken/ } })
  t.equal(toolkit.tools(), before, "the same list")
  t.same(await toolkit.execute("files__echo", { text: "fine" }), { output: "echo: fine", isError: false })
})

t.test("close ends every server process; a call after it is an error result", async (t) => {
  const a = stdioServer(t)
  const b = stdioServer(t)
  const toolkit: Toolkit = await createToolkit({ builtins: false, mcpServers: { a: a.config, b: b.config } })
  const pids = [...a.pids(), ...b.pids()]
  t.equal(pids.length, 2)
  t.ok(pids.every(alive))
  await toolkit.close()
  t.ok(pids.every((pid) => !alive(pid)), "both processes are gone once close() resolves")
  t.match(await toolkit.execute("a__echo", { text: "x" }), { output: /MCP server "a" is closed/, isError: true })
})

t.test("lazy: createToolkit does not wait; the tools join once the server is up", async (t) => {
  const server = stdioServer(t)
  const toolkit = await createToolkit({ builtins: ["calculate"], mcpServers: { files: { ...server.config, lazy: true } } })
  t.teardown(() => toolkit.close())
  t.equal(toolkit.get("calculate")?.name, "calculate")
  await waitFor(() => toolkit.get("files__echo") !== undefined, 10_000, "the lazy server's tools")
  t.same(await toolkit.execute("files__echo", { text: "late" }), { output: "echo: late", isError: false })
})

t.test("lazy: a server that cannot start is logged and tried again, and close stops the tries", async (t) => {
  const logger = memoryLogger()
  const toolkit = await createToolkit({ builtins: false, mcpServers: { gone: { command: "toolnexus-no-such-command", lazy: true } }, logger })
  await waitFor(() => logger.lines.length >= 2, 10_000, "a first try and a retry")
  t.match(logger.lines[0], { level: "warn", mcpServer: "gone", retryInMs: 1000, msg: "lazy MCP server did not start; trying again later", err: { message: /mcpServers\.gone\.command "toolnexus-no-such-command" could not be started \(ENOENT\)/ } })
  t.match(logger.lines[1], { retryInMs: 2000 }, "each wait twice the last")
  t.same(toolkit.tools(), [])
  await toolkit.close()
})
