import t from "tap"
import { idFromFileName, taskFileName } from "../../../lib/stores/file/names.js"

t.test("plain lowercase ids keep their own name", async (t) => {
  t.equal(taskFileName("abc-123"), "abc-123.json")
  t.equal(taskFileName("0b9c_x"), "0b9c_x.json")
  t.equal(taskFileName("6f1c2a7e-1d2b-4c1e-9f3a-2b7c9d0e1f2a"), "6f1c2a7e-1d2b-4c1e-9f3a-2b7c9d0e1f2a.json")
})

t.test("other ids get distinct names that survive a case-insensitive file system", async (t) => {
  const ids = ["a/b", "a_b", "a.b", "a b", "Abc", "abc", "ABC", "aBc", "../x", "/abs", "~x", "x~", "é", "e\u0301", "", "a\\b", "CON"]
  const names = ids.map(taskFileName)
  const folded = new Set(names.map((n) => n.toLowerCase()))
  t.equal(folded.size, ids.length, "no two ids share a name, even folded to lowercase")
  for (const name of names) {
    t.notMatch(name, /[/\\\0]/, `${name} has no path separator`)
    t.not(name.startsWith("."), true, `${name} is not hidden or relative`)
  }
})

t.test("names map back to their ids", async (t) => {
  for (const id of ["abc-123", "a/b", "Abc", "✓ done", "x".repeat(150)]) {
    t.equal(idFromFileName(taskFileName(id)), id, JSON.stringify(id).slice(0, 30))
  }
  t.equal(idFromFileName("notes.txt"), undefined, "foreign files are not tasks")
  t.equal(idFromFileName("~UPPER.json"), undefined, "a name outside the alphabet is not a task")
})

t.test("over-long ids are hashed under the 255-byte limit", async (t) => {
  const long = "Z".repeat(10_000)
  const name = taskFileName(long)
  t.ok(Buffer.byteLength(name) <= 255)
  t.match(name, /^~~[0-9a-f]{64}\.json$/)
  t.not(taskFileName(long + "!"), name)
  t.equal(idFromFileName(name), undefined, "a hashed name is resolved by reading the file")
  t.ok(Buffer.byteLength(taskFileName("Z".repeat(150))) <= 255, "the longest encoded names fit too")
})
