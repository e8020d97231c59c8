// Child (run with --expose-gc): FileTaskStore.list at a few thousand Tasks, as a server calls it:
// the context lookup every SendMessage with a contextId makes, and a ListTasks page.
// argv: <dir> <count> <rounds>
import fsp from "node:fs/promises"
import { FileTaskStore } from "../dist/index.js"
import { errorText } from "./child.mjs"
import { completedTask } from "./fixtures.mjs"
import { median } from "./stats.mjs"

const [dir, countArg = "10000", roundsArg = "10"] = process.argv.slice(2)
const count = Number(countArg)
const rounds = Number(roundsArg)
/** Tasks per context: a conversation of a few turns. */
const PER_CONTEXT = 4

function settledHeap() {
  for (let i = 0; i < 4; i++) globalThis.gc?.()
  return process.memoryUsage().heapUsed
}

/**
 * Milliseconds `run` takes, median over `rounds` calls (each call may first do untimed work through `before`).
 * @param {(round: number) => Promise<unknown>} run
 * @param {(round: number) => Promise<unknown>} [before]
 */
async function medianMs(run, before = async () => {}) {
  /** @type {number[]} */
  const samples = []
  for (let round = 0; round < rounds; round++) {
    await before(round)
    const t0 = performance.now()
    await run(round)
    samples.push(performance.now() - t0)
  }
  return median(samples)
}

/** @param {number} i */
const contextOf = (i) => `ctx-${Math.floor(i / PER_CONTEXT)}`
/** What the conversation lookup asks for (lib/a2a/conversation.ts). */
/** @param {number} i */
const contextQuery = (i) => ({ contextId: contextOf(i), pageSize: 100, owners: [null] })

try {
  if (typeof globalThis.gc !== "function") throw new Error("run with --expose-gc")
  await fsp.mkdir(dir, { recursive: true })
  const namer = new FileTaskStore(dir)
  // Written straight into the directory (the reads are what is measured), named as the store names them.
  let next = 0
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < count) {
        const i = next++
        const task = { ...completedTask(`t-${i}`), contextId: contextOf(i) }
        await fsp.writeFile(namer.fileFor(task.id), JSON.stringify(task))
      }
    }),
  )
  const pick = () => Math.floor(Math.random() * count)

  const heapBefore = settledHeap()
  const store = new FileTaskStore(dir)
  const t0 = performance.now()
  const first = await store.list(contextQuery(pick()))
  const firstListMs = performance.now() - t0
  if (first.tasks.length !== PER_CONTEXT) throw new Error(`the first context lookup found ${first.tasks.length} tasks, not ${PER_CONTEXT}`)
  const heapPerTask = (settledHeap() - heapBefore) / count

  const contextMs = await medianMs(() => store.list(contextQuery(pick())))
  const pageMs = await medianMs(() => store.list({ pageSize: 50 }))
  // A SendMessage with a contextId on a busy server: a save, then the lookup.
  let saved = 0
  const afterOwnSaveMs = await medianMs(
    () => store.list(contextQuery(pick())),
    () => store.save({ ...completedTask(`own-${saved++}`), contextId: contextOf(pick()) }),
  )
  // Another process (here: a second store on the directory) saved a Task just before.
  const peer = new FileTaskStore(dir)
  const afterPeerSaveMs = await medianMs(
    () => store.list(contextQuery(pick())),
    () => peer.save({ ...completedTask(`peer-${saved++}`), contextId: contextOf(pick()) }),
  )
  await Promise.all([store.close(), peer.close()])
  process.send?.({ ready: true, count, perContext: PER_CONTEXT, rounds, firstListMs, heapPerTask, contextMs, pageMs, afterOwnSaveMs, afterPeerSaveMs })
} catch (err) {
  process.send?.({ error: errorText(err) })
}
