// Child: FileTaskStore save and get ops/s against raw fs ceilings, 16 at a time over a few hundred ids.
// argv: <dir> <seconds per run> <rounds>
import fsp from "node:fs/promises"
import path from "node:path"
import { FileTaskStore } from "../dist/index.js"
import { errorText } from "./child.mjs"
import { completedTask } from "./fixtures.mjs"
import { median } from "./stats.mjs"

const [dir, secondsArg = "2", roundsArg = "3"] = process.argv.slice(2)
const CONCURRENCY = 16
const IDS = 256

/** The naive durable ceiling: tmp write, fsync, rename over, fsync the directory; nothing shared between saves. */
let tmpCount = 0
/**
 * Writes and fsyncs a tmp file, then renames it over `file`.
 * @param {string} file
 * @param {string} text
 * @param {string} tag
 */
async function writeTmpAndRename(file, text, tag) {
  const tmp = `${file}.${process.pid}.${++tmpCount}.${tag}.tmp`
  const handle = await fsp.open(tmp, "w")
  try {
    await handle.writeFile(text, "utf8")
    await handle.sync()
  } finally {
    await handle.close()
  }
  await fsp.rename(tmp, file)
}
/** @param {string} file @param {string} text */
async function saveDurably(file, text) {
  await writeTmpAndRename(file, text, "ceiling")
  const directory = await fsp.open(path.dirname(file), "r")
  try {
    await directory.sync()
  } finally {
    await directory.close()
  }
}

/**
 * `op(i)` from CONCURRENCY workers until the time is up; ops per second.
 * @param {number} seconds
 * @param {(i: number) => Promise<unknown>} op
 */
async function opsPerSecond(seconds, op) {
  let next = 0
  let done = 0
  const deadline = performance.now() + seconds * 1000
  const started = performance.now()
  const worker = async () => {
    while (performance.now() < deadline) {
      await op(next++)
      done++
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  return done / ((performance.now() - started) / 1000)
}

try {
  const seconds = Number(secondsArg)
  const rounds = Number(roundsArg)
  const storeDir = path.join(dir, "store")
  const rawDir = path.join(dir, "raw")
  await fsp.mkdir(rawDir, { recursive: true })
  const store = new FileTaskStore(storeDir)
  const tasks = Array.from({ length: IDS }, () => completedTask())
  // Both directories hold the same files before anything is timed.
  for (const task of tasks) {
    await store.save(task)
    await fsp.writeFile(path.join(rawDir, `${task.id}.json`), JSON.stringify(task))
  }
  const rawFile = tasks.map((task) => path.join(rawDir, `${task.id}.json`))
  const timestamp = () => new Date().toISOString()

  /** @type {Record<string, (i: number) => Promise<unknown>>} */
  const runs = {
    // Each save is a fresh status timestamp on a Task, as a running server would write.
    saveOurs: (i) => {
      const task = tasks[i % IDS]
      return store.save({ ...task, status: { state: task.status.state, timestamp: timestamp() } })
    },
    saveCeiling: (i) => {
      const task = tasks[i % IDS]
      return saveDurably(rawFile[i % IDS], JSON.stringify({ ...task, status: { state: task.status.state, timestamp: timestamp() } }))
    },
    getOurs: async (i) => {
      const task = await store.get(tasks[i % IDS].id)
      if (task?.id !== tasks[i % IDS].id) throw new Error("FileTaskStore.get answered the wrong task")
    },
    getReadFile: async (i) => {
      const task = JSON.parse(await fsp.readFile(rawFile[i % IDS], "utf8"))
      if (task.id !== tasks[i % IDS].id) throw new Error("readFile answered the wrong task")
    },
  }
  /** @type {Record<string, number[]>} */
  const samples = Object.fromEntries(Object.keys(runs).map((name) => [name, []]))
  for (const op of Object.values(runs)) await opsPerSecond(0.3, op) // warm up
  // Each pair (ours, the ceiling) runs back to back, first one then the other first, so drift on the disk cancels out.
  for (let round = 0; round < rounds; round++) {
    for (const pair of [["saveOurs", "saveCeiling"], ["getOurs", "getReadFile"]]) {
      for (const name of round % 2 === 0 ? pair : pair.toReversed()) samples[name].push(await opsPerSecond(seconds, runs[name]))
    }
  }
  await store.close()
  process.send?.({ ready: true, samples, medians: Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, median(values)])) })
} catch (err) {
  process.send?.({ error: errorText(err) })
}
