import { AgingMap } from "../aging-map.js"
import type { A2ATask } from "../types.js"
import { TERMINAL_STATES } from "../types.js"
import { errorReporter, type TaskStoreOptions } from "./background-errors.js"
import { listKeyOf, pageOf, withoutArtifacts, type ListKey, type TaskPage, type TaskQuery } from "./list.js"
import { assertTask, assertTaskId } from "./task-checks.js"
import type { TaskStore } from "./task-store.js"

export interface InMemoryTaskStoreOptions extends TaskStoreOptions {
  /** Most Tasks held; past it the oldest finished ones are dropped (default 100000). Unfinished Tasks are never dropped. */
  maxTasks?: number
  /** Finished Tasks are dropped this long after they finished (default: kept until maxTasks pushes them out). */
  terminalTtlMs?: number
}

/** A stored Task: its JSON, parsed anew for every get, and the fields list() filters and orders by. */
interface Entry {
  json: string
  key: ListKey
}

const keyOfEntry = (entry: Entry): ListKey => entry.key

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
    // Checked like every store's; a store in memory has no background work to report.
    errorReporter("InMemoryTaskStore", opts.onError)
  }

  async get(id: string): Promise<A2ATask | undefined> {
    assertTaskId(id)
    this.dropExpired()
    const entry = this.tasks.get(id)
    return entry === undefined ? undefined : (JSON.parse(entry.json) as A2ATask)
  }

  async getText(id: string): Promise<string | undefined> {
    assertTaskId(id)
    this.dropExpired()
    return this.tasks.get(id)?.json
  }

  async save(task: A2ATask): Promise<void> {
    assertTask(task, "InMemoryTaskStore")
    const json = JSON.stringify(task)
    this.tasks.set(task.id, { json, key: listKeyOf(task) })
    this.expiries.delete(task.id)
    if (TERMINAL_STATES.has(task.status.state)) this.expiries.set(task.id, Date.now() + (this.terminalTtlMs ?? Infinity))
    this.dropExpired()
    this.makeRoom()
  }

  async list(query: TaskQuery): Promise<TaskPage> {
    this.dropExpired()
    const { items, ...page } = pageOf(this.tasks.values(), keyOfEntry, query)
    const tasks = items.map((entry) => JSON.parse(entry.json) as A2ATask)
    return { ...page, tasks: query.includeArtifacts ? tasks : tasks.map(withoutArtifacts) }
  }

  async delete(id: string): Promise<void> {
    assertTaskId(id)
    this.tasks.delete(id)
    this.expiries.delete(id)
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
