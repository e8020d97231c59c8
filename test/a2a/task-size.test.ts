import t from "tap"
import { jsonBytes, jsonBytesAtMostOf } from "../../lib/a2a/task-size.js"
import { sampleTask } from "../fixtures/helpers.js"

t.test("jsonBytesAtMostOf is never below the JSON's UTF-8 size, and gives up past its limit", async (t) => {
  const values: unknown[] = [
    sampleTask("t-1"),
    { a: [1, -1.2345678901234567e308, true, false, null, "é\u0001\"\\"], b: { c: [[], {}] }, "\u2028": "𝄞" },
    "x".repeat(1000),
    [],
    {},
    0,
  ]
  for (const value of values) {
    const bound = jsonBytesAtMostOf(value, Infinity)
    t.ok(bound >= jsonBytes(value), `${jsonBytes(value)} bytes, bound ${bound}`)
  }
  t.equal(jsonBytesAtMostOf({ text: "x".repeat(1000) }, 100), Infinity, "past the limit: Infinity")
})
