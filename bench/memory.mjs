// Child (run with --expose-gc): heap held by 100k completed Tasks in each in-memory store.
// argv: <count>
import { InMemoryTaskStore } from "../dist/index.js"
import { InMemoryTaskStore as SdkInMemoryTaskStore, UnauthenticatedUser, defaultServerCallContextBuilder } from "@a2a-js/sdk/server"
import { TaskState, Role } from "@a2a-js/sdk"
import { errorText } from "./child.mjs"
import { completedTask } from "./fixtures.mjs"

/** @typedef {import("../dist/lib/stores/index.js").A2ATask} A2ATask */
/** @typedef {import("../dist/lib/stores/index.js").A2APart} A2APart */

const count = Number(process.argv[2] ?? 100_000)

function settledHeap() {
  for (let i = 0; i < 4; i++) globalThis.gc?.()
  return process.memoryUsage().heapUsed
}

/**
 * Heap growth from saving `count` Tasks made by `make(i)` into `store`; the store is kept alive until measured.
 * `held(store)`, where given, says how many Tasks the store kept: fewer than `count` is a measurement of fewer Tasks.
 * @template S, T
 * @param {S} store
 * @param {(i: number) => T} make
 * @param {(store: S, task: T) => Promise<void> | void} save
 * @param {(store: S) => number} [held]
 */
async function heapPerTasks(store, make, save, held) {
  const before = settledHeap()
  for (let i = 0; i < count; i++) await save(store, make(i))
  const after = settledHeap()
  const kept = held?.(store)
  if (kept !== undefined && kept !== count) throw new Error(`the store holds ${kept} tasks, not ${count}`)
  return after - before
}

/**
 * The SDK's form of the same Task (its store keeps its own protobuf-like objects).
 * @param {A2ATask} task
 * @returns {import("@a2a-js/sdk").Task}
 */
function sdkTask(task) {
  /** @param {A2APart} p */
  const text = (p) => (p.kind === "text" ? p.text : "")
  /**
   * @param {string} text
   * @returns {import("@a2a-js/sdk").Part}
   */
  const part = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" })
  /** @param {import("../dist/lib/stores/index.js").A2AMessage} m */
  const message = (m) => ({ messageId: m.messageId, contextId: m.contextId ?? "", taskId: m.taskId ?? "", role: m.role === "user" ? Role.ROLE_USER : Role.ROLE_AGENT, parts: m.parts.map((p) => part(text(p))), metadata: undefined, extensions: [], referenceTaskIds: [] })
  return {
    id: task.id,
    contextId: task.contextId ?? "",
    status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: task.status.timestamp ?? "" },
    history: (task.history ?? []).map(message),
    artifacts: (task.artifacts ?? []).map((a) => ({ artifactId: a.artifactId ?? "", name: a.name ?? "", description: "", parts: a.parts.map((p) => part(text(p))), metadata: undefined, extensions: [] })),
    metadata: undefined,
  }
}

try {
  if (typeof globalThis.gc !== "function") throw new Error("run with --expose-gc")
  const sample = completedTask()
  // Every Task here has one owner (none authenticated), and an owner may by default hold half of maxTasks and of
  // maxBytes: raise the owner's bounds to the whole, or the store drops the oldest half and the figure is for 50k.
  const bytesBound = count * 16 * 1024
  const ours = new InMemoryTaskStore({ maxTasks: count, maxTasksPerOwner: count, maxBytes: bytesBound, maxBytesPerOwner: bytesBound })
  const oursBytes = await heapPerTasks(ours, () => completedTask(), (store, task) => store.save(task), (store) => store.usage.tasks)
  const oursKept = ours.usage.tasks
  // Let it go before measuring the next store.
  await ours.delete(sample.id)
  const sdk = new SdkInMemoryTaskStore()
  // What the SDK's handler passes for a request without authentication.
  const context = defaultServerCallContextBuilder({ user: new UnauthenticatedUser(), extensions: undefined, headers: {} })
  const sdkBytes = await heapPerTasks(sdk, () => sdkTask(completedTask()), (store, task) => store.save(task, context))
  // What-if: each Task kept as its JSON text (a get would JSON.parse it: a copy, like structuredClone gives).
  /** @type {Map<string, string>} */
  const texts = new Map()
  const textBytes = await heapPerTasks(texts, () => completedTask(), (map, task) => void map.set(task.id, JSON.stringify(task)), (map) => map.size)
  process.send?.({
    ready: true,
    textBytes,
    count,
    oursKept,
    oursBytes,
    sdkBytes,
    taskJsonBytes: Buffer.byteLength(JSON.stringify(sample)),
  })
} catch (err) {
  process.send?.({ error: errorText(err) })
}
