import t from "tap"
import { AgingMap } from "../../lib/aging-map.js"

t.test("the oldest entry is the least recently set", async (t) => {
  const map = new AgingMap<string, number>()
  t.equal(map.oldest(), undefined, "empty")
  map.set("a", 1)
  map.set("b", 2)
  map.set("c", 3)
  t.same(map.oldest(), { key: "a", value: 1 })
  map.set("a", 4)
  t.same(map.oldest(), { key: "b", value: 2 }, "setting a key again makes it the newest")
  map.delete("b")
  t.same(map.shift(), { key: "c", value: 3 }, "a deleted entry is skipped")
  t.same(map.shift(), { key: "a", value: 4 })
  t.equal(map.shift(), undefined, "and then it is empty")
  t.equal(map.size, 0)
  map.set("d", 5)
  t.same(map.oldest(), { key: "d", value: 5 }, "entries set after it ran empty are found")
  t.equal(map.get("d"), 5)
  t.equal(map.get("a"), undefined)
})

t.test("agrees with a plain Map's insertion order over many random operations", async (t) => {
  const map = new AgingMap<number, number>()
  const model = new Map<number, number>()
  let seed = 42
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31
    return seed % n
  }
  let disagreements = 0
  for (let i = 0; i < 20_000; i++) {
    const key = random(500)
    const op = random(10)
    if (op < 5) {
      map.set(key, i)
      model.delete(key)
      model.set(key, i)
    } else if (op < 7) {
      map.delete(key)
      model.delete(key)
    } else {
      const expected = model.entries().next().value
      const got = op < 9 ? map.oldest() : map.shift()
      if (op === 9 && expected) model.delete(expected[0])
      if ((got === undefined) !== (expected === undefined) || (got && (got.key !== expected![0] || got.value !== expected![1]))) disagreements++
    }
    if (map.size !== model.size) disagreements++
  }
  t.equal(disagreements, 0, "same oldest entry and size after every step")
})
