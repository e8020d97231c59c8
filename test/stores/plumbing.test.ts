import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { pathToFileURL } from "node:url"
import t, { type Test } from "tap"
import { errorReporter, type StoreErrorContext } from "../../lib/stores/background-errors.js"
import { loadDriver, type DriverSpec } from "../../lib/stores/driver.js"
import { OpenOnce } from "../../lib/stores/open-once.js"
import { assertTask, assertTaskId, parseStoredTask } from "../../lib/stores/task-checks.js"
import { WriteOrder } from "../../lib/stores/write-order.js"
import { deferred, waitFor } from "../fixtures/helpers.js"

/** The plumbing the four stores share, each piece on its own; test/fixtures/store-contract.ts shows every store uses it alike. */

t.test("WriteOrder runs the writes of one id one at a time, in call order", async (t) => {
  const order = new WriteOrder()
  const events: string[] = []
  const gates = [deferred(), deferred(), deferred()]
  const writes = gates.map((gate, i) =>
    order.run("a", async () => {
      events.push(`start ${i}`)
      await gate.promise
      events.push(`end ${i}`)
      if (i === 1) throw new Error("write 1 fails")
    }),
  )
  t.same(events, ["start 0"], "the first write of an id starts at once, the others wait")
  gates[2].resolve()
  gates[1].resolve()
  await new Promise((resolve) => setImmediate(resolve))
  t.same(events, ["start 0"], "a later write released early still waits its turn")
  gates[0].resolve()
  await writes[0]
  await t.rejects(writes[1], /write 1 fails/)
  await writes[2]
  t.same(events, ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"], "a failed write does not stop the next")
})

t.test("WriteOrder runs writes of different ids side by side, and forgets an id once its writes settle", async (t) => {
  const order = new WriteOrder()
  const held = deferred()
  const started: string[] = []
  const a = order.run("a", async () => {
    started.push("a")
    await held.promise
  })
  const b = order.run("b", async () => void started.push("b"))
  await b
  t.same(started, ["a", "b"], "b did not wait for a")
  let idle = false
  const waiting = order.idle().then(() => (idle = true))
  await new Promise((resolve) => setImmediate(resolve))
  t.notOk(idle, "idle() waits for the write still held")
  held.resolve()
  await a
  await waiting
  await waitFor(() => (order as unknown as { tails: Map<string, unknown> }).tails.size === 0, 1000, "the chains to be dropped")
  await t.rejects(
    order.run("c", () => {
      throw new Error("thrown before any promise")
    }),
    /thrown before any promise/,
    "a write that throws synchronously rejects like one that rejects",
  )
})

t.test("OpenOnce shares one attempt, forgets a failed one, and opens nothing after close", async (t) => {
  let opens = 0
  let fail = true
  const once = new OpenOnce(
    async () => {
      opens++
      await new Promise((resolve) => setImmediate(resolve))
      if (fail) throw new Error(`attempt ${opens} failed`)
      return { n: opens }
    },
    () => new Error("closed"),
  )
  t.equal(once.current, undefined, "nothing is opened before it is asked for")
  const [first, second] = await Promise.allSettled([once.get(), once.get()])
  t.equal(opens, 1, "two callers at once share one attempt")
  t.match([first, second], [{ status: "rejected", reason: { message: "attempt 1 failed" } }, { status: "rejected", reason: { message: "attempt 1 failed" } }])
  t.equal(once.current, undefined, "the failed attempt is forgotten")
  fail = false
  t.same(await once.get(), { n: 2 }, "the next call tries again")
  t.same(await once.get(), { n: 2 }, "and keeps what it opened")
  t.equal(opens, 2)

  const opened = once.current
  once.forget(Promise.resolve({ n: 0 }))
  t.equal(once.current, opened, "forgetting an attempt that is not the current one changes nothing")
  once.forget(opened)
  t.same(await once.get(), { n: 3 }, "a forgotten connection (one that died) is opened anew")

  t.same(await once.close(), { n: 3 }, "close() gives what was open, to be closed")
  t.same(await once.get(), { n: 3 }, "calls already under way still get it")
  once.forget(once.current)
  await t.rejects(once.get(), /closed/, "nothing new is opened after close")
  t.equal(opens, 3)
  t.equal(await new OpenOnce(async () => 1, () => new Error("closed")).close(), undefined, "closing what never opened gives nothing")
})

t.test("errorReporter: the store's onError gets an Error and its context; the default and the fallback are process warnings", async (t) => {
  const seen: Array<{ err: Error; context: StoreErrorContext }> = []
  const report = errorReporter("SomeStore", (err: Error, context: StoreErrorContext) => seen.push({ err, context }))
  report(new Error("boom"), "watch", "task-1")
  report("not an Error", "connection")
  t.match(seen, [
    { err: { message: "boom" }, context: { store: "SomeStore", operation: "watch", taskId: "task-1" } },
    { err: { message: "not an Error" }, context: { store: "SomeStore", operation: "connection" } },
  ])
  t.type(seen[1].err, Error, "whatever was thrown arrives as an Error")
  t.notOk("taskId" in seen[1].context, "no taskId key when there is no Task")

  const warnings: Array<Error & { code?: string }> = []
  const listen = (warning: Error) => warnings.push(warning)
  process.on("warning", listen)
  t.teardown(() => void process.off("warning", listen))
  errorReporter("SomeStore", undefined)(new Error("nobody listens"), "list", "x".repeat(300))
  errorReporter("SomeStore", () => {
    throw new Error("the handler fails")
  })(new Error("still shown"), "watch")
  await waitFor(() => warnings.length >= 2, 5000, "two warnings")
  t.match(warnings, [
    { name: "TaskStoreWarning", code: "TOOLNEXUS_STORE_ERROR", message: /^SomeStore list \(task "x{128}…"\): nobody listens$/ },
    { name: "TaskStoreWarning", code: "TOOLNEXUS_STORE_ERROR", message: "SomeStore watch: still shown" },
  ])

  t.throws(() => errorReporter("SomeStore", "log"), { name: "TypeError", message: "SomeStore: opts.onError should be a function (err, context) => void, got a string" })
  t.throws(() => errorReporter("SomeStore", null), /got null/)
})

t.test("the task checks every store makes", async (t) => {
  t.throws(() => assertTaskId(""), { name: "TypeError", message: 'A Task id must be a non-empty string, got ""' })
  t.throws(() => assertTaskId(7), /got number/)
  t.throws(() => assertTaskId(null), /got null/)
  t.doesNotThrow(() => assertTaskId("x"))
  t.throws(() => assertTask([] as unknown, "S"), /A Task id must be a non-empty string, got undefined/)
  t.throws(() => assertTask("task", "S"), { message: "S.save needs a Task object, got string" })
  t.throws(() => assertTask({ id: "x", status: {} }, "S"), { message: "S.save needs a Task with a status.state string" })
  t.doesNotThrow(() => assertTask({ id: "x", status: { state: "working" } }, "S"))

  t.same(parseStoredTask('{"id":"x","status":{"state":"working"}}', "S", "file at /a"), { id: "x", status: { state: "working" } })
  t.throws(() => parseStoredTask('{"id":', "S", "file at /a"), { message: /^S found a corrupt file at \/a: / })
  t.throws(() => parseStoredTask('{"id":"x"}', "S", "file at /a"), { message: "S found a file at /a that is not a Task" })
  t.throws(() => parseStoredTask("null", "S", "file at /a"), /not a Task/)
})

/** A directory of throwaway modules for the loader to import. */
function moduleDir(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-driver-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

interface FakeDriver {
  connect(): string
}

const spec = (specifier: string): DriverSpec<FakeDriver> => ({
  store: "SomeStore",
  specifier,
  expected: "fake-driver@1",
  uses: "connect()",
  fits: (module: unknown): module is FakeDriver => typeof (module as FakeDriver)?.connect === "function",
})

t.test("loadDriver imports a store's driver, and says what is wrong when it cannot", async (t) => {
  const dir = moduleDir(t)
  const write = (name: string, text: string) => {
    fs.writeFileSync(path.join(dir, name), text)
    return pathToFileURL(path.join(dir, name)).href
  }
  const esm = write("esm.mjs", "export function connect() { return 'esm' }")
  t.equal((await loadDriver(spec(esm))).connect(), "esm", "an ES module with the named export")
  // Built at run time, so Node cannot see the names: they are only on the default export.
  const cjs = write("cjs.cjs", "module.exports = (() => ({ connect: () => 'cjs' }))()")
  t.equal((await loadDriver(spec(cjs))).connect(), "cjs", "a CommonJS module whose exports are only its default")

  await t.rejects(loadDriver(spec("toolnexus-no-such-driver")), {
    message: 'SomeStore needs the "toolnexus-no-such-driver" package: npm install toolnexus-no-such-driver',
  })
  const shapeless = write("shapeless.mjs", "export const nothing = 1")
  await t.rejects(loadDriver(spec(shapeless)), { message: `SomeStore: the "${shapeless}" package has no connect(); it should be fake-driver@1 or work like it` })
  const brokenDependency = write("broken.mjs", "import 'toolnexus-no-such-dependency'\nexport function connect() {}")
  await t.rejects(
    loadDriver(spec(brokenDependency)),
    { message: new RegExp(`^SomeStore could not load the "${brokenDependency}" package: .*toolnexus-no-such-dependency`) },
    "a driver whose own dependency is missing is not mistaken for a missing driver",
  )
  const throwing = write("throwing.mjs", "throw new Error('the driver fails to start')")
  await t.rejects(loadDriver(spec(throwing)), { message: `SomeStore could not load the "${throwing}" package: the driver fails to start` })
})
