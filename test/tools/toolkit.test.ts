import childProcess from "node:child_process"
import dgram from "node:dgram"
import dns from "node:dns"
import fs, { statSync } from "node:fs"
import fsp from "node:fs/promises"
import http from "node:http"
import https from "node:https"
import { syncBuiltinESMExports } from "node:module"
import net from "node:net"
import tls from "node:tls"
import t from "tap"
import { createToolkit, type Tool } from "../../lib/tools/toolkit.js"

const add: Tool = {
  name: "add",
  description: "Adds two numbers",
  inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"], additionalProperties: false },
  execute: (args) => (args.a as number) + (args.b as number),
}

t.test("builtins: false gives an empty toolkit; extraTools are added", async (t) => {
  const none = await createToolkit({ builtins: false })
  t.same(none.tools(), [])
  t.same(none.toOpenAI(), [])
  const mine = await createToolkit({ builtins: false, extraTools: [add] })
  t.same(mine.tools().map((tool) => tool.name), ["add"])
  t.equal(mine.get("add"), add)
  t.equal(mine.get("nope"), undefined)
})

/**
 * Runs `work` with every function of the file system, network and process
 * modules (and fetch) recording its calls, named imports included; gives
 * the calls. Classes are left alone: what they do goes through the functions.
 */
async function trappingIo(work: () => Promise<void>): Promise<string[]> {
  const calls: string[] = []
  const modules: Record<string, Record<string, unknown>> = { fs, "fs/promises": fsp, net, http, https, tls, dns, dgram, child_process: childProcess }
  const undo: Array<() => void> = []
  for (const [name, exports] of Object.entries(modules)) {
    for (const key of Object.keys(exports)) {
      const original = exports[key]
      if (typeof original !== "function" || /^[A-Z]/.test(key)) continue
      exports[key] = function (this: unknown, ...args: unknown[]) {
        calls.push(`${name}.${key}`)
        return original.apply(this, args)
      }
      undo.push(() => (exports[key] = original))
    }
  }
  const realFetch = globalThis.fetch
  globalThis.fetch = (...args) => (calls.push("fetch"), realFetch(...args))
  syncBuiltinESMExports()
  try {
    await work()
  } finally {
    for (const step of undo) step()
    globalThis.fetch = realFetch
    syncBuiltinESMExports()
  }
  return calls
}

t.test("the default builtins are current_time and calculate, and touch no file system, network or shell", async (t) => {
  const results: Record<string, { output: string; isError: boolean }> = {}
  let names: string[] = []
  const calls = await trappingIo(async () => {
    const tk = await createToolkit()
    names = tk.tools().map((tool) => tool.name)
    results.time = await tk.execute("current_time", {})
    results.paris = await tk.execute("current_time", { timeZone: "Europe/Paris" })
    results.badZone = await tk.execute("current_time", { timeZone: "Mars/Olympus" })
    results.sum = await tk.execute("calculate", { expression: "(2+3)*4 - 2^3" })
    results.badSum = await tk.execute("calculate", { expression: "require('fs')" })
  })
  t.same(calls, [], "no file system, network or process call")
  t.same(names.sort(), ["calculate", "current_time"])
  t.equal(results.time.isError, false)
  t.match(JSON.parse(results.time.output).utc, /^\d{4}-\d\d-\d\dT/)
  t.equal(JSON.parse(results.paris.output).timeZone, "Europe/Paris")
  t.equal(results.badZone.isError, true)
  t.same(results.sum, { output: "12", isError: false })
  t.equal(results.badSum.isError, true)

  // The trap sees a tool that does touch the file system, through a named import too.
  const peek: Tool = { name: "peek", description: "", inputSchema: { type: "object" }, execute: () => String(statSync(".").isDirectory()) }
  const seen = await trappingIo(async () => void (await (await createToolkit({ builtins: false, extraTools: [peek] })).execute("peek", {})))
  t.same(seen, ["fs.statSync"], "a tool reading the disk would have been caught")
})

t.test("builtins can be chosen by name", async (t) => {
  const tk = await createToolkit({ builtins: ["calculate"] })
  t.same(tk.tools().map((tool) => tool.name), ["calculate"])
  await t.rejects(createToolkit({ builtins: ["shell"] }), /Unknown builtin tool "shell"; builtins are: current_time, calculate/)
})

t.test("execute checks args against the inputSchema", async (t) => {
  const tk = await createToolkit({ builtins: false, extraTools: [add] })
  t.same(await tk.execute("add", { a: 2, b: 3 }), { output: "5", isError: false })
  const missing = await tk.execute("add", { a: 2 })
  t.equal(missing.isError, true)
  t.match(missing.output, /Invalid arguments for add: args must have required property 'b'/)
  const wrongType = await tk.execute("add", { a: "2", b: 3 })
  t.match(wrongType.output, /args\/a must be number/)
  t.equal((await tk.execute("add", null)).isError, true, "null args are checked like {}")
})

t.test("a throwing tool becomes an error result, not a crash", async (t) => {
  const boom: Tool = { name: "boom", description: "fails", inputSchema: { type: "object" }, execute: async () => { throw new Error("kaput") } }
  const tk = await createToolkit({ builtins: false, extraTools: [boom] })
  t.same(await tk.execute("boom", {}), { output: "Tool boom failed: kaput", isError: true })
})

t.test("an unknown tool is an error result naming the ones there are", async (t) => {
  const tk = await createToolkit({ builtins: false, extraTools: [add] })
  t.same(await tk.execute("sub", {}), { output: 'Unknown tool "sub"; available tools: add', isError: true })
})

t.test("non-string outputs are JSON; the context reaches the tool", async (t) => {
  let seen: AbortSignal | undefined
  const obj: Tool = { name: "obj", description: "", inputSchema: { type: "object" }, execute: (_args, ctx) => ((seen = ctx.signal), { ok: [1, 2] }) }
  const tk = await createToolkit({ builtins: false, extraTools: [obj] })
  const controller = new AbortController()
  t.same(await tk.execute("obj", {}, { signal: controller.signal }), { output: '{"ok":[1,2]}', isError: false })
  t.equal(seen, controller.signal)
})

t.test("toOpenAI and toAnthropic describe every tool", async (t) => {
  const tk = await createToolkit({ builtins: false, extraTools: [add] })
  t.same(tk.toOpenAI(), [{ type: "function", function: { name: "add", description: "Adds two numbers", parameters: add.inputSchema } }])
  t.same(tk.toAnthropic(), [{ name: "add", description: "Adds two numbers", input_schema: add.inputSchema }])
})

t.test("bad tools are refused when the toolkit is built", async (t) => {
  await t.rejects(createToolkit({ builtins: false, extraTools: [add, add] }), /used twice/)
  await t.rejects(createToolkit({ builtins: false, extraTools: [{ ...add, name: "has space" }] }), /needs a name/)
  await t.rejects(createToolkit({ builtins: false, extraTools: [{ ...add, execute: undefined as never }] }), /needs an execute/)
  await t.rejects(createToolkit({ builtins: false, extraTools: [{ ...add, inputSchema: { type: "nonsense" } }] }), /invalid inputSchema/)
  await t.rejects(createToolkit({ builtins: "yes" as never }), /opts.builtins should be/)
})

t.test("the calculator evaluates arithmetic and nothing else", async (t) => {
  const toolkit = await createToolkit({ builtins: ["calculate"] })
  const calculate = (expression: string) => toolkit.execute("calculate", { expression })
  t.same(await calculate("1 + 2 * 3"), { output: "7", isError: false })
  t.same(await calculate("-(2 + 3) % 4"), { output: "-1", isError: false })
  t.same(await calculate("2 ^ 3 ^ 2"), { output: "512", isError: false }, "power is right-associative")
  t.same(await calculate("1.5e2 / .5"), { output: "300", isError: false })
  t.match(await calculate("process.exit()"), { output: /Unexpected "p"/, isError: true })
  t.match(await calculate("(1 + 2"), { output: /Expected \)/, isError: true })
  t.match(await calculate("1 / 0"), { output: /no finite value/, isError: true })
  t.match(await calculate("1 +"), { output: /Unexpected end/, isError: true })
  t.match(await calculate("(".repeat(200) + "1" + ")".repeat(200)), { output: /nested too deeply/, isError: true })
})

/** A ToolSource the test drives: `set` changes its tools and tells the toolkit; `closed` counts close() calls. */
function drivenSource(name: string, first: Tool[]) {
  let tools = first
  let listener: (() => void) | undefined
  const source = {
    name,
    closed: 0,
    tools: () => tools,
    onChange: (l: () => void) => void (listener = l),
    close: async () => void source.closed++,
    set(next: Tool[]) {
      tools = next
      listener?.()
    },
  }
  return source
}

t.test("sources: a source's tools follow its changes; a repeated name after a change is left out, the rest kept", async (t) => {
  const source = drivenSource("remote", [{ ...add, name: "remote_add" }])
  const tk = await createToolkit({ builtins: false, extraTools: [add], sources: [source] })
  t.same(tk.tools().map((tool) => tool.name), ["add", "remote_add"], "the source's tools after the toolkit's own")
  source.set([{ ...add, name: "remote_sub" }, { ...add, name: "remote_mul" }])
  t.same(tk.tools().map((tool) => tool.name), ["add", "remote_sub", "remote_mul"], "listed again on the change")
  t.equal(tk.get("remote_add"), undefined)
  t.match(await tk.execute("remote_add", { a: 1, b: 2 }), { output: /^Unknown tool "remote_add"/, isError: true })
  t.same(await tk.execute("remote_mul", { a: 1, b: 2 }), { output: "3", isError: false })
  source.set([{ ...add }, { ...add, name: "remote_mul" }, { ...add, name: "bad name" }])
  t.same(tk.tools().map((tool) => tool.name), ["add", "remote_mul"], "a name the toolkit already has, and an invalid one, are left out; the toolkit's own add stays")
  t.same(await tk.execute("add", { a: 2, b: 2 }), { output: "4", isError: false })
  await tk.close()
  t.equal(source.closed, 1, "close() closes the source")
  await tk.close()
  t.equal(source.closed, 1, "once")
})

t.test("sources: a createToolkit that fails closes the sources it was handed", async (t) => {
  const clash = drivenSource("clash", [{ ...add }])
  await t.rejects(createToolkit({ builtins: false, extraTools: [add], sources: [clash] }), { message: 'Tool name "add" from clash is used twice; tool names must be unique' })
  t.equal(clash.closed, 1, "a repeated name at the first listing")
  const bystander = drivenSource("bystander", [])
  await t.rejects(createToolkit({ builtins: ["shell"], sources: [bystander] }), /Unknown builtin tool "shell"/)
  t.equal(bystander.closed, 1, "a bad option of the toolkit's own")
  const other = drivenSource("other", [])
  await t.rejects(createToolkit({ sources: [other], mcpServers: { files: { command: "toolnexus-no-such-command" } } }), /mcpServers\.files\.command/)
  t.equal(other.closed, 1, "a source the toolkit opens that fails")
})
