import { randomBytes } from "node:crypto"
import { setTimeout as sleep } from "node:timers/promises"
import type { A2ATask } from "../../types.js"
import { TERMINAL_STATES } from "../../types.js"
import { errorReporter, type ReportError } from "../background-errors.js"
import { checkQuery, pageOfTasks, type TaskPage, type TaskQuery } from "../list.js"
import { OpenOnce } from "../open-once.js"
import { isExpired, retentionSweeper, type RetentionSweeper } from "../retention.js"
import { assertTask, parseStoredTask } from "../task-checks.js"
import { TaskConflictError, type LeaseBook, type TaskStore } from "../task-store.js"
import { WriteOrder } from "../write-order.js"
import { pushSeqOf, pushWriterOf, withPushSeq } from "../../internals.js"
import { NatsPushStore } from "./push.js"
import { NatsPushBucket } from "./push-bucket.js"
import { isApiError, nextMessage, WRONG_LAST_SEQUENCE } from "./api.js"
import { NatsEventLog, openEventStream, type NatsEventStream } from "./events.js"
import type { EventLog } from "../../streams/event-log.js"
import { eventTexts } from "../push-records.js"
import type { PushEvent, PushStore } from "../push-store.js"
import { loadNatsDriver, type NatsConnection, type NatsDriver, type NatsKv, type NatsKvEntry } from "./nats-driver.js"
import { idFromNatsKey, natsKey } from "./keys.js"
import { natsStoreSettings, type NatsTaskStoreOptions } from "./options.js"
import { closedError, messageOf, quote, withContext } from "./errors.js"
import { LEASE_BUCKET_MAX_AGE_MS, natsLeaseBook } from "./leases.js"
import { lastValues } from "./last-values.js"

export type { NatsTaskStoreOptions } from "./options.js"

/** The connection and what is opened with it. */
interface Connection {
  driver: NatsDriver
  nc: NatsConnection
  tasks: NatsKv
}

/** Tries of one save against other writers before it gives up (2-3 s of backing off in all). */
const MAX_SAVE_ATTEMPTS = 10
/** What a message may carry when the server does not say: NATS's default max_payload. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024

/**
 * Tasks in a NATS JetStream KV bucket, shared by every server that points
 * at it: one key per Task id, the Task as JSON.
 *
 * - Saves are compare-and-set on the key's revision: a save reads the entry,
 *   refuses to replace a terminal Task (TaskConflictError), and writes only
 *   if no one wrote in between, else reads again and retries. Every
 *   acknowledged save is its own revision; none is lost to a concurrent one.
 *   Saves and deletes of one id through one store take effect in call order.
 * - `watch` tells of every save and delete, by any server, as it happens.
 * - `leases` live in a second bucket and are judged by the server's clock.
 * - `list` reads every Task: O(n) per call, fine for thousands of Tasks.
 * - `delete` purges the key: no value of the Task is kept, whatever the
 *   bucket's history; a small marker tells readers and watchers it is gone.
 * - `events` (the Tasks' stream events) live in a stream of their own
 *   (see NatsEventLog); `delete` and retention purge a Task's with it.
 * - With `opts.retention`, a sweep reads the keys in the order of their
 *   last write, headers only, up to the first written since the cutoff:
 *   only a Task last written before it can be expired (a terminal Task is
 *   never written again), so a sweep reads what it deletes and the unfinished
 *   Tasks idle since the cutoff (each again on every sweep), not the bucket.
 *   Each such Task is read and, if `isExpired`, purged on the condition
 *   that it is still the revision read. So a Task's age counts from the
 *   later of its status time and its save: one saved with an old status
 *   (an import) is kept a TTL from its save. Delete markers older than the
 *   TTL go too, so deleted Tasks leave nothing behind for good.
 *
 * The `nats` package is imported and the connection made on first use, so
 * constructing a store does no I/O and needs nothing installed.
 */
export class NatsTaskStore implements TaskStore {
  readonly bucket: string
  readonly leaseBucket: string
  readonly eventStream: string
  /** The server URL without credentials, fit for logs. */
  readonly server: string
  /** An ES private field: it stays out of JSON.stringify and util.inspect of the store. */
  readonly #credentials: { user?: string; pass?: string; token?: string }
  private readonly driverModule: string
  private readonly report: ReportError
  /** The connection and the task bucket; forgotten when the connection closes without close(). */
  private readonly connection: OpenOnce<Connection>
  /** The lease bucket on the current connection. */
  private leaseKv: OpenOnce<NatsKv>
  /** The push bucket, `<bucket>_push`, on the current connection. */
  private readonly pushBucket: NatsPushBucket
  /** Push configs and the outbox, in `<bucket>_push` (see NatsPushStore). */
  readonly push: PushStore
  private readonly pushBook: NatsPushStore
  /** The Tasks' stream events, in the stream `eventStream` (see NatsEventLog). */
  readonly events: EventLog
  private readonly eventLog: NatsEventLog
  /** The event stream on the current connection. */
  private eventStreamReady: OpenOnce<NatsEventStream>
  private readonly writes = new WriteOrder()
  private readonly retention: RetentionSweeper | undefined
  private closing: Promise<void> | undefined
  /** Judged by the server's clock (see natsLeaseBook). */
  readonly leases: LeaseBook = natsLeaseBook(() => this.leaseBook())

  constructor(url: string, opts: NatsTaskStoreOptions = {}) {
    const { server, credentials, bucket, leaseBucket, eventStream, eventRetentionMs, driverModule } = natsStoreSettings(url, opts)
    this.server = server
    this.#credentials = credentials
    this.bucket = bucket
    this.leaseBucket = leaseBucket
    this.eventStream = eventStream
    this.driverModule = driverModule
    this.report = errorReporter("NatsTaskStore", opts.onError)
    this.retention = retentionSweeper("NatsTaskStore", opts.retention, (cutoff) => this.deleteFinishedBefore(cutoff), this.report)
    this.connection = new OpenOnce(() => this.connect(), closedError)
    this.leaseKv = this.newLeaseKv()
    this.pushBucket = new NatsPushBucket({
      name: `${this.bucket}_push`,
      report: this.report,
      connection: () => this.connection.get(),
      assertOpen: () => this.assertOpen(),
      isClosing: () => this.closing !== undefined,
    })
    this.eventStreamReady = this.newEventStream()
    this.events = this.eventLog = new NatsEventLog({
      name: this.eventStream,
      retentionMs: eventRetentionMs,
      report: this.report,
      assertOpen: () => this.assertOpen(),
      stream: () => this.eventStreamReady.get(),
      keyOf: natsKey,
    })
    this.push = this.pushBook = new NatsPushStore({
      bucket: `${this.bucket}_push`,
      report: this.report,
      kv: () => this.pushBucket.kv(),
      purgeSubjects: (filters) => this.pushBucket.purge(filters),
      purgeRevision: (key, revision) => this.pushBucket.purge([key], revision + 1),
      readTask: (id) => this.get(id),
      saveWithEvent: (task, events) => this.saveWithEvent(task, events),
      inOrder: (id, write) => this.writes.run(id, write),
      keyOf: natsKey,
      watchPuts: (filter, onPut) => this.pushBucket.watchPuts(filter, onPut),
      nextMessage: (filter, seq) => this.pushBucket.nextMessage(filter, seq),
      keys: (filter) => this.pushBucket.keys(filter),
    })
  }

  async get(id: string): Promise<A2ATask | undefined> {
    this.assertOpen()
    const key = natsKey(id)
    const { tasks } = await this.connection.get()
    const entry = await withContext(`read task ${quote(id)}`, () => tasks.get(key))
    return entry?.operation === "PUT" ? this.taskIn(entry, id) : undefined
  }

  async save(task: A2ATask): Promise<void> {
    await this.saveWithEvent(task, [])
  }

  /** save(), and with events their notifications, written before the Task, which carries the last one's seq (see NatsPushStore). */
  private async saveWithEvent(task: A2ATask, events: readonly PushEvent[]): Promise<number> {
    this.assertOpen()
    assertTask(task, "NatsTaskStore")
    const key = natsKey(task.id)
    // Serialized now, so a caller mutating the Task after save() cannot change what is stored.
    const text = JSON.stringify(task)
    const notified = eventTexts(events, task, "NatsTaskStore")
    const given = { seq: pushSeqOf(task), writer: pushWriterOf(task) }
    return this.writes.run(task.id, () => this.write(task.id, key, text, given, notified))
  }

  /**
   * Reads every Task in the bucket: O(n) per call, fine for thousands of
   * Tasks. An entry that cannot be read is left out and reported to onError
   * (operation "list"), so one bad entry does not stop every listing and
   * restart recovery; `get` of its id still rejects with the error.
   */
  async list(query: TaskQuery): Promise<TaskPage> {
    this.assertOpen()
    checkQuery(query)
    const { driver, tasks } = await this.connection.get()
    const latest = new Map<string, NatsKvEntry>()
    await withContext("list tasks", async () => {
      // Updates that arrive while reading replace the values read before them.
      for await (const entry of lastValues(tasks, driver, false, (seq) => this.anyTaskAfter(seq))) {
        if (entry.operation === "PUT") latest.set(entry.key, entry)
        else latest.delete(entry.key)
      }
    })
    const all: A2ATask[] = []
    for (const [key, entry] of latest) {
      const id = idFromNatsKey(key)
      try {
        all.push(this.taskIn(entry, id))
      } catch (err) {
        this.report(err, "list", id)
      }
    }
    return pageOfTasks(all, query)
  }

  async delete(id: string): Promise<void> {
    this.assertOpen()
    const key = natsKey(id)
    return this.writes.run(id, async () => {
      const { tasks } = await this.connection.get()
      // Push data and events first: a crash between leaves a Task without them, never them for a new Task of that id to find.
      await withContext(`delete the push data of task ${quote(id)}`, () => this.pushBook.removeTask(id))
      await withContext(`delete the stream events of task ${quote(id)}`, () => this.eventLog.removeTask(id))
      // A purge, not a delete: a bucket made with more history than ours would keep the Task's values under a delete marker.
      await withContext(`delete task ${quote(id)}`, () => tasks.purge(key))
    })
  }

  /**
   * Calls `onChange(id)` for every save and delete in the bucket from now on,
   * by any server. Only headers travel, not the Tasks. A delete of an id so
   * long its key is a hash cannot be named, and is not reported. A throwing
   * `onChange` is reported to onError and does not stop the watch.
   */
  async watch(onChange: (id: string) => void): Promise<() => Promise<void>> {
    this.assertOpen()
    if (typeof onChange !== "function") throw new TypeError("NatsTaskStore.watch needs a function")
    const { driver, tasks } = await this.connection.get()
    const updates = await withContext("watch tasks", () => tasks.watch({ include: driver.KvWatchInclude.UpdatesOnly, headers_only: true }))
    const done = (async () => {
      try {
        for await (const entry of updates) {
          const id = idFromNatsKey(entry.key) ?? (entry.operation === "PUT" ? await this.idOfHashedKey(tasks, entry.key) : undefined)
          if (id === undefined) continue
          try {
            onChange(id)
          } catch (err) {
            // The watcher's own fault; later changes are still reported.
            this.report(err, "watch", id)
          }
        }
      } catch (err) {
        // The connection closed under the watch: it ends, and watchers fall back to re-reading.
        if (!this.closing) this.report(new Error(`NatsTaskStore's watch ended: ${messageOf(err)}`, { cause: err }), "watch")
      }
    })()
    return async () => {
      updates.stop()
      await done
    }
  }

  /**
   * Connects and opens the task bucket, creating it if it is missing. Every
   * other call does it on first use, so calling it is needed only to learn
   * early that the server cannot be used.
   */
  async open(): Promise<void> {
    this.assertOpen()
    await this.connection.get()
  }

  /**
   * Stops retention sweeps (one under way ends after the Task it is at),
   * waits for the saves and deletes already called, then drains the
   * connection. Later calls are refused. Calling it again is harmless.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.retention?.stop()
      await this.eventLog.stop()
      await this.writes.idle()
      await this.leaseKv.close()
      await this.pushBucket.close()
      await this.eventStreamReady.close()
      const connection = await this.connection.close()
      if (connection && !connection.nc.isClosed()) await connection.nc.drain()
    })()
    return this.closing
  }

  private assertOpen(): void {
    if (this.closing) throw closedError()
  }

  /** One connection and the task bucket, made on first use (see OpenOnce). */
  private async connect(): Promise<Connection> {
    const driver = await loadNatsDriver(this.driverModule)
    let nc: NatsConnection
    try {
      // noAsyncTraces: without it the client builds an Error (a stack trace) for every request and its timer, about
      // a quarter of a server's CPU under SendMessage load; its errors still say what failed, without our call site.
      nc = await driver.connect({ servers: this.server, ...this.#credentials, name: "toolnexus", maxReconnectAttempts: -1, noAsyncTraces: true })
    } catch (err) {
      throw new Error(`NatsTaskStore could not connect to ${this.server}: ${messageOf(err)}`, { cause: err })
    }
    try {
      const tasks = await nc.jetstream().views.kv(this.bucket, { history: 1 })
      const attempt = this.connection.current
      void nc.closed().then((err) => this.lost(attempt, err))
      this.retention?.start()
      this.eventLog.start()
      return { driver, nc, tasks }
    } catch (err) {
      await nc.close().catch(() => {})
      throw new Error(`NatsTaskStore could not open the KV bucket "${this.bucket}" on ${this.server} (does the server run with JetStream?): ${messageOf(err)}`, { cause: err })
    }
  }

  /** A connection that closed without close() (say, the server revoked it): reported, and the next call connects again. */
  private lost(attempt: Promise<Connection> | undefined, err: void | Error): void {
    if (this.closing || attempt === undefined || this.connection.current !== attempt) return
    this.connection.forget(attempt)
    this.leaseKv = this.newLeaseKv()
    this.pushBucket.reconnected()
    this.eventStreamReady = this.newEventStream()
    this.report(err ?? new Error(`NatsTaskStore's connection to ${this.server} closed; the next call connects again`), "connection")
  }

  /** The lease bucket, opened on the first lease call over whatever connection is current. */
  private newLeaseKv(): OpenOnce<NatsKv> {
    return new OpenOnce(async () => {
      const { nc } = await this.connection.get()
      return withContext(`open the KV bucket "${this.leaseBucket}"`, () => nc.jetstream().views.kv(this.leaseBucket, { history: 1, ttl: LEASE_BUCKET_MAX_AGE_MS }))
    }, closedError)
  }

  /** Whether the Tasks bucket's stream holds a message after sequence `seq` (one request). */
  private async anyTaskAfter(seq: number): Promise<boolean> {
    const { nc } = await this.connection.get()
    const { streams } = await nc.jetstreamManager()
    return (await nextMessage(streams, `KV_${this.bucket}`, `$KV.${this.bucket}.>`, seq + 1)) !== undefined
  }

  /** The event log's stream, made ready on first use over whatever connection is current. */
  private newEventStream(): OpenOnce<NatsEventStream> {
    return new OpenOnce(async () => {
      const { driver, nc } = await this.connection.get()
      return withContext(`open the stream "${this.eventStream}"`, async () => {
        const { streams } = await nc.jetstreamManager()
        await openEventStream(streams, this.eventStream)
        return { js: nc.jetstream(), streams, headers: () => driver.headers(), maxPayload: nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD }
      })
    }, closedError)
  }

  /**
   * Compare-and-set on the key's revision, until it lands or the stored
   * Task is terminal. The Task carries the stored pushSeq (and its writer)
   * forward, or, with an event and configs, the next one and this attempt's
   * name, its notifications written first under that name. An attempt that
   * lost the compare-and-set removes its notifications; one cut short leaves
   * them to claims (above the stored pushSeq, or of its seq but not its
   * writer: never sent). Resolves with how many notifications it enqueued.
   */
  private async write(id: string, key: string, text: string, given: { seq: number; writer: string | undefined }, events: readonly string[]): Promise<number> {
    const { tasks } = await this.connection.get()
    // The configs are read beside the Task, so a Task without them costs no extra round trip.
    const configsRead = events.length === 0 ? undefined : withContext(`read the push configs of task ${quote(id)}`, () => this.pushBook.configsOf(id))
    configsRead?.catch(() => {}) // awaited below; a failure rejects the save there
    for (let attempt = 1; ; attempt++) {
      const entry = await withContext(`read task ${quote(id)}`, () => tasks.get(key))
      const configs = await configsRead
      const stored = entry?.operation === "PUT" ? this.taskIn(entry, id) : undefined
      if (stored && TERMINAL_STATES.has(stored.status.state)) throw new TaskConflictError(id, stored)
      let seq = pushSeqOf(stored)
      let writer = pushWriterOf(stored)
      const written: string[] = []
      if (configs !== undefined && configs.length > 0 && events.length > 0) {
        // This attempt's name in its notifications' keys, and in the Task once it lands.
        writer = randomBytes(6).toString("base64url")
        for (const event of events) {
          seq += 1
          const at = seq
          const attempt = writer
          written.push(...(await withContext(`enqueue the push notifications of task ${quote(id)}`, () => this.pushBook.enqueue(id, configs, at, event, Date.now(), attempt))))
        }
      }
      const same = seq === given.seq && writer === given.writer
      const value = new TextEncoder().encode(same ? text : JSON.stringify(withPushSeq(JSON.parse(text) as A2ATask, seq, writer)))
      try {
        // Revision 0 means "no entry yet"; a delete marker has a revision like any entry.
        await tasks.put(key, value, { previousSeq: entry?.revision ?? 0 })
        return written.length
      } catch (err) {
        if (!isApiError(err, WRONG_LAST_SEQUENCE)) throw new Error(`NatsTaskStore could not save task ${quote(id)}: ${messageOf(err)}`, { cause: err })
        // Another save landed first: this attempt's notifications never will (a claim would also find them beside the winner's).
        await this.pushBook.discard(written).catch((discardErr: unknown) => this.report(discardErr, "push", id))
        if (attempt >= MAX_SAVE_ATTEMPTS) {
          throw new Error(`NatsTaskStore could not save task ${quote(id)}: other writers changed it before each of ${attempt} tries`, { cause: err })
        }
      }
      // Someone wrote in between: back off a random while, growing, so two writers stop colliding.
      await sleep(Math.min(1000, 10 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2))
    }
  }

  /** One retention sweep (see the class comment): resolves with how many Tasks it purged. */
  private async deleteFinishedBefore(cutoff: string): Promise<number> {
    const { driver, nc, tasks } = await this.connection.get()
    const cutoffMs = Date.parse(cutoff)
    const written: NatsKvEntry[] = []
    await withContext("read the bucket for retention", async () => {
      // Last values come in stream order, which is the order of their writes.
      for await (const entry of lastValues(tasks, driver, true, (seq) => this.anyTaskAfter(seq))) {
        if (entry.created.getTime() >= cutoffMs) break
        written.push(entry)
      }
    })
    let purged = 0
    for (const { key, operation } of written) {
      if (this.closing) return purged
      if (operation === "PUT" && (await this.purgeIfExpired(tasks, key, cutoff))) purged++
    }
    // Delete markers written before the cutoff (this sweep's own are newer): they have told readers and watchers by now.
    const markers = written.filter((entry) => entry.operation !== "PUT")
    if (markers.length > 0 && !this.closing) {
      const { streams } = await nc.jetstreamManager()
      for (const marker of markers) {
        if (this.closing) break
        // Up to the marker's own sequence: a Task saved under the key since then stays.
        await withContext(`remove the delete marker of key ${quote(marker.key)}`, () =>
          streams.purge(`KV_${this.bucket}`, { filter: `$KV.${this.bucket}.${marker.key}`, seq: marker.revision + 1 }),
        )
      }
    }
    return purged
  }

  /** Purges the Task under `key` if it is expired at `cutoff` and still the revision read; true when it did. */
  private async purgeIfExpired(tasks: NatsKv, key: string, cutoff: string): Promise<boolean> {
    const entry = await withContext(`read key ${quote(key)} for retention`, () => tasks.get(key))
    if (entry?.operation !== "PUT") return false
    let task: A2ATask
    try {
      task = this.taskIn(entry, idFromNatsKey(key))
    } catch {
      return false // not a Task: list() and get() report it; retention leaves what it cannot judge
    }
    if (!isExpired(task.status, cutoff)) return false
    try {
      await tasks.purge(key, { previousSeq: entry.revision })
      await this.pushBook.removeTask(task.id)
      await this.eventLog.removeTask(task.id)
      return true
    } catch (err) {
      // Saved again since it was read: no longer the Task that expired.
      if (isApiError(err, WRONG_LAST_SEQUENCE)) return false
      throw new Error(`NatsTaskStore could not purge expired task ${quote(task.id)}: ${messageOf(err)}`, { cause: err })
    }
  }

  /** The Task in an entry; an error when it is not JSON, not a Task, or not the Task asked for. */
  private taskIn(entry: NatsKvEntry, id: string | undefined): A2ATask {
    const where = `KV entry in bucket "${this.bucket}" at key ${quote(entry.key)}`
    const task = parseStoredTask(entry.string(), "NatsTaskStore", where)
    // A hashed key could in theory be shared; the id inside decides.
    if (id === undefined ? natsKey(task.id) !== entry.key : task.id !== id) {
      throw new Error(`NatsTaskStore found a ${where} that holds task ${quote(task.id)}${id === undefined ? "" : `, not ${quote(id)}`}`)
    }
    return task
  }

  /** The id in the entry under a hashed key; undefined (reported) when it cannot be read. */
  private async idOfHashedKey(tasks: NatsKv, key: string): Promise<string | undefined> {
    try {
      const entry = await tasks.get(key)
      return entry?.operation === "PUT" ? this.taskIn(entry, undefined).id : undefined
    } catch (err) {
      this.report(err, "watch")
      return undefined
    }
  }

  private leaseBook(): Promise<NatsKv> {
    this.assertOpen()
    return this.leaseKv.get()
  }

}
