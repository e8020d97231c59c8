import t from "tap"
import { RenderedTasks } from "../../lib/a2a/rendered.js"
import { withInternals } from "../../lib/internals.js"
import type { A2ATask } from "../../lib/types.js"
import { sampleTask } from "../fixtures/helpers.js"

/** A render function that counts its calls and answers the state and key it was asked for. */
function counting() {
  const calls: string[] = []
  const render = (key: string) => (task: A2ATask) => {
    calls.push(`${task.id} ${key}`)
    return { state: task.status.state, key }
  }
  return { calls, render }
}

t.test("one rendering per text and key; a new text renders again", async (t) => {
  const rendered = new RenderedTasks()
  const { calls, render } = counting()
  const text = JSON.stringify(sampleTask("a", "working"))
  t.same(JSON.parse(rendered.answer("a", text, "1.0", render("1.0")).json), { state: "working", key: "1.0" })
  rendered.answer("a", text, "1.0", render("1.0"))
  rendered.answer("a", String(text.split("").join("")), "1.0", render("1.0")) // equal text, another string
  t.same(calls, ["a 1.0"], "the same text is not rendered twice")
  rendered.answer("a", text, "0.3", render("0.3"))
  t.same(calls, ["a 1.0", "a 0.3"], "another key renders once more")
  const changed = JSON.stringify(sampleTask("a", "completed"))
  t.same(JSON.parse(rendered.answer("a", changed, "1.0", render("1.0")).json).state, "completed", "a changed text is rendered anew")
  rendered.forget("a")
  rendered.answer("a", changed, "1.0", render("1.0"))
  t.equal(calls.length, 4, "after forget, the task is rendered again")
})

t.test("the owner comes from the stored internals", async (t) => {
  const rendered = new RenderedTasks()
  const { render } = counting()
  t.equal(rendered.answer("a", JSON.stringify(withInternals(sampleTask("a"), { principal: "alice" })), "k", render("k")).owner, "alice")
  t.equal(rendered.answer("b", JSON.stringify(sampleTask("b")), "k", render("k")).owner, undefined)
})

t.test("bounded: the oldest tasks and the oldest renderings of a task make room", async (t) => {
  const rendered = new RenderedTasks({ maxEntries: 2 })
  const { calls, render } = counting()
  const text = (id: string) => JSON.stringify(sampleTask(id))
  for (const id of ["a", "b", "c"]) rendered.answer(id, text(id), "k", render("k"))
  rendered.answer("c", text("c"), "k", render("k"))
  t.equal(calls.length, 3, "the newest is still held")
  rendered.answer("a", text("a"), "k", render("k"))
  t.equal(calls.length, 4, "the oldest was dropped")

  calls.length = 0
  const many = ["k0", "k1", "k2", "k3", "k4"]
  for (const key of many) rendered.answer("a", text("a"), key, render(key))
  rendered.answer("a", text("a"), "k4", render("k4"))
  t.equal(calls.length, 5, "the newest keys are held")
  rendered.answer("a", text("a"), "k0", render("k0"))
  t.equal(calls.length, 6, "past a few keys per task, the oldest key was dropped")
})
