import { AgingMap } from "../../aging-map.js"
import { heapShare, textHeapBytes } from "../../heap-budget.js"
import type { A2ATask } from "../../types.js"
import { TERMINAL_STATES } from "../../types.js"
import { errorReporter, type TaskStoreOptions } from "../background-errors.js"
import { eventRetentionOf } from "../../streams/event-log.js"
import { listKeyOf, pageOf, withoutArtifacts, type ListKey, type TaskPage, type TaskQuery } from "../list.js"
import { MemoryEventLog } from "./events.js"
import { MemoryPushStore, type MemoryPushOptions } from "./push.js"
import { isExpired, retentionSweeper, type RetentionSweeper } from "../retention.js"
import { StoreFullError, type StoreLimit } from "../store-full.js"
import { assertTask, assertTaskId } from "../task-checks.js"
import type { TaskStore } from "../task-store.js"

export interface InMemoryTaskStoreOptions extends TaskStoreOptions {
  /** Most Tasks held (default 100000). Past it the oldest finished ones are dropped; a new Task that leaves no room is refused. */
  maxTasks?: number
  /**
   * Most heap the stored Tasks may take, in bytes: 2 per character of each
   * Task's JSON plus 1 KiB per Task (default a quarter of the heap limit).
   * Past it as past maxTasks.
   */
  maxBytes?: number
  /** Most Tasks one owner (a principal, or all Tasks created without authentication) holds (default half of maxTasks). */
  maxTasksPerOwner?: number
  /** Most bytes one owner's Tasks take, counted as for maxBytes (default half of maxBytes). */
  maxBytesPerOwner?: number
  /**
   * Finished Tasks are dropped this long after they were saved finished, checked as the store is used
   * (default: kept until a bound pushes them out). `retention` (every store's option) is the rule to
   * prefer: it goes by the status timestamp, in a background sweep.
   */
  terminalTtlMs?: number
  /** Bounds of the push capability (`store.push`): its configs, undelivered notifications and dead letters. */
  push?: MemoryPushOptions
  /**
   * How long a finished Task's stream events are kept for resuming (`store.events`), in ms after the
   * Task ended (default one hour); the log goes sooner with its Task, or past maxEventBytes.
   */
  eventRetentionMs?: number
  /**
   * Most heap the stream events take (`store.events`), counted as 2 bytes per character of each event's
   * JSON plus a little per event (default half of maxBytes: an eighth of the heap limit). Past it whole
   * logs of ended Tasks go first, the earliest ended first, then the oldest events of the largest log.
   */
  maxEventBytes?: number
}

/** The defaults: 100000 Tasks, a quarter of the heap, half of each for one owner. */
export const MEMORY_DEFAULT_MAX_TASKS = 100_000
export const MEMORY_HEAP_FRACTION = 1 / 4
export const MEMORY_OWNER_SHARE = 1 / 2
/** The stream events' default budget, as a share of maxBytes. */
export const MEMORY_EVENT_SHARE = 1 / 2
/** A stored Task's heap besides its JSON text: its entry, list key, map slots (measured: 520-830 bytes). */
const ENTRY_HEAP_BYTES = 1024

/** A Task's owner as list keys hold it: a principal, null (created without authentication), false (not a name). */
type Owner = ListKey["owner"]

/** A stored Task: its JSON, parsed anew for every get, the fields list() filters and orders by, and its weight. */
interface Entry {
  json: string
  key: ListKey
  bytes: number
  finished: boolean
}

/** What one owner holds (or the whole store): counts, and its finished Tasks in finishing order with their expiry. */
interface Holding {
  tasks: number
  bytes: number
  finishedBytes: number
  finished: AgingMap<string, number>
}

const newHolding = (): Holding => ({ tasks: 0, bytes: 0, finishedBytes: 0, finished: new AgingMap() })
const keyOfEntry = (entry: Entry): ListKey => entry.key

/**
 * Tasks in a Map, for the life of the process. Every save and get copies
 * (through JSON, faster here than structuredClone), so a caller mutating a
 * Task it handed in or got back never changes what is stored.
 *
 * Bounded in Tasks and bytes, in total and per owner. Past a bound, finished
 * Tasks are dropped, those finished longest ago first: past an owner's share,
 * that owner's own; past the total, the heaviest owner's. A new Task that cannot be made
 * room for (what is left is unfinished) is refused with StoreFullError. A
 * save of a Task already held (a running Task's next state) is never refused,
 * and the Task just saved is never the one dropped: the store may then hold
 * more than its bound, by the growth of the Tasks under way, until finished
 * Tasks make room. The Tasks' stream events (`events`) have a budget of
 * their own, maxEventBytes (see MemoryEventLog).
 */
export class InMemoryTaskStore implements TaskStore {
  private readonly tasks = new Map<string, Entry>()
  private readonly all = newHolding()
  private readonly owners = new Map<Owner, Holding>()
  private readonly limits: Record<StoreLimit, number>
  private readonly terminalTtlMs: number | undefined
  private readonly sweeper: RetentionSweeper | undefined
  /** Push notifications: webhook configs and the outbox, saved with the Task in one synchronous step. */
  readonly push: MemoryPushStore
  /** The events of the Tasks' streams, for resuming them (see MemoryEventLog). */
  readonly events: MemoryEventLog

  constructor(opts: InMemoryTaskStoreOptions = {}) {
    for (const name of ["maxTasks", "maxBytes", "maxTasksPerOwner", "maxBytesPerOwner", "maxEventBytes"] as const) {
      const value = opts[name]
      if (value !== undefined && !(Number.isInteger(value) && value > 0)) throw new TypeError(`InMemoryTaskStore: opts.${name} should be a positive integer`)
    }
    if (opts.terminalTtlMs !== undefined && !(Number.isFinite(opts.terminalTtlMs) && opts.terminalTtlMs >= 0)) {
      throw new TypeError("InMemoryTaskStore: opts.terminalTtlMs should be a number of milliseconds >= 0")
    }
    const report = errorReporter("InMemoryTaskStore", opts.onError)
    const eventRetentionMs = eventRetentionOf("InMemoryTaskStore", opts.eventRetentionMs)
    this.sweeper = retentionSweeper("InMemoryTaskStore", opts.retention, (cutoff) => this.deleteFinishedBefore(cutoff), report)
    if (this.sweeper !== undefined && opts.terminalTtlMs !== undefined) {
      throw new TypeError("InMemoryTaskStore: opts.retention and opts.terminalTtlMs both set how long finished Tasks are kept; give one")
    }
    const maxTasks = opts.maxTasks ?? MEMORY_DEFAULT_MAX_TASKS
    const maxBytes = opts.maxBytes ?? heapShare(MEMORY_HEAP_FRACTION)
    this.limits = {
      maxTasks,
      maxBytes,
      maxTasksPerOwner: Math.min(maxTasks, opts.maxTasksPerOwner ?? Math.ceil(maxTasks * MEMORY_OWNER_SHARE)),
      maxBytesPerOwner: Math.min(maxBytes, opts.maxBytesPerOwner ?? Math.ceil(maxBytes * MEMORY_OWNER_SHARE)),
    }
    this.terminalTtlMs = opts.terminalTtlMs
    // A subclass that overrides save (a recording or failing test store) has its save used, awaited.
    const save = (task: A2ATask) => (this.save === InMemoryTaskStore.prototype.save ? this.saveNow(task) : this.save(task))
    this.push = new MemoryPushStore({ save, maxBytes }, opts.push)
    this.events = new MemoryEventLog({ retentionMs: eventRetentionMs, maxBytes: opts.maxEventBytes ?? Math.ceil(maxBytes * MEMORY_EVENT_SHARE), report })
    this.sweeper?.start()
  }

  /** The bounds in force, defaults applied. */
  get bounds(): Readonly<Record<StoreLimit, number>> {
    return this.limits
  }

  /** What the store holds: Tasks and their counted bytes. */
  get usage(): { tasks: number; bytes: number } {
    return { tasks: this.all.tasks, bytes: this.all.bytes }
  }

  /** What one owner holds (a principal; null for Tasks created without authentication). */
  usageOf(owner: string | null): { tasks: number; bytes: number } {
    const held = this.owners.get(owner)
    return { tasks: held?.tasks ?? 0, bytes: held?.bytes ?? 0 }
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
    this.saveNow(task)
  }

  /** The whole save, without yielding: the push capability enqueues in the same step. */
  private saveNow(task: A2ATask): void {
    assertTask(task, "InMemoryTaskStore")
    const json = JSON.stringify(task)
    const key = listKeyOf(task)
    const entry: Entry = { json, key, bytes: ENTRY_HEAP_BYTES + textHeapBytes(json), finished: TERMINAL_STATES.has(task.status.state) }
    this.dropExpired()
    const previous = this.tasks.get(task.id)
    // A Task submitted, new or a follow-up that put an interrupted one back in line, is new work: it must fit.
    if (previous === undefined || (entry.key.state === "submitted" && previous.key.state !== "submitted")) this.admit(entry, previous)
    if (previous !== undefined) this.remove(task.id, previous)
    this.add(task.id, entry)
    this.makeRoom(task.id, entry)
  }

  async list(query: TaskQuery): Promise<TaskPage> {
    this.dropExpired()
    const { items, ...page } = pageOf(this.tasks.values(), keyOfEntry, query)
    const tasks = items.map((entry) => JSON.parse(entry.json) as A2ATask)
    return { ...page, tasks: query.includeArtifacts ? tasks : tasks.map(withoutArtifacts) }
  }

  async delete(id: string): Promise<void> {
    assertTaskId(id)
    const entry = this.tasks.get(id)
    if (entry !== undefined) this.drop(id, entry)
    // A log may be kept for an id the store holds no Task of (events appended before its first save).
    else this.events.forget(id)
  }

  /** Stops the retention sweeps (of Tasks and of ended stream events); the Tasks stay, and the store stays usable. */
  async close(): Promise<void> {
    await Promise.all([this.sweeper?.stop(), this.events.stop()])
  }

  /** Retention's sweep: removes the finished Tasks `isExpired` at `cutoff`, walking only the finished ones. */
  async deleteFinishedBefore(cutoff: string): Promise<number> {
    let deleted = 0
    for (const id of [...this.all.finished.keys()]) {
      const entry = this.tasks.get(id)
      if (entry !== undefined && isExpired({ state: entry.key.state, timestamp: entry.key.timestamp }, cutoff)) {
        this.drop(id, entry)
        deleted++
      }
    }
    return deleted
  }

  /**
   * Throws StoreFullError unless dropping finished Tasks can make room for
   * `entry`, in its owner's share and in total: a new Task, or the growth
   * of the unfinished one it replaces (`previous`).
   */
  private admit(entry: Entry, previous: Entry | undefined): void {
    const owner = entry.key.owner
    const own = this.owners.get(owner) ?? newHolding()
    const { maxTasks, maxBytes, maxTasksPerOwner, maxBytesPerOwner } = this.limits
    const ownerName = owner === false ? undefined : owner
    const added = previous === undefined || previous.finished ? 1 : 0
    const grown = entry.bytes - (previous === undefined || previous.finished ? 0 : previous.bytes)
    if (this.all.tasks - this.all.finished.size + added > maxTasks) throw new StoreFullError("InMemoryTaskStore", "maxTasks", maxTasks)
    if (this.all.bytes - this.all.finishedBytes + grown > maxBytes) throw new StoreFullError("InMemoryTaskStore", "maxBytes", maxBytes)
    if (own.tasks - own.finished.size + added > maxTasksPerOwner) throw new StoreFullError("InMemoryTaskStore", "maxTasksPerOwner", maxTasksPerOwner, ownerName)
    if (own.bytes - own.finishedBytes + grown > maxBytesPerOwner) throw new StoreFullError("InMemoryTaskStore", "maxBytesPerOwner", maxBytesPerOwner, ownerName)
  }

  private add(id: string, entry: Entry): void {
    this.tasks.set(id, entry)
    let own = this.owners.get(entry.key.owner)
    if (own === undefined) this.owners.set(entry.key.owner, (own = newHolding()))
    const expiry = entry.finished ? Date.now() + (this.terminalTtlMs ?? Infinity) : 0
    for (const holding of [this.all, own]) {
      holding.tasks++
      holding.bytes += entry.bytes
      if (entry.finished) {
        holding.finishedBytes += entry.bytes
        holding.finished.set(id, expiry)
      }
    }
  }

  private remove(id: string, entry: Entry): void {
    this.tasks.delete(id)
    const own = this.owners.get(entry.key.owner)!
    for (const holding of [this.all, own]) {
      holding.tasks--
      holding.bytes -= entry.bytes
      if (entry.finished) {
        holding.finishedBytes -= entry.bytes
        holding.finished.delete(id)
      }
    }
    if (own.tasks === 0) this.owners.delete(entry.key.owner)
  }

  /** The Task leaves the store (deleted, swept, expired, dropped for room): its push configs, notifications and stream events with it. */
  private drop(id: string, entry: Entry): void {
    this.remove(id, entry)
    this.push.forgetTask(id)
    this.events.forget(id)
  }

  private dropExpired(): void {
    if (this.terminalTtlMs === undefined) return
    const now = Date.now()
    for (let oldest = this.all.finished.oldest(); oldest !== undefined && oldest.value <= now; oldest = this.all.finished.oldest()) {
      this.drop(oldest.key, this.tasks.get(oldest.key)!)
    }
  }

  /**
   * Past a bound, drops finished Tasks, those finished longest ago first:
   * the saving owner's own past its share; past the total, those of the
   * owner holding the most (in what is over: bytes or Tasks), so an owner
   * holding little keeps its Tasks while a heavier one has finished ones.
   * Never the Task just saved: then the store stays over until more finish.
   */
  private makeRoom(savedId: string, saved: Entry): void {
    const { maxTasks, maxBytes, maxTasksPerOwner, maxBytesPerOwner } = this.limits
    const own = this.owners.get(saved.key.owner)!
    while (own.tasks > maxTasksPerOwner || own.bytes > maxBytesPerOwner) {
      if (!this.dropOldestFinished(own, savedId)) break
    }
    while (this.all.tasks > maxTasks || this.all.bytes > maxBytes) {
      const heaviest = this.heaviestWithFinished(this.all.bytes > maxBytes ? "bytes" : "tasks", savedId)
      if (heaviest === undefined || !this.dropOldestFinished(heaviest, savedId)) break
    }
  }

  /** The owner holding the most (bytes or Tasks) among those with a finished Task that may be dropped. */
  private heaviestWithFinished(measure: "bytes" | "tasks", savedId: string): Holding | undefined {
    let heaviest: Holding | undefined
    for (const holding of this.owners.values()) {
      const oldest = holding.finished.oldest()
      if (oldest === undefined || oldest.key === savedId) continue
      if (heaviest === undefined || holding[measure] > heaviest[measure]) heaviest = holding
    }
    return heaviest
  }

  private dropOldestFinished(holding: Holding, savedId: string): boolean {
    const oldest = holding.finished.oldest()
    if (oldest === undefined || oldest.key === savedId) return false
    this.drop(oldest.key, this.tasks.get(oldest.key)!)
    return true
  }
}
