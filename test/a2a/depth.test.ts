import t from "tap"
import { createLocalClient } from "../../lib/client/client.js"
import { bodyTooDeep, firstTooDeep, MAX_DEPTH } from "../../lib/a2a/depth.js"
import { a2aApp, injectRpc } from "../fixtures/helpers.js"

const arrays = (depth: number, inner = "") => "[".repeat(depth) + inner + "]".repeat(depth)

t.test("the scanner counts brackets outside strings and stops at the first one past the limit", async (t) => {
  t.equal(firstTooDeep(arrays(64), 64), -1, "exactly 64 levels pass")
  t.equal(firstTooDeep(arrays(65), 64), 64, "65 levels: refused at the 65th bracket")
  t.equal(firstTooDeep('{"a":'.repeat(64) + "0" + "}".repeat(64), 64), -1, "64 levels of objects pass")
  const siblings = "[".repeat(32) + "{}".repeat(10) + '{"a":'
  t.equal(firstTooDeep(siblings + arrays(32) + "}" + "]".repeat(32), 64), siblings.length + 31, "siblings close their level; objects and arrays both count")
  // Brackets inside strings, escaped quotes and escaped backslashes do not count.
  const brackets = JSON.stringify("[[[[{{{{" + '"[[[{' + "\\" + "[[[" + "\\\"{{{")
  t.equal(firstTooDeep(arrays(64, brackets), 64), -1, `brackets in a string such as ${brackets} do not count`)
  const backslash = arrays(63, `[${JSON.stringify("\\")}, [1]]`)
  t.equal(firstTooDeep(backslash, 64), backslash.indexOf("[1]"), "a string ending in an escaped backslash closes: the bracket after it counts")
  const quoteInKey = arrays(63, `{"k\\"[[": [1]}`)
  t.equal(firstTooDeep(quoteInKey, 64), quoteInKey.indexOf("[1]"), "an escaped quote in a key does not end it")
  const oddRun = arrays(63, `[${JSON.stringify('a\\"[[')}, [1]]`) // a backslash escaped, then an escaped quote: the string goes on
  t.equal(firstTooDeep(oddRun, 64), oddRun.indexOf("[1]"), `the string ${JSON.stringify('a\\"[[')} ends only at its last quote`)
  t.equal(firstTooDeep('["' + "[".repeat(100), 64), -1, "an unterminated string hides nothing: JSON.parse refuses it later")
  // The scan stops where the limit is passed: what follows is never read, valid or not.
  t.equal(firstTooDeep("[".repeat(65) + "\u0000 not json at all", 64), 64, "stops at the bracket past the limit")
})

t.test("bodyTooDeep: the envelope is one level more than params, the -32602 names params", async (t) => {
  const body = (levels: number) => `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":${"{\"a\":".repeat(levels) + "0" + "}".repeat(levels)}}`
  t.equal(bodyTooDeep(body(MAX_DEPTH)), undefined, "params 64 levels deep pass")
  t.match(bodyTooDeep(body(MAX_DEPTH + 1))?.toJSON(), { code: -32602, message: "Invalid params: params nests deeper than 64 levels", data: { field: "params" } }, "65 levels: -32602")
})

t.test("the plugin refuses excess depth without calling JSON.parse on the body", async (t) => {
  const app = await a2aApp(t, { client: createLocalClient(() => "ok") })
  const parsedBodies: string[] = []
  const parse = JSON.parse
  // Records which request bodies reach JSON.parse; everything else is parsed as usual.
  JSON.parse = function (this: unknown, text: string, reviver?: Parameters<typeof parse>[1]) {
    if (typeof text === "string" && text.includes('"method":"GetTask"')) parsedBodies.push(text)
    return parse.call(JSON, text, reviver)
  } as typeof JSON.parse
  t.teardown(() => {
    JSON.parse = parse
  })
  const getTask = (metadata: string) => `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"missing","metadata":${metadata}}}`

  // About 1 MiB of nested arrays, just under the default body limit.
  const huge = getTask(arrays(520_000))
  t.ok(huge.length > 1_000_000 && huge.length < 1024 * 1024, `the body is ${huge.length} bytes`)
  const refused = await injectRpc(app, huge)
  t.equal(refused.statusCode, 200, "HTTP 200")
  t.match(parse(refused.body), { jsonrpc: "2.0", id: null, error: { code: -32602, message: "Invalid params: params nests deeper than 64 levels" } }, "-32602")
  t.notOk(parsedBodies.includes(huge), "JSON.parse never saw the 1 MiB body")

  const objects = (depth: number) => '{"a":'.repeat(depth) + "0" + "}".repeat(depth)
  // The boundary through the plugin: params plus 63 nested levels is 64 and passes the depth checks; one more is refused.
  const deepest = getTask(objects(MAX_DEPTH - 1))
  const passed = parse((await injectRpc(app, deepest)).body)
  t.equal(passed.error?.code, -32001, `${passed.error?.message}: ` +  "64 levels of params: past the depth checks, the Task is not found")
  t.ok(parsedBodies.includes(deepest), "and that body was parsed")
  const oneMore = getTask(objects(MAX_DEPTH))
  t.match(parse((await injectRpc(app, oneMore)).body), { error: { code: -32602, message: /nests deeper than 64 levels/ } }, "65 levels: -32602")
  t.notOk(parsedBodies.includes(oneMore), "refused before parsing")

  // Brackets inside strings are text, not depth.
  const inText = getTask(JSON.stringify({ note: "[".repeat(10_000) }))
  t.equal(parse((await injectRpc(app, inText)).body).error?.code, -32001, "10k brackets inside a string are not nesting")
})
