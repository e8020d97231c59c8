import net from "node:net"
import t from "tap"
import { A2AMetrics } from "../../lib/observe/metrics.js"
import { listenForMetrics } from "../../lib/observe/metrics-server.js"
import { observedStore, storeKind } from "../../lib/observe/observed-store.js"
import { Telemetry, tracingRegistered } from "../../lib/observe/telemetry.js"
import type { PushStore } from "../../lib/stores/push-store.js"
import { InMemoryTaskStore } from "../../lib/stores/memory/store.js"
import { TaskConflictError, type TaskStore } from "../../lib/stores/task-store.js"
import type { A2ATask } from "../../lib/types.js"
import { RecordingStore, sampleTask } from "../fixtures/helpers.js"
import { recordSpans } from "../fixtures/tracing.js"

/* The observe layer on its own: the store as the server observes it, the metrics' own address, and spans of failures. */

// Asked before the SDK below is registered: with the API alone, nothing is.
const registeredBefore = tracingRegistered()
const exporter = recordSpans(t)

/** The count of a histogram's series in the metrics' text, or undefined when it has none. */
async function countOf(metrics: A2AMetrics, name: string, labels: string): Promise<number | undefined> {
  const line = (await metrics.text()).split("\n").find((l) => l.startsWith(`${name}_count{${labels}}`))
  return line === undefined ? undefined : Number(line.split(" ").at(-1))
}

t.test("an SDK registered is seen; the API alone is not", async (t) => {
  t.equal(registeredBefore, false)
  t.equal(tracingRegistered(), true)
})

t.test("store kinds: the shipped stores and their subclasses by kind, any other store custom", async (t) => {
  t.equal(storeKind(new RecordingStore()), "memory", "a subclass of InMemoryTaskStore")
  t.equal(storeKind({ get: async () => undefined, save: async () => {} }), "custom")
  class HostStore {
    async get(): Promise<A2ATask | undefined> {
      return undefined
    }
    async save(): Promise<void> {}
  }
  t.equal(storeKind(new HostStore()), "custom")
})

t.test("the observed store passes every call through, times each operation and reads capabilities as they are now", async (t) => {
  const calls: string[] = []
  const task = sampleTask("t-1", "completed")
  let push: PushStore | undefined
  const pushOf = (name: string): PushStore =>
    ({
      putConfig: async () => void calls.push(`${name}.putConfig`),
      saveWithEvent: async () => {
        calls.push(`${name}.saveWithEvent`)
        return 1
      },
      claim: async function (this: unknown) {
        calls.push(`${name}.claim on itself: ${this === push}`)
        return []
      },
    }) as unknown as PushStore
  const store: TaskStore = {
    get: async (id) => (calls.push(`get ${id}`), id === task.id ? task : undefined),
    getText: async (id) => (calls.push(`getText ${id}`), JSON.stringify(task)),
    save: async (saved) => {
      calls.push(`save ${saved.id}`)
      if (saved.id === "conflict") throw new TaskConflictError(saved.id, task)
    },
    list: async () => (calls.push("list"), { tasks: [task], nextPageToken: "", pageSize: 1, totalSize: 1 }),
    delete: (id) => {
      if (id === "sync-throw") throw new Error("the store threw before giving a promise")
      calls.push(`delete ${id}`)
      return Promise.resolve()
    },
    open: async () => void calls.push("open"),
    close: async () => void calls.push("close"),
    watch: async () => (calls.push("watch"), async () => {}),
    get push() {
      return push
    },
  }
  const metrics = new A2AMetrics()
  const observed = observedStore(store, new Telemetry(metrics))

  t.same(await observed.get("t-1"), task)
  t.equal(await observed.getText!("t-1"), JSON.stringify(task))
  await observed.save(task)
  await t.rejects(observed.save({ ...task, id: "conflict" }), TaskConflictError)
  t.equal((await observed.list!({ pageSize: 1 })).tasks.length, 1)
  await observed.delete!("t-1")
  t.throws(() => observed.delete!("sync-throw"), /threw before giving a promise/)
  await observed.open!()
  await observed.close!()
  await observed.watch!(() => {})
  t.same(calls, ["get t-1", "getText t-1", "save t-1", "save conflict", "list", "delete t-1", "open", "close", "watch"])

  const labels = (operation: string, outcome: string) => `store="custom",operation="${operation}",outcome="${outcome}"`
  const duration = "toolnexus_store_operation_duration_seconds"
  t.equal(await countOf(metrics, duration, labels("get", "ok")), 2, "get and getText, both reads")
  t.equal(await countOf(metrics, duration, labels("save", "ok")), 1)
  t.equal(await countOf(metrics, duration, labels("save", "conflict")), 1, "a lost race is a conflict, not an error")
  t.equal(await countOf(metrics, duration, labels("list", "ok")), 1)
  t.equal(await countOf(metrics, duration, labels("delete", "ok")), 1)
  t.equal(await countOf(metrics, duration, labels("delete", "error")), 1, "a store throwing at once is an error too")

  const spans = exporter.getFinishedSpans()
  const conflict = spans.find((span) => span.name === "save task_store" && span.attributes["error.type"] === "conflict")
  t.ok(conflict, "the conflict's span says so")
  t.equal(conflict!.status.code, 0, "and is not marked an error")
  const thrown = spans.find((span) => span.name === "delete task_store" && span.attributes["error.type"] === "error")
  t.equal(thrown?.status.code, 2, "a store's failure marks its span an error")

  t.equal(observed.push, undefined, "no push capability yet")
  push = pushOf("first")
  const first = observed.push!
  t.equal(observed.push, first, "the same observed capability while the store's is the same")
  await first.saveWithEvent(task)
  await first.claim("me", 1, 1000, Date.now())
  await first.putConfig({} as never)
  push = pushOf("second")
  t.not(observed.push, first, "a new one once the store's changed")
  await observed.push!.saveWithEvent(task)
  t.same(calls.slice(9), ["first.saveWithEvent", "first.claim on itself: true", "first.putConfig", "second.saveWithEvent"])
  t.equal(await countOf(metrics, duration, labels("save", "ok")), 3, "a save with its notifications is a save")
})

t.test("a push save gives its notifications its span's trace context; a delivery of one is that span's child, of one without it a new trace", async (t) => {
  exporter.reset()
  const telemetry = new Telemetry()
  const observed = observedStore(new InMemoryTaskStore(), telemetry)
  const task = sampleTask("t-1", "working")
  await observed.save(task)
  await observed.push!.putConfig({ taskId: "t-1", id: "a", version: "1.0", url: "http://127.0.0.1:9/hook", createdAt: new Date().toISOString() })
  await observed.push!.saveWithEvent(task, { kind: "status", task })
  const save = exporter.getFinishedSpans().findLast((span) => span.name === "save task_store")!
  const [claim] = await observed.push!.claim("i-1", 10, 60_000, Date.now())
  t.same(claim.item.traceContext, { traceparent: `00-${save.spanContext().traceId}-${save.spanContext().spanId}-01` }, "the save span's traceparent")

  telemetry.pushDelivery(claim.config.url, "t-1", claim.item.traceContext).end("delivered")
  telemetry.pushDelivery(claim.config.url, "t-1", { traceparent: "not one" }).end("delivered")
  telemetry.pushDelivery(claim.config.url, "t-1").end("delivered")
  const [continued, unparsed, fresh] = exporter.getFinishedSpans().filter((span) => span.name === "POST")
  t.equal(continued.spanContext().traceId, save.spanContext().traceId, "the delivery is in the save's trace")
  t.equal(continued.parentSpanContext?.spanId, save.spanContext().spanId, "the save's child")
  for (const span of [unparsed, fresh]) {
    t.equal(span.parentSpanContext, undefined, "a root span")
    t.not(span.spanContext().traceId, save.spanContext().traceId, "of a trace of its own")
  }
})

t.test("the spans of failures: a model call that failed, a tool that threw, a push to a URL that is none", async (t) => {
  exporter.reset()
  const telemetry = new Telemetry()
  const call = telemetry.modelCall("m", "openai")
  call.end(undefined, new TypeError("the endpoint went away"))
  const tool = telemetry.toolCall("add", "c1", true)
  await t.rejects(
    tool.within(async () => {
      throw new RangeError("boom")
    }),
  )
  tool.end(true, new RangeError("boom"))
  const push = telemetry.pushDelivery("not a url", "t-1")
  push.end("final", "the webhook URL is refused")
  const invented = telemetry.toolCall(`made-up-${"x".repeat(5000)}`, "c2", false)
  invented.end(true)
  const [model, toolSpan, post, inventedSpan] = exporter.getFinishedSpans()
  t.equal(inventedSpan.name, "execute_tool unknown", "a name the model invented stays out of the span's name")
  t.equal(inventedSpan.attributes["gen_ai.tool.name"], `made-up-${"x".repeat(120)}…`, "and is cut short in its attribute")
  t.equal(inventedSpan.attributes["error.type"], "tool_error")
  t.match(model, { name: "chat m", attributes: { "error.type": "TypeError" }, status: { code: 2, message: "the endpoint went away" } })
  t.match(toolSpan, { name: "execute_tool add", attributes: { "error.type": "RangeError" }, status: { code: 2 } })
  t.match(post, { name: "POST", attributes: { "toolnexus.push.outcome": "final", "error.type": "push_final" }, status: { code: 2 } })
  t.notOk("server.address" in post.attributes, "no address from a URL that is none")
})

t.test("metrics on their own address: HEAD, a failing collection answered 500, and a taken port refused naming it", async (t) => {
  const metrics = new A2AMetrics()
  metrics.watch({ oldestPendingPush: async () => Promise.reject(new Error("the outbox could not be read")) })
  const listener = await listenForMetrics(metrics, "127.0.0.1:0")
  t.teardown(() => listener.close())
  const url = `http://${listener.address}/metrics`
  const failed = await fetch(url)
  t.equal(failed.status, 500)
  t.match(await failed.text(), /Metrics could not be collected: the outbox could not be read/)

  const healthy = await listenForMetrics(new A2AMetrics(), "127.0.0.1:0")
  t.teardown(() => healthy.close())
  const head = await fetch(`http://${healthy.address}/metrics`, { method: "HEAD" })
  t.equal(head.status, 200)
  t.equal(await head.text(), "")
  t.equal((await fetch(`http://${healthy.address}/metrics`, { method: "POST" })).status, 404)

  const taken = net.createServer()
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
  t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())))
  const port = (taken.address() as net.AddressInfo).port
  await t.rejects(listenForMetrics(new A2AMetrics(), `127.0.0.1:${port}`), { message: new RegExp(`^toolnexus: metrics could not listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`) })
  await t.rejects(listenForMetrics(new A2AMetrics(), "no-port"), { message: /the metrics address "no-port" should be "host:port"/ })
})
