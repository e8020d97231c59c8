import { randomUUID } from "node:crypto"
import { pushSeqOf, pushWriterOf } from "../../internals.js"
import type { A2ATask } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { ABANDONED_PUSH_ITEM_MS, assertClaimArgs, assertPushConfig, deadLetterOf, newOutboxItem, padded, retried } from "../push-records.js"
import type { PushClaim, PushConfigRecord, PushDeadLetter, PushEvent, PushOutboxItem, PushStore } from "../push-store.js"
import { assertTaskId } from "../task-checks.js"
import { isApiError, WRONG_LAST_SEQUENCE } from "./api.js"

/**
 * NatsTaskStore's push capability, in a KV bucket of its own
 * (`<bucket>_push`, history 1), keys made of the Task's key T and the
 * config id's key C (the same encoding as Task ids):
 *
 * - `c.T`: the Task's configs, one JSON list, changed by compare-and-set;
 *   it stays (maybe empty) while the Task has any push data, so deleting a
 *   Task without it costs one read;
 * - `o.T.C.<seq>.<writer>`: a notification to config C, written by the save
 *   attempt `writer` (two saves of the Task at once each write their own;
 *   the Task names the one that landed, and the other's are removed);
 * - `l.T.C`: the lease on that config's channel;
 * - `r.T.C.<enqueuedAt>.<seq>.<writer>`: the retry mark of that notification,
 *   written by its first retryLater, removed when it is settled (see
 *   oldestPendingAt);
 * - `d.T.<deadAt>.<key>`: a dead letter.
 *
 * The Task's save is the commit marker: the notifications are written
 * first, then the Task is saved (compare-and-set, as every save) carrying
 * `pushSeq` = their seq. A notification above the stored Task's pushSeq is
 * not deliverable: a save under way, or one that never landed (the next
 * save with an event writes its own over it; a claim removes it once it is
 * older than any save takes). Leases are taken by compare-and-set on the
 * lock key, and judged by the server's clock (its time of the lock's write).
 * Delivered notifications, and those never to be sent, are purged from the
 * stream, leaving no marker. Keys are listed from the stream's info (the
 * host's keys()), a snapshot that a purge meanwhile cannot stall.
 */

/** What the push bucket needs of its NatsTaskStore. */
export interface NatsPushHost {
  readonly bucket: string
  readonly report: ReportError
  kv(): Promise<NatsPushKv>
  /** Removes every message of these subjects of the push bucket's stream (no marker left). */
  purgeSubjects(filters: string[]): Promise<void>
  /** Removes the key's message of this revision (no marker left), unless the key was written since. */
  purgeRevision(key: string, revision: number): Promise<void>
  /** The keys matching `filter` with a message in the bucket's stream, a marker's included: a snapshot, in no order. */
  keys(filter: string): Promise<string[]>
  /** The stored Task, or undefined. */
  readTask(id: string): Promise<A2ATask | undefined>
  saveWithEvent(task: A2ATask, events: readonly PushEvent[]): Promise<number>
  /** Runs `write` in the Task's write order. */
  inOrder<T>(id: string, write: () => Promise<T>): Promise<T>
  /** The key of a Task or config id (natsKey). */
  keyOf(id: string): string
  /** Calls `onPut` for every key matching `filter` written from now on; the function it gives stops it. */
  watchPuts(filter: string, onPut: () => void): Promise<() => Promise<void>>
  /** The bucket's first message at or after stream sequence `seq` whose key matches `filter`; undefined when there is none. */
  nextMessage(filter: string, seq: number): Promise<NatsPushMessage | undefined>
}

/** One message of the push bucket's stream, as a read by sequence gives it: the last write of its key, or a marker. */
export interface NatsPushMessage {
  /** Its stream sequence: the order of the last writes of the keys. */
  seq: number
  key: string
  operation: "PUT" | "DEL" | "PURGE"
  /** The server's time of the write. */
  time: Date
  string(): string
}

export interface NatsPushEntry {
  key: string
  operation: "PUT" | "DEL" | "PURGE"
  revision: number
  created: Date
  string(): string
}

export interface NatsPushKv {
  get(key: string, opts?: { revision: number }): Promise<NatsPushEntry | null>
  put(key: string, value: Uint8Array, opts?: { previousSeq: number }): Promise<number>
  purge(key: string, opts?: { previousSeq: number }): Promise<void>
}

interface Lock {
  instance: string
  token: string
  leaseMs: number
}

/** Tries of one compare-and-set against other writers. */
const MAX_CAS_ATTEMPTS = 10
const CLOCK_KEY = "clock"
const CLOCK_RECHECK_MS = 60_000
const STORE = "NatsTaskStore"
/** Outbox messages oldestPendingAt reads in stream order past those not pending (saves under way or never landed, purge markers). */
const MAX_OLDEST_STEPS = 8

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))

export class NatsPushStore implements PushStore {
  /** Server clock minus ours, in ms, as last measured. */
  private clockOffsetMs: number | undefined
  private clockMeasuredAt = 0

  constructor(private readonly host: NatsPushHost) {}

  private configKey(taskId: string): string {
    return `c.${this.host.keyOf(taskId)}`
  }

  async putConfig(config: PushConfigRecord): Promise<void> {
    assertPushConfig(config, STORE)
    const copy = JSON.parse(JSON.stringify(config)) as PushConfigRecord
    await this.host.inOrder(config.taskId, async () => {
      await this.changeConfigs(config.taskId, (configs) => [...configs.filter((c) => c.id !== copy.id), copy])
    })
  }

  async getConfig(taskId: string, id: string): Promise<PushConfigRecord | undefined> {
    return (await this.listConfigs(taskId)).find((config) => config.id === id)
  }

  async listConfigs(taskId: string): Promise<PushConfigRecord[]> {
    assertTaskId(taskId)
    return (await this.configsOf(taskId)) ?? []
  }

  /** The Task's configs, ordered by id; undefined when it never had any. */
  async configsOf(taskId: string): Promise<PushConfigRecord[] | undefined> {
    const kv = await this.host.kv()
    const entry = await kv.get(this.configKey(taskId))
    return entry?.operation === "PUT" ? configsIn(entry) : undefined
  }

  async deleteConfig(taskId: string, id: string): Promise<void> {
    assertTaskId(taskId)
    await this.host.inOrder(taskId, async () => {
      const found = await this.configsOf(taskId)
      if (found === undefined || !found.some((config) => config.id === id)) return
      await this.changeConfigs(taskId, (configs) => configs.filter((config) => config.id !== id))
      const channel = `${this.host.keyOf(taskId)}.${this.host.keyOf(String(id))}`
      await this.host.purgeSubjects([`o.${channel}.>`, `l.${channel}`, `r.${channel}.>`])
    })
  }

  /** Compare-and-set of the Task's config list. */
  private async changeConfigs(taskId: string, change: (configs: PushConfigRecord[]) => PushConfigRecord[]): Promise<void> {
    const kv = await this.host.kv()
    const key = this.configKey(taskId)
    for (let attempt = 1; ; attempt++) {
      const entry = await kv.get(key)
      const configs = entry?.operation === "PUT" ? configsIn(entry) : []
      const next = change(configs).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      try {
        await kv.put(key, encode(next), { previousSeq: entry?.revision ?? 0 })
        return
      } catch (err) {
        if (!isApiError(err, WRONG_LAST_SEQUENCE) || attempt >= MAX_CAS_ATTEMPTS) throw err
      }
    }
  }

  saveWithEvent(task: A2ATask, ...events: PushEvent[]): Promise<number> {
    return this.host.saveWithEvent(task, events)
  }

  /** Writes the event's notification for each config at `seq`, as save attempt `writer`, before the Task's save; resolves with their keys. */
  async enqueue(taskId: string, configs: PushConfigRecord[], seq: number, event: string, now: number, writer: string): Promise<string[]> {
    const kv = await this.host.kv()
    const task = this.host.keyOf(taskId)
    const keys = configs.map((config) => `o.${task}.${this.host.keyOf(config.id)}.${padded(seq)}.${writer}`)
    await Promise.all(configs.map((config, i) => kv.put(keys[i], encode(newOutboxItem(taskId, config.id, seq, JSON.parse(event) as PushEvent, now)))))
    return keys
  }

  /** Removes the notifications of a save attempt that did not land (its compare-and-set lost), so no claim finds them. */
  async discard(keys: string[]): Promise<void> {
    if (keys.length > 0) await this.host.purgeSubjects(keys)
  }

  /** Removes a deleted Task's push data; one read when it has none. */
  async removeTask(taskId: string): Promise<void> {
    const kv = await this.host.kv()
    if ((await kv.get(this.configKey(taskId))) === null) return
    const task = this.host.keyOf(taskId)
    await this.host.purgeSubjects([`*.${task}`, `*.${task}.>`])
  }

  async claim(instance: string, limit: number, leaseMs: number, now: number): Promise<PushClaim[]> {
    assertClaimArgs(STORE, instance, limit, leaseMs, now)
    if (limit === 0) return []
    const kv = await this.host.kv()
    const serverNow = now + (await this.clockOffset(kv))
    // The head (lowest seq) of each channel, with every key of that seq: keys come in any order.
    const heads = new Map<string, Head>()
    for (const key of await this.host.keys("o.>")) {
      const parts = key.split(".")
      if (parts.length !== 5) continue
      const seq = Number(parts[3])
      const channel = `${parts[1]}.${parts[2]}`
      const head = heads.get(channel)
      if (head === undefined || seq < head.seq) heads.set(channel, { keys: [{ key, writer: parts[4] }], seq, task: parts[1] })
      else if (seq === head.seq) head.keys.push({ key, writer: parts[4] })
    }
    const committed = new Map<string, Committed>()
    const claims: PushClaim[] = []
    for (const [channel, head] of [...heads].sort((a, b) => a[1].seq - b[1].seq)) {
      if (claims.length >= limit) break
      try {
        const claim = await this.claimHead(kv, channel, head, committed, instance, leaseMs, now, serverNow)
        if (claim !== undefined) claims.push(claim)
      } catch (err) {
        this.host.report(err, "push")
      }
    }
    return claims
  }

  /** The channel's first notification that is deliverable, due and not held, now held by `instance`. */
  private async claimHead(
    kv: NatsPushKv,
    channel: string,
    head: Head,
    committed: Map<string, Committed>,
    instance: string,
    leaseMs: number,
    now: number,
    serverNow: number,
  ): Promise<PushClaim | undefined> {
    for (const { key, writer } of head.keys.sort((a, b) => (a.writer < b.writer ? -1 : a.writer > b.writer ? 1 : 0))) {
      const entry = await kv.get(key)
      if (entry === null) continue
      if (entry.operation !== "PUT") {
        // A marker (an older version purged outbox keys so): removed, so the channel's next notification heads it.
        await this.forget(key, entry)
        continue
      }
      const item = JSON.parse(entry.string()) as PushOutboxItem
      let landed = committed.get(head.task)
      if (landed === undefined) {
        const task = await this.host.readTask(item.taskId)
        landed = { seq: pushSeqOf(task), writer: pushWriterOf(task) }
        committed.set(head.task, landed)
      }
      const fate = fateOf(item.seq, writer, landed)
      if (fate === "unsaved") {
        // Its save has not landed: under way, or never to land once it is older than any save takes.
        if (serverNow - entry.created.getTime() > ABANDONED_PUSH_ITEM_MS) await this.forget(key, entry)
        continue
      }
      if (fate === "lost") {
        // Written by a save of the same seq that lost to the one that landed (it saves again, later): never sent.
        await this.forget(key, entry)
        continue
      }
      return this.claimItem(kv, channel, key, item, instance, leaseMs, now, serverNow)
    }
    return undefined
  }

  /** Removes a notification that will never be sent, as read (a later write of its key stays), leaving no marker. */
  private async forget(key: string, entry: NatsPushEntry): Promise<void> {
    await this.host.purgeRevision(key, entry.revision).catch((err: unknown) => this.host.report(err, "push"))
  }

  private async claimItem(
    kv: NatsPushKv,
    channel: string,
    key: string,
    item: PushOutboxItem,
    instance: string,
    leaseMs: number,
    now: number,
    serverNow: number,
  ): Promise<PushClaim | undefined> {
    if (item.notBefore > now) return undefined
    const lockKey = `l.${channel}`
    const held = await kv.get(lockKey)
    if (held?.operation === "PUT") {
      const lock = parseLock(held)
      if (lock !== undefined && held.created.getTime() + lock.leaseMs > serverNow) return undefined
    }
    const token = randomUUID()
    try {
      await kv.put(lockKey, encode({ instance, token, leaseMs } satisfies Lock), { previousSeq: held?.revision ?? 0 })
    } catch (err) {
      if (isApiError(err, WRONG_LAST_SEQUENCE)) return undefined // another instance took it first
      throw err
    }
    const claim: PushClaim = { item, config: undefined as unknown as PushConfigRecord, token: `${key}|${lockKey}|${token}` }
    // Read again under the lease: the holder before may have settled it meanwhile.
    const current = await kv.get(key)
    const config = (await this.configsOf(item.taskId))?.find((c) => c.id === item.configId)
    if (current?.operation !== "PUT" || config === undefined) {
      await this.release(claim)
      return undefined
    }
    const fresh = JSON.parse(current.string()) as PushOutboxItem
    if (fresh.notBefore > now) {
      await this.release(claim)
      return undefined
    }
    return { ...claim, item: fresh, config }
  }

  async ack(claim: PushClaim): Promise<void> {
    const { itemKey } = placeOf(claim)
    // Delivered is delivered, whoever holds the lease now; removed from the stream, so no marker is left per notification.
    await this.host.purgeSubjects(this.settledKeys(claim, itemKey))
    await this.release(claim)
  }

  async retryLater(claim: PushClaim, notBefore: number, error: string): Promise<void> {
    const { itemKey } = placeOf(claim)
    if ((await this.heldLock(claim)) === undefined) return
    const kv = await this.host.kv()
    // The rewrite moves the notification to the stream's end: its mark keeps its place for oldestPendingAt (the first retry writes it, before the move).
    if (claim.item.attempts === 0) await kv.put(retryMarkOf(itemKey, claim.item.enqueuedAt), new Uint8Array(0))
    await kv.put(itemKey, encode(retried(claim.item, notBefore, String(error))))
    await this.release(claim)
  }

  async deadLetter(claim: PushClaim, reason: string, attempts?: number): Promise<void> {
    const { itemKey } = placeOf(claim)
    if ((await this.heldLock(claim)) === undefined) return
    const kv = await this.host.kv()
    const dead = deadLetterOf(claim.item, String(reason), Date.now(), attempts)
    await kv.put(`d.${this.host.keyOf(dead.taskId)}.${padded(dead.deadAt)}.${this.host.keyOf(dead.key)}`, encode(dead))
    await this.host.purgeSubjects(this.settledKeys(claim, itemKey))
    await this.release(claim)
  }

  /** What a settled claim removes: its notification, and its retry mark if it was retried (the mark after it: a mark left alone is found stale, never a retried notification unmarked). */
  private settledKeys(claim: PushClaim, itemKey: string): string[] {
    return claim.item.attempts > 0 ? [itemKey, retryMarkOf(itemKey, claim.item.enqueuedAt)] : [itemKey]
  }

  /**
   * When the oldest notification still in the outbox was enqueued. The
   * stream keeps the outbox in the order of its last writes, which is the
   * order enqueued but for retried notifications (retryLater writes them
   * again, at the end): so it is the earlier of the outbox's first pending
   * notification in stream order (one read by sequence, and one read of its
   * Task to see its save landed) and the oldest retry mark (a scan of the
   * `r.` keys: as many as notifications being retried, the outbox's other
   * keys are not read; a mark whose notification is gone is removed).
   * Past MAX_OLDEST_STEPS outbox messages that are not pending it stops,
   * and answers with the last one's time: no later notification is older,
   * so the age reported is at most too high, never too low.
   * Enqueue times are the enqueuing servers' clocks, stream order the NATS
   * server's: with their clocks apart, the answer is off by as much.
   */
  async oldestPendingAt(): Promise<number | undefined> {
    const [first, retried] = await Promise.all([this.firstPendingAt(), this.oldestRetryMark()])
    if (first === undefined || retried === undefined) return first ?? retried
    return Math.min(first, retried)
  }

  /** The outbox's first notification in stream order whose save landed: when it was enqueued. */
  private async firstPendingAt(): Promise<number | undefined> {
    let seq = 1
    for (let step = 1; ; step++) {
      const message = await this.host.nextMessage("o.>", seq)
      if (message === undefined) return undefined
      const parts = message.key.split(".")
      if (message.operation === "PUT" && parts.length === 5) {
        const item = JSON.parse(message.string()) as PushOutboxItem
        const task = await this.host.readTask(item.taskId)
        if (fateOf(item.seq, parts[4], { seq: pushSeqOf(task), writer: pushWriterOf(task) }) === "landed") return item.enqueuedAt
      }
      if (step >= MAX_OLDEST_STEPS) return message.time.getTime() - (await this.clockOffset(await this.host.kv()))
      seq = message.seq + 1
    }
  }

  /** The enqueue time of the oldest retried notification still in the outbox, by its mark. */
  private async oldestRetryMark(): Promise<number | undefined> {
    const kv = await this.host.kv()
    const marks: Array<{ key: string; itemKey: string; enqueuedAt: number }> = []
    for (const key of await this.host.keys("r.>")) {
      const [, task, config, at, seq, writer, ...rest] = key.split(".")
      if (writer === undefined || rest.length > 0) continue
      marks.push({ key, itemKey: `o.${task}.${config}.${seq}.${writer}`, enqueuedAt: Number(at) })
    }
    marks.sort((a, b) => a.enqueuedAt - b.enqueuedAt)
    for (const mark of marks) {
      if ((await kv.get(mark.itemKey))?.operation === "PUT") return mark.enqueuedAt
      // Its notification was settled without it (a stop between the two removals, or a config or Task deleted).
      await this.host.purgeSubjects([mark.key])
    }
    return undefined
  }

  async listDeadLetters(limit: number): Promise<PushDeadLetter[]> {
    if (!(Number.isInteger(limit) && limit >= 0)) throw new RangeError(`${STORE}.push.listDeadLetters: limit should be a whole number >= 0`)
    const kv = await this.host.kv()
    const keys = await this.host.keys("d.>")
    // Newest first: by deadAt, then by key.
    const order = (key: string) => key.split(".").slice(2).join(".")
    keys.sort((a, b) => (order(a) < order(b) ? 1 : order(a) > order(b) ? -1 : 0))
    const letters: PushDeadLetter[] = []
    for (const key of keys) {
      if (letters.length >= limit) break
      const entry = await kv.get(key)
      if (entry?.operation === "PUT") letters.push(JSON.parse(entry.string()) as PushDeadLetter)
    }
    return letters
  }

  /** The claim's lock entry while it is still this claim's. */
  private async heldLock(claim: PushClaim): Promise<NatsPushEntry | undefined> {
    const { lockKey, token } = placeOf(claim)
    const kv = await this.host.kv()
    const entry = await kv.get(lockKey)
    return entry?.operation === "PUT" && parseLock(entry)?.token === token ? entry : undefined
  }

  /** Ends the claim's lease, unless another instance holds the channel by now. */
  private async release(claim: PushClaim): Promise<void> {
    const entry = await this.heldLock(claim)
    if (entry === undefined) return
    const kv = await this.host.kv()
    await kv.purge(placeOf(claim).lockKey, { previousSeq: entry.revision }).catch((err: unknown) => {
      if (!isApiError(err, WRONG_LAST_SEQUENCE)) throw err
    })
  }

  /** Calls `onDue` whenever any store enqueues or puts back a notification (a KV watch of the outbox keys). */
  watchOutbox(onDue: () => void): Promise<() => Promise<void>> {
    if (typeof onDue !== "function") return Promise.reject(new TypeError(`${STORE}.push.watchOutbox needs a function`))
    return this.host.watchPuts("o.>", onDue)
  }

  /** Server clock minus ours: leases are judged by the server's time of their write. */
  private async clockOffset(kv: NatsPushKv): Promise<number> {
    if (this.clockOffsetMs === undefined || Date.now() - this.clockMeasuredAt > CLOCK_RECHECK_MS) {
      const sent = Date.now()
      const revision = await kv.put(CLOCK_KEY, new Uint8Array(0))
      const acked = Date.now()
      const entry = await kv.get(CLOCK_KEY, { revision })
      if (entry !== null) {
        this.clockOffsetMs = entry.created.getTime() - (sent + acked) / 2
        this.clockMeasuredAt = acked
      }
    }
    return this.clockOffsetMs ?? 0
  }
}

/** A channel's lowest seq in the outbox, with every notification of it (more than one when two saves wrote it at once). */
interface Head {
  seq: number
  task: string
  keys: Array<{ key: string; writer: string }>
}

/** What a Task's stored save committed: its pushSeq, and the save attempt that wrote it. */
interface Committed {
  seq: number
  writer: string | undefined
}

/**
 * Whether the notification at `seq` written by save attempt `writer` is part
 * of its Task: landed (deliverable), unsaved (its save is under way or never
 * landed: above the Task's pushSeq), or lost (a save of the same seq that
 * lost to the one that landed).
 */
function fateOf(seq: number, writer: string, landed: Committed): "landed" | "unsaved" | "lost" {
  if (seq > landed.seq) return "unsaved"
  if (seq === landed.seq && landed.writer !== undefined && writer !== landed.writer) return "lost"
  return "landed"
}

/** The retry mark of the notification under `itemKey` (`o.T.C.<seq>.<writer>`): `r.T.C.<enqueuedAt>.<seq>.<writer>`, its time in its key, so a scan of keys orders the marks. */
function retryMarkOf(itemKey: string, enqueuedAt: number): string {
  const [, task, config, seq, writer] = itemKey.split(".")
  return `r.${task}.${config}.${padded(enqueuedAt)}.${seq}.${writer}`
}

function placeOf(claim: PushClaim): { itemKey: string; lockKey: string; token: string } {
  const [itemKey, lockKey, token, ...rest] = String(claim?.token).split("|")
  if (rest.length > 0 || token === undefined || !itemKey.startsWith("o.") || !lockKey.startsWith("l.")) {
    throw new TypeError(`${STORE}.push: the claim's token is not one this store gave`)
  }
  return { itemKey, lockKey, token }
}

function configsIn(entry: NatsPushEntry): PushConfigRecord[] {
  const value: unknown = JSON.parse(entry.string())
  return Array.isArray(value) ? (value as PushConfigRecord[]) : []
}

function parseLock(entry: NatsPushEntry): Lock | undefined {
  try {
    const lock = JSON.parse(entry.string()) as Lock
    return typeof lock?.token === "string" && typeof lock.leaseMs === "number" ? lock : undefined
  } catch {
    return undefined
  }
}
