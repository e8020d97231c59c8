import { AgingMap } from "../aging-map.js"
import { internalsOf, withInternals } from "../internals.js"
import type { A2ATask } from "../types.js"
import { TERMINAL_STATES } from "../types.js"
import { pageOfTasks, type TaskPage, type TaskQuery } from "./list.js"
import type { TaskStore } from "./task-store.js"

export interface InMemoryTaskStoreOptions {
  /** Most Tasks held; past it the oldest finished ones are dropped (default 100000). Unfinished Tasks are never dropped. */
  maxTasks?: number
  /** Finished Tasks are dropped this long after they finished (default: kept until maxTasks pushes them out). */
  terminalTtlMs?: number
}

/**
 * A stored Task: its JSON, parsed anew for every get, and the few fields
 * list() filters and orders by (id, context, status, owner) as a small Task.
 */
interface Entry {
  json: string
  index: A2ATask
}

/** The fields of a Task that list() looks at, and nothing else. */
function indexOf(task: A2ATask): A2ATask {
  const index: A2ATask = { id: task.id, contextId: task.contextId, status: { state: task.status.state, timestamp: task.status.timestamp } }
  const principal = internalsOf(task).principal
  return principal === undefined ? index : withInternals(index, { principal })
}

/**
 * Tasks in a Map, for the life of the process. Every save and get copies
 * (through JSON, faster here than structuredClone), so a caller mutating a
 * Task it handed in or got back never changes what is stored. Bounded:
 * finished Tasks make room for new ones.
 */
export class InMemoryTaskStore implements TaskStore {
  private readonly tasks = new Map<string, Entry>()
  /** Finished Tasks and when they expire, in finishing order. */
  private readonly expiries = new AgingMap<string, number>()
  private readonly maxTasks: number
  private readonly terminalTtlMs: number | undefined

  constructor(opts: InMemoryTaskStoreOptions = {}) {
    if (opts.maxTasks !== undefined && !(Number.isInteger(opts.maxTasks) && opts.maxTasks > 0)) {
      throw new TypeError("InMemoryTaskStore: opts.maxTasks should be a positive integer")
    }
    if (opts.terminalTtlMs !== undefined && !(Number.isFinite(opts.terminalTtlMs) && opts.terminalTtlMs >= 0)) {
      throw new TypeError("InMemoryTaskStore: opts.terminalTtlMs should be a number of milliseconds >= 0")
    }
    this.maxTasks = opts.maxTasks ?? 100_000
    this.terminalTtlMs = opts.terminalTtlMs
  }

  async get(id: string): Promise<A2ATask | undefined> {
    this.dropExpired()
    const entry = this.tasks.get(id)
    return entry === undefined ? undefined : (JSON.parse(entry.json) as A2ATask)
  }

  async getText(id: string): Promise<string | undefined> {
    this.dropExpired()
    return this.tasks.get(id)?.json
  }

  async save(task: A2ATask): Promise<void> {
    const json = JSON.stringify(task)
    this.tasks.set(task.id, { json, index: indexOf(task) })
    this.expiries.delete(task.id)
    if (TERMINAL_STATES.has(task.status.state)) this.expiries.set(task.id, Date.now() + (this.terminalTtlMs ?? Infinity))
    this.dropExpired()
    this.makeRoom()
  }

  async list(query: TaskQuery): Promise<TaskPage> {
    this.dropExpired()
    const page = pageOfTasks(Array.from(this.tasks.values(), (entry) => entry.index), query)
    const tasks = page.tasks.map((index) => {
      const { artifacts, ...task } = JSON.parse(this.tasks.get(index.id)!.json) as A2ATask
      return query.includeArtifacts && artifacts !== undefined ? { ...task, artifacts } : task
    })
    return { ...page, tasks }
  }

  async delete(id: string): Promise<void> {
    this.tasks.delete(id)
    this.expiries.delete(id)
  }

  /** How many Tasks are held. */
  get size(): number {
    return this.tasks.size
  }

  private dropExpired(): void {
    if (this.terminalTtlMs === undefined) return
    const now = Date.now()
    for (let oldest = this.expiries.oldest(); oldest !== undefined && oldest.value <= now; oldest = this.expiries.oldest()) {
      this.expiries.delete(oldest.key)
      this.tasks.delete(oldest.key)
    }
  }

  /** Past the bound, drops finished Tasks, those finished longest ago first. */
  private makeRoom(): void {
    while (this.tasks.size > this.maxTasks) {
      const oldest = this.expiries.shift()
      if (oldest === undefined) return
      this.tasks.delete(oldest.key)
    }
  }
}
