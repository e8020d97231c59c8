// Child: push notifications delivered to a local receiver (a plain node http server in this process, answering
// 200 at once), ours with the durable outbox (the memory store; the file store when it has the push capability)
// against the SDK's DefaultPushNotificationSender (fire-and-forget, one attempt, no outbox) on the same receiver.
// Rate: TASKS Tasks with one webhook each, EVENTS state changes each, saved as fast as the store takes them; the
// clock stops when the receiver has every notification. Latency: one state change at a time, from the call that
// saves it to the receiver's request, on the memory store. CPU: the child's (process and kernel, receiver included, the
// same for every side) per notification, over the same clock.
// argv: <dir> <tasks> <events> <latency samples> <rounds>
import fsp from "node:fs/promises"
import http from "node:http"
import path from "node:path"
import { StreamResponse } from "@a2a-js/sdk"
import { DefaultPushNotificationSender, InMemoryPushNotificationStore, ServerCallContext } from "@a2a-js/sdk/server"
import { FileTaskStore, InMemoryTaskStore } from "../dist/index.js"
import { transitionSaver } from "../dist/lib/a2a/transitions.js"
import { allowList } from "../dist/lib/push/guard.js"
import { PushSender } from "../dist/lib/push/sender.js"
import { errorText, portOf } from "./child.mjs"
import { median } from "./stats.mjs"

/** @typedef {import("../dist/lib/stores/index.js").TaskState} TaskState */
/** @typedef {{ perSecond: number, cpu: number }} RateRow */

const [dir, tasksArg = "500", eventsArg = "4", samplesArg = "500", roundsArg = "3"] = process.argv.slice(2)
const TASKS = Number(tasksArg)
const EVENTS = Number(eventsArg)
const SAMPLES = Number(samplesArg)
const ROUNDS = Number(roundsArg)
/** @type {TaskState[]} */
const STATES = ["submitted", "working", "input-required", "working", "completed"]

/** The receiver: counts requests, and calls `onRequest` for each as it arrives. */
const receiver = { count: 0, onRequest: () => {} }
const server = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    receiver.count++
    receiver.onRequest()
    res.end()
  })
})
await new Promise((/** @type {(value?: undefined) => void} */ resolve) => server.listen(0, "127.0.0.1", resolve))
const port = portOf(server)
const url = `http://127.0.0.1:${port}/hook`

/**
 * Resolves once the receiver has had `count` requests in all.
 * @param {number} count
 */
function until(count) {
  return new Promise((/** @type {(value?: undefined) => void} */ resolve) => {
    receiver.onRequest = () => receiver.count >= count && resolve()
    if (receiver.count >= count) resolve()
  })
}

/**
 * @param {string} id
 * @param {TaskState} state
 * @returns {import("../dist/lib/stores/index.js").A2ATask}
 */
const task = (id, state) => ({ id, contextId: `ctx-${id}`, kind: "task", status: { state, timestamp: new Date().toISOString() }, history: [] })
/**
 * @param {string} taskId
 * @returns {import("../dist/lib/stores/index.js").PushConfigRecord}
 */
const config = (taskId) => ({ taskId, id: "hook", version: "1.0", url, createdAt: new Date().toISOString() })

/**
 * Ours: TASKS × EVENTS state changes through the outbox, and how long until the receiver has them all.
 * @param {InMemoryTaskStore | FileTaskStore} store
 * @param {string} label
 * @returns {Promise<RateRow>}
 */
async function oursRate(store, label) {
  const sender = new PushSender({ store: store.push, log: silent, instance: `bench-${label}`, allow: allowList([`127.0.0.1:${port}`]) })
  await sender.start()
  const save = transitionSaver(store, { store: store.push, enqueued: () => sender.wake() })
  const prefix = `${label}-${Math.random().toString(36).slice(2)}`
  const ids = Array.from({ length: TASKS }, (_, i) => `${prefix}-${i}`)
  for (const id of ids) {
    await store.save(task(id, "submitted"))
    await store.push.putConfig(config(id))
  }
  const start = receiver.count
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  // Each Task's changes in order, the Tasks side by side, as a busy server makes them.
  await Promise.all(ids.map(async (id) => {
    for (let e = 0; e < EVENTS; e++) await save(task(id, STATES[(e % (STATES.length - 1)) + 1]))
  }))
  await until(start + TASKS * EVENTS)
  const seconds = (performance.now() - t0) / 1000
  const cpu = cpuPerNotification(cpu0)
  await sender.stop()
  return { perSecond: (TASKS * EVENTS) / seconds, cpu }
}

/**
 * CPU µs (user + system) since `cpu0`, per notification of a round.
 * @param {NodeJS.CpuUsage} cpu0
 */
function cpuPerNotification(cpu0) {
  const { user, system } = process.cpuUsage(cpu0)
  return (user + system) / (TASKS * EVENTS)
}

/**
 * The SDK: the same changes handed to DefaultPushNotificationSender.send, as its request handler does (not
 * awaited). Its console line per notification is silenced (below), so the terminal is not measured.
 */
async function sdkRate() {
  const store = new InMemoryPushNotificationStore()
  const sender = new DefaultPushNotificationSender(store, { timeout: 10_000 })
  const context = new ServerCallContext({ requestedVersion: "1.0" })
  const prefix = `sdk-${Math.random().toString(36).slice(2)}`
  const ids = Array.from({ length: TASKS }, (_, i) => `${prefix}-${i}`)
  for (const id of ids) await store.save(id, context, { taskId: id, id: "hook", url, token: "", tenant: "", authentication: undefined })
  const start = receiver.count
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  for (let e = 0; e < EVENTS; e++) {
    for (const id of ids) {
      const event = StreamResponse.fromJSON({ statusUpdate: { taskId: id, contextId: `ctx-${id}`, status: { state: "TASK_STATE_WORKING", timestamp: new Date().toISOString() } } })
      void sender.send(event, context)
    }
  }
  await until(start + TASKS * EVENTS)
  const perSecond = (TASKS * EVENTS) / ((performance.now() - t0) / 1000)
  return { perSecond, cpu: cpuPerNotification(cpu0) }
}


/** From the save of one state change to the receiver's request, one at a time, on the memory store. */
async function latency() {
  const store = new InMemoryTaskStore()
  const sender = new PushSender({ store: store.push, log: silent, instance: "bench-latency", allow: allowList([`127.0.0.1:${port}`]) })
  await sender.start()
  const save = transitionSaver(store, { store: store.push, enqueued: () => sender.wake() })
  const id = "latency"
  await store.save(task(id, "submitted"))
  await store.push.putConfig(config(id))
  /** @type {number[]} */
  const samples = []
  for (let i = 0; i < SAMPLES + 20; i++) {
    const arrived = until(receiver.count + 1)
    const t0 = performance.now()
    await save(task(id, i % 2 === 0 ? "working" : "input-required"))
    await arrived
    // The first few warm the connection and the JIT.
    if (i >= 20) samples.push(performance.now() - t0)
  }
  await sender.stop()
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) }
}

/**
 * The value below which `p` percent of the samples fall (nearest rank).
 * @param {number[]} values
 * @param {number} p
 */
function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]
}

// The SDK's sender writes a console.info line per notification, some after the receiver has answered: silenced for the whole child.
console.info = () => {}

const silent = { debug() {}, info() {}, warn() {}, error() {}, child: () => silent }

try {
  await fsp.mkdir(dir, { recursive: true })
  /** @type {{ memory: RateRow[], file: RateRow[], sdk: RateRow[] }} */
  const rows = { memory: [], file: [], sdk: [] }
  const fileHasPush = new FileTaskStore(path.join(dir, "probe")).push !== undefined
  // Alternating rounds, so a machine that slows down part-way hurts every side alike.
  for (let round = 0; round < ROUNDS; round++) {
    rows.memory.push(await oursRate(new InMemoryTaskStore(), "memory"))
    if (fileHasPush) {
      const store = new FileTaskStore(path.join(dir, `round-${round}`))
      rows.file.push(await oursRate(store, "file"))
      await store.close()
    }
    rows.sdk.push(await sdkRate())
  }
  const lat = await latency()
  server.close()
  process.send?.({
    ready: true,
    tasks: TASKS,
    events: EVENTS,
    rounds: ROUNDS,
    samples: SAMPLES,
    memoryPerSecond: median(rows.memory.map((row) => row.perSecond)),
    filePerSecond: fileHasPush ? median(rows.file.map((row) => row.perSecond)) : undefined,
    sdkPerSecond: median(rows.sdk.map((row) => row.perSecond)),
    memoryCpuUs: median(rows.memory.map((row) => row.cpu)),
    fileCpuUs: fileHasPush ? median(rows.file.map((row) => row.cpu)) : undefined,
    sdkCpuUs: median(rows.sdk.map((row) => row.cpu)),
    // Each round's figures, in round order: the targets take the median of per-round ratios, as the HTTP rows do.
    perRound: rows,
    latencyP50Ms: lat.p50,
    latencyP99Ms: lat.p99,
  })
} catch (err) {
  process.send?.({ error: errorText(err) })
}
