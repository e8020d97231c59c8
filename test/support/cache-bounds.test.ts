import { execFile } from "node:child_process"
import path from "node:path"
import { promisify } from "node:util"
import t from "tap"
import { RenderedTasks } from "../../lib/a2a/rendered.js"
import { BoundedCache } from "../../lib/bounded-cache.js"
import { textHeapBytes } from "../../lib/heap-budget.js"
import { FileTaskStore } from "../../lib/stores/file/store.js"
import { recordingFs, ROOT, sampleTask, tmpDir } from "../fixtures/helpers.js"

const MIB = 1024 * 1024
const run = promisify(execFile)

/** A Task's JSON with about `chars` characters of text. */
const bigText = (id: string, chars: number) =>
  JSON.stringify(sampleTask(id, "completed", { history: [{ kind: "message", messageId: `m-${id}`, role: "user", parts: [{ kind: "text", text: "x".repeat(chars) }] }] }))

t.test("BoundedCache: bounded in entries and in bytes; a value over the whole budget is not kept", async (t) => {
  const cache = new BoundedCache<string, string>({ maxEntries: 3, maxBytes: 100 }, (value) => value.length)
  t.ok(cache.set("a", "a".repeat(30)))
  t.ok(cache.set("b", "b".repeat(30)))
  t.ok(cache.set("c", "c".repeat(30)))
  t.same([cache.size, cache.bytes], [3, 90])
  cache.set("d", "d".repeat(5))
  t.same([cache.size, cache.bytes, cache.get("a")], [3, 65, undefined], "past the entry bound, the least recently set went")
  cache.set("e", "e".repeat(80))
  t.same([cache.size, cache.bytes, cache.get("b"), cache.get("c")], [2, 85, undefined, undefined], "past the byte bound, as many as needed went")
  t.notOk(cache.set("d", "d".repeat(101)), "a value over the whole budget is refused")
  t.same([cache.get("d"), cache.size, cache.bytes], [undefined, 1, 80], "and the key's older value is gone too")
  cache.set("e", "e")
  t.same(cache.bytes, 1, "a key set again is weighed anew")
  cache.delete("e")
  cache.delete("missing")
  t.same([cache.size, cache.bytes], [0, 0])
})

t.test("RenderedTasks stays within its byte budget with big Tasks, and renders one over it every time", async (t) => {
  const rendered = new RenderedTasks({ maxBytes: MIB })
  const render = (task: { id: string }) => ({ id: task.id })
  for (let i = 0; i < 50; i++) rendered.answer(`t-${i}`, bigText(`t-${i}`, 100_000), "1.0", render)
  t.ok(rendered.bytes <= MIB, `${rendered.bytes} bytes held, within 1 MiB`)
  t.ok(rendered.bytes > MIB / 2, "and the budget is used")

  let renders = 0
  const counting = (task: { id: string }) => (renders++, { id: task.id })
  const huge = bigText("huge", MIB)
  t.same(JSON.parse(rendered.answer("huge", huge, "1.0", counting).json), { id: "huge" })
  rendered.answer("huge", huge, "1.0", counting)
  t.equal(renders, 2, "a Task over the budget is not cached: each read renders it")
  t.ok(rendered.bytes <= MIB)

  const small = bigText("small", 10)
  rendered.answer("small", small, "1.0", counting)
  rendered.answer("small", small, "1.0", counting)
  t.equal(renders, 3, "a small one is cached as before")
  t.ok(rendered.bytes >= textHeapBytes(small), "and counted")
})

t.test("the file store's read cache stays within readCacheBytes; a file over it is read every time", async (t) => {
  const dir = tmpDir(t)
  const writer = new FileTaskStore(dir)
  for (let i = 0; i < 30; i++) await writer.save(JSON.parse(bigText(`t-${i}`, 100_000)))
  await writer.save(JSON.parse(bigText("huge", 2 * MIB)))
  const calls: string[] = []
  const store = new FileTaskStore(dir, { readCacheBytes: MIB, fs: recordingFs(dir, calls) })
  const cache = (store as unknown as { readCache: BoundedCache<string, unknown> }).readCache
  for (let i = 0; i < 30; i++) t.ok(await store.getText(`t-${i}`))
  t.ok(cache.bytes <= MIB, `${cache.bytes} bytes held, within 1 MiB`)
  t.ok(cache.size >= 3 && cache.size < 30, `the newest ${cache.size} files are kept`)
  const reads = () => calls.filter((call) => call.startsWith("readFile")).length
  const before = reads()
  await store.getText("t-29")
  t.equal(reads(), before, "a cached file is not read again")
  await store.getText("huge")
  await store.getText("huge")
  t.equal(reads(), before + 2, "a file over the budget is read every time")
  t.equal((await store.get("huge"))?.id, "huge")
  t.ok(cache.bytes <= MIB)
  t.throws(() => new FileTaskStore(dir, { readCacheBytes: -1 }), /options\.readCacheBytes should be a whole number of bytes/)
  const uncached = new FileTaskStore(dir, { readCacheBytes: 0 })
  t.equal((await uncached.get("t-0"))?.id, "t-0", "0 turns the read cache off")
})

t.test("measured in a child's heap: each bounded structure fed 40 Tasks of 1 MiB holds about its 8 MiB budget", async (t) => {
  const budget = 8 * MIB
  const fixture = path.join(ROOT, "test", "fixtures", "heap-bounds.mjs")
  for (const which of ["memory", "file-read", "rendered"]) {
    // A small heap: a structure that ignored its budget would end the child (and fail here), never this process.
    const { stdout } = await run(process.execPath, ["--expose-gc", "--max-old-space-size=160", fixture, which, String(budget), "40", tmpDir(t)], { cwd: ROOT })
    const measured = JSON.parse(stdout) as { heapGrowth: number; accounted: number; kept: number }
    t.ok(measured.accounted <= budget, `${which}: ${measured.accounted} bytes accounted, within the budget`)
    // 2 MiB of slack for what a gc leaves and the structures' own objects.
    t.ok(measured.heapGrowth <= budget + 2 * MIB, `${which}: the heap grew by ${(measured.heapGrowth / MIB).toFixed(1)} MiB, within the budget`)
    t.ok(measured.kept >= 1, `${which}: ${measured.kept} Tasks kept`)
  }
})
