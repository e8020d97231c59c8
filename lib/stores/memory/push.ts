import { randomUUID } from "node:crypto"
import { textHeapBytes } from "../../heap-budget.js"
import { ownerOf } from "../../internals.js"
import type { A2ATask } from "../../types.js"
import { attemptsOf, splitTrace } from "../push-records.js"
import type { PushClaim, PushConfigRecord, PushDeadLetter, PushEvent, PushOutboxItem, PushStore, TraceContext } from "../push-store.js"

export interface MemoryPushOptions {
  /** Most heap the webhook configs take, counted as 2 bytes per character of their JSON (default an eighth of the store's maxBytes). */
  maxConfigBytes?: number
  /**
   * Most heap the undelivered notifications take, counted the same way (default a quarter of the store's maxBytes).
   * Past it the oldest go to the dead letters ("outbox full"): past half of it, the saving owner's own; past all of it, the heaviest owner's.
   */
  maxOutboxBytes?: number
  /** Most dead letters kept, oldest dropped first (default 1000). */
  maxDeadLetters?: number
  /** Most heap the dead letters take, oldest dropped first (default a quarter of maxOutboxBytes). */
  maxDeadLetterBytes?: number
}

/** What the memory store lends its push capability: a save that is synchronous, so the save and its notifications land in one step. */
export interface MemoryPushHost {
  /** Saves as InMemoryTaskStore.save does, bounds and refusals included: without yielding (returning nothing), unless a subclass overrides save. */
  save(task: A2ATask): void | Promise<void>
  /** The store's maxBytes, for the defaults. */
  maxBytes: number
}

/** A notification's event, stored once as JSON for every config it goes to, and the trace context its save gave it. */
interface StoredEvent {
  json: string
  bytes: number
  traceContext?: TraceContext
}

interface StoredItem {
  item: Omit<PushOutboxItem, "event">
  event: StoredEvent
  owner: Owner
}

/** One Task's notifications to one config, in order, and who holds the first of them. */
interface Channel {
  keys: string[]
  claim?: { token: string; until: number }
}

type Owner = string | null | false

/** Per item and per dead letter, besides its event: the record and its map slots. */
const ITEM_HEAP_BYTES = 512
const DEFAULT_MAX_DEAD_LETTERS = 1000

const channelKey = (taskId: string, configId: string): string => JSON.stringify([taskId, configId])
const configBytes = (config: PushConfigRecord): number => ITEM_HEAP_BYTES + textHeapBytes(JSON.stringify(config))

/** A notification or dead letter as handed out: its event and trace context copies of what is stored. */
function handedOut<T extends Omit<PushOutboxItem, "event">>(item: T, event: StoredEvent): T & { event: PushEvent } {
  const copy = { ...item, event: JSON.parse(event.json) as PushEvent }
  if (event.traceContext !== undefined) copy.traceContext = { ...event.traceContext }
  return copy
}

/**
 * The memory store's push capability: configs, an outbox kept in order per
 * (Task, config), claims held in this process, and a bounded list of dead
 * letters. Gone with the process, like the Tasks. Everything handed in or out
 * is copied, as the Tasks are.
 */
export class MemoryPushStore implements PushStore {
  private readonly configs = new Map<string, Map<string, { json: string; bytes: number }>>()
  private configBytesHeld = 0
  /** Every undelivered notification by key, in the order enqueued (oldest first). */
  private readonly items = new Map<string, StoredItem>()
  /** Channels with notifications waiting; claimed ones move to the back, so every channel gets its turn. */
  private readonly channels = new Map<string, Channel>()
  private readonly seqs = new Map<string, number>()
  private readonly outboxBytesOf = new Map<Owner, number>()
  private outboxBytes = 0
  private readonly dead: Array<{ letter: Omit<PushDeadLetter, "event">; event: StoredEvent }> = []
  private deadBytes = 0
  private readonly limits: Required<MemoryPushOptions>

  constructor(
    private readonly host: MemoryPushHost,
    opts: MemoryPushOptions = {},
  ) {
    for (const name of ["maxConfigBytes", "maxOutboxBytes", "maxDeadLetters", "maxDeadLetterBytes"] as const) {
      const value = opts[name]
      if (value !== undefined && !(Number.isInteger(value) && value > 0)) throw new TypeError(`InMemoryTaskStore: opts.push.${name} should be a positive integer`)
    }
    const maxOutboxBytes = opts.maxOutboxBytes ?? Math.ceil(host.maxBytes / 4)
    this.limits = {
      maxConfigBytes: opts.maxConfigBytes ?? Math.ceil(host.maxBytes / 8),
      maxOutboxBytes,
      maxDeadLetters: opts.maxDeadLetters ?? DEFAULT_MAX_DEAD_LETTERS,
      maxDeadLetterBytes: opts.maxDeadLetterBytes ?? Math.ceil(maxOutboxBytes / 4),
    }
  }

  /** The bounds in force, defaults applied. */
  get bounds(): Readonly<Required<MemoryPushOptions>> {
    return this.limits
  }

  /** What the capability holds, in counted bytes. */
  get usage(): { configs: number; configBytes: number; outbox: number; outboxBytes: number; deadLetters: number; deadLetterBytes: number } {
    let configs = 0
    for (const ofTask of this.configs.values()) configs += ofTask.size
    return {
      configs,
      configBytes: this.configBytesHeld,
      outbox: this.items.size,
      outboxBytes: this.outboxBytes,
      deadLetters: this.dead.length,
      deadLetterBytes: this.deadBytes,
    }
  }

  async oldestPendingAt(): Promise<number | undefined> {
    // The outbox is kept in the order enqueued.
    for (const stored of this.items.values()) return stored.item.enqueuedAt
    return undefined
  }

  async putConfig(config: PushConfigRecord): Promise<void> {
    const json = JSON.stringify(config)
    const bytes = configBytes(config)
    let ofTask = this.configs.get(config.taskId)
    const previous = ofTask?.get(config.id)
    const held = this.configBytesHeld - (previous?.bytes ?? 0) + bytes
    if (held > this.limits.maxConfigBytes) {
      throw new Error(
        `InMemoryTaskStore is at capacity for push configs: this one would pass push.maxConfigBytes (${this.limits.maxConfigBytes} bytes); ` +
          "delete configs or Tasks no longer needed, or raise opts.push.maxConfigBytes",
      )
    }
    if (ofTask === undefined) this.configs.set(config.taskId, (ofTask = new Map<string, { json: string; bytes: number }>()))
    ofTask.set(config.id, { json, bytes })
    this.configBytesHeld = held
  }

  async getConfig(taskId: string, id: string): Promise<PushConfigRecord | undefined> {
    const stored = this.configs.get(taskId)?.get(id)
    return stored === undefined ? undefined : (JSON.parse(stored.json) as PushConfigRecord)
  }

  async listConfigs(taskId: string): Promise<PushConfigRecord[]> {
    const ofTask = this.configs.get(taskId)
    if (ofTask === undefined) return []
    return [...ofTask.keys()].sort().map((id) => JSON.parse(ofTask.get(id)!.json) as PushConfigRecord)
  }

  async deleteConfig(taskId: string, id: string): Promise<void> {
    const ofTask = this.configs.get(taskId)
    const stored = ofTask?.get(id)
    if (ofTask === undefined || stored === undefined) return
    ofTask.delete(id)
    if (ofTask.size === 0) this.configs.delete(taskId)
    this.configBytesHeld -= stored.bytes
    this.dropChannel(channelKey(taskId, id))
  }

  async saveWithEvent(task: A2ATask, ...events: PushEvent[]): Promise<number> {
    // One synchronous step: no other call can run between the save and the enqueue.
    const overridden = this.host.save(task)
    if (overridden !== undefined) await overridden
    const ofTask = this.configs.get(task.id)
    if (events.length === 0 || ofTask === undefined) return 0
    const owner = ownerOf(task)
    const now = Date.now()
    const configIds = [...ofTask.keys()].sort()
    for (const given of events) {
      const { event, traceContext } = splitTrace(given)
      const json = JSON.stringify(event)
      const stored: StoredEvent = { json, bytes: textHeapBytes(json) }
      if (traceContext !== undefined) {
        stored.traceContext = traceContext
        stored.bytes += textHeapBytes(traceContext.traceparent) + textHeapBytes(traceContext.tracestate ?? "")
      }
      const seq = (this.seqs.get(task.id) ?? 0) + 1
      this.seqs.set(task.id, seq)
      for (const configId of configIds) {
        const key = randomUUID()
        this.items.set(key, { item: { key, taskId: task.id, configId, seq, attempts: 0, notBefore: now, enqueuedAt: now }, event: stored, owner })
        const channel = channelKey(task.id, configId)
        const held = this.channels.get(channel)
        if (held === undefined) this.channels.set(channel, { keys: [key] })
        else held.keys.push(key)
        this.countOutbox(owner, ITEM_HEAP_BYTES + stored.bytes)
      }
    }
    this.makeRoom(owner)
    return events.length * configIds.length
  }

  async claim(instance: string, limit: number, leaseMs: number, now: number): Promise<PushClaim[]> {
    const claims: PushClaim[] = []
    const taken: Array<[string, Channel]> = []
    for (const [name, channel] of this.channels) {
      if (claims.length >= limit) break
      if (channel.claim !== undefined && channel.claim.until > now) continue
      const stored = this.items.get(channel.keys[0])!
      if (stored.item.notBefore > now) continue
      const config = this.configs.get(stored.item.taskId)?.get(stored.item.configId)
      if (config === undefined) continue
      const token = `${instance} ${randomUUID()}`
      channel.claim = { token, until: now + leaseMs }
      claims.push({ item: handedOut(stored.item, stored.event), config: JSON.parse(config.json) as PushConfigRecord, token })
      taken.push([name, channel])
    }
    for (const [name, channel] of taken) {
      this.channels.delete(name)
      this.channels.set(name, channel)
    }
    return claims
  }

  async ack(claim: PushClaim): Promise<void> {
    // Delivered is delivered, even on a claim whose lease ran out: the notification is not sent again.
    const name = channelKey(claim.item.taskId, claim.item.configId)
    const channel = this.channels.get(name)
    if (channel?.claim?.token === claim.token) channel.claim = undefined
    this.removeItem(claim.item.key)
  }

  async retryLater(claim: PushClaim, notBefore: number, error: string): Promise<void> {
    const channel = this.heldChannel(claim)
    const stored = this.items.get(claim.item.key)
    if (channel === undefined || stored === undefined) return
    stored.item = { ...stored.item, attempts: stored.item.attempts + 1, notBefore, lastError: error }
    channel.claim = undefined
  }

  async deadLetter(claim: PushClaim, reason: string, attempts?: number): Promise<void> {
    if (this.heldChannel(claim) === undefined) return
    this.bury(claim.item.key, reason, attempts)
  }

  async listDeadLetters(limit: number): Promise<PushDeadLetter[]> {
    if (!(limit > 0)) return []
    return this.dead
      .slice(-limit)
      .reverse()
      .map(({ letter, event }) => handedOut(letter, event))
  }

  /** The Task is gone (deleted, swept, dropped for room): so are its configs and notifications. */
  forgetTask(taskId: string): void {
    const ofTask = this.configs.get(taskId)
    if (ofTask !== undefined) {
      for (const [id, stored] of ofTask) {
        this.configBytesHeld -= stored.bytes
        this.dropChannel(channelKey(taskId, id))
      }
      this.configs.delete(taskId)
    }
    this.seqs.delete(taskId)
  }

  /** The channel of a claim still held under it (its lease may have run out, but nobody took it since). */
  private heldChannel(claim: PushClaim): Channel | undefined {
    const channel = this.channels.get(channelKey(claim.item.taskId, claim.item.configId))
    return channel?.claim?.token === claim.token && channel.keys[0] === claim.item.key ? channel : undefined
  }

  private countOutbox(owner: Owner, bytes: number): void {
    this.outboxBytes += bytes
    const own = (this.outboxBytesOf.get(owner) ?? 0) + bytes
    if (own === 0) this.outboxBytesOf.delete(owner)
    else this.outboxBytesOf.set(owner, own)
  }

  /** Removes a notification from the outbox (and its channel, when it was the last). */
  private removeItem(key: string): StoredItem | undefined {
    const stored = this.items.get(key)
    if (stored === undefined) return undefined
    this.items.delete(key)
    this.countOutbox(stored.owner, -(ITEM_HEAP_BYTES + stored.event.bytes))
    const name = channelKey(stored.item.taskId, stored.item.configId)
    const channel = this.channels.get(name)!
    const at = channel.keys.indexOf(key)
    channel.keys.splice(at, 1)
    if (at === 0) channel.claim = undefined
    if (channel.keys.length === 0) this.channels.delete(name)
    return stored
  }

  private dropChannel(name: string): void {
    const channel = this.channels.get(name)
    if (channel === undefined) return
    for (const key of [...channel.keys]) this.removeItem(key)
  }

  /** Moves a notification to the dead letters, dropping the oldest letters past their bounds. */
  private bury(key: string, reason: string, attempts?: number): void {
    const stored = this.removeItem(key)
    if (stored === undefined) return
    this.dead.push({ letter: { ...stored.item, attempts: attemptsOf(attempts, stored.item), reason, deadAt: Date.now() }, event: stored.event })
    this.deadBytes += ITEM_HEAP_BYTES + stored.event.bytes
    while (this.dead.length > this.limits.maxDeadLetters || (this.deadBytes > this.limits.maxDeadLetterBytes && this.dead.length > 0)) {
      const oldest = this.dead.shift()!
      this.deadBytes -= ITEM_HEAP_BYTES + oldest.event.bytes
    }
  }

  /**
   * Past the outbox bounds, the oldest notifications go to the dead letters:
   * the saving owner's past its half, the heaviest owner's past the total.
   * Never one being sent (its channel's claimed head): its channel's next
   * would be handed out while it is still under way. Those few (at most one
   * per channel) may keep the outbox over its bound until they settle.
   */
  private makeRoom(saver: Owner): void {
    const { maxOutboxBytes } = this.limits
    const reason = `outbox full: undelivered notifications passed push.maxOutboxBytes (${maxOutboxBytes} bytes) in InMemoryTaskStore`
    const now = Date.now()
    while ((this.outboxBytesOf.get(saver) ?? 0) > maxOutboxBytes / 2) {
      const oldest = this.oldestOf(saver, now)
      if (oldest === undefined) break
      this.bury(oldest, reason)
    }
    const spared = new Set<Owner>()
    while (this.outboxBytes > maxOutboxBytes) {
      let heaviest: Owner | undefined
      for (const [owner, bytes] of this.outboxBytesOf) {
        if (!spared.has(owner) && (heaviest === undefined || bytes > (this.outboxBytesOf.get(heaviest) ?? 0))) heaviest = owner
      }
      if (heaviest === undefined) break
      const oldest = this.oldestOf(heaviest, now)
      if (oldest === undefined) spared.add(heaviest)
      else this.bury(oldest, reason)
    }
  }

  /** The owner's oldest notification not being sent now. */
  private oldestOf(owner: Owner, now: number): string | undefined {
    for (const [key, stored] of this.items) if (stored.owner === owner && !this.isBeingSent(key, stored, now)) return key
    return undefined
  }

  /** Whether the notification is its channel's head, claimed under a lease that has not run out. */
  private isBeingSent(key: string, stored: StoredItem, now: number): boolean {
    const channel = this.channels.get(channelKey(stored.item.taskId, stored.item.configId))
    return channel?.keys[0] === key && channel.claim !== undefined && channel.claim.until > now
  }
}
