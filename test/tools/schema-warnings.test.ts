import t from "tap"
import { toolInputSchema } from "../../lib/tools/mcp/schema.js"
import { createToolkit, type Tool } from "../../lib/tools/toolkit.js"
import { memoryLogger } from "../fixtures/helpers.js"

/*
 * Ajv warns about what it does not check (an unknown format such as "uri", which MCP servers' schemas
 * use). The warning must go through the toolkit's logger, never to the console: a server logging one
 * JSON object per line must not get a stray line on stderr.
 */

const uriTool: Tool = {
  name: "fetch_page",
  description: "Fetches a page.",
  inputSchema: { type: "object", properties: { url: { type: "string", format: "uri" } }, required: ["url"] },
  execute: ({ url }) => `fetched ${String(url)}`,
}

/** Runs `work` with console and stderr writes caught; resolves to what they would have printed. */
async function consoleDuring(work: () => Promise<void>): Promise<string[]> {
  const printed: string[] = []
  const saved = { ...console }
  const stderr = Object.getOwnPropertyDescriptor(process.stderr, "write")
  const catcher = (...words: unknown[]) => void printed.push(words.map(String).join(" "))
  console.log = console.warn = console.error = catcher
  Object.defineProperty(process.stderr, "write", { value: (chunk: unknown) => (printed.push(String(chunk)), true), configurable: true, writable: true })
  try {
    await work()
  } finally {
    Object.assign(console, saved)
    if (stderr) Object.defineProperty(process.stderr, "write", stderr)
    else delete (process.stderr as { write?: unknown }).write
  }
  return printed
}

t.test("an unknown format's warning goes to the toolkit's logger, not the console", async (t) => {
  const logger = memoryLogger()
  const printed = await consoleDuring(async () => {
    const toolkit = await createToolkit({ builtins: false, extraTools: [uriTool], logger })
    const result = await toolkit.execute("fetch_page", { url: "https://example.com/" })
    t.equal(result.output, "fetched https://example.com/", "the tool still runs, the format left unchecked")
    await toolkit.close()
  })
  t.same(printed, [], "nothing printed")
  t.match(logger.lines, [{ level: "warn", source: "tool input schema", msg: /unknown format "uri" ignored/ }], "the warning is one log line")
})

t.test("without a logger, and in the MCP schema check, the warning is dropped", async (t) => {
  const printed = await consoleDuring(async () => {
    const toolkit = await createToolkit({ builtins: false, extraTools: [{ ...uriTool, inputSchema: { ...uriTool.inputSchema } }] })
    await toolkit.execute("fetch_page", { url: "x" })
    await toolkit.close()
    t.same(toolInputSchema({ type: "object", properties: { when: { type: "string", format: "date-time" } } }).note, undefined, "the MCP check takes the schema")
  })
  t.same(printed, [], "nothing printed")
})
