import type { A2ATask } from "../../types.js"
import { TERMINAL_STATES } from "../../types.js"
import { errorReporter, type ReportError, type TaskStoreOptions } from "../background-errors.js"
import { driverModuleOption } from "../driver.js"
import type { TaskPage, TaskQuery } from "../list.js"
import { OpenOnce } from "../open-once.js"
import { retentionSweeper, type RetentionSweeper } from "../retention.js"
import { assertTaskId } from "../task-checks.js"
import { TaskConflictError, type LeaseBook, type TaskStore } from "../task-store.js"
import { WriteOrder } from "../write-order.js"
import { GroupCommit } from "../group-commit.js"
import { taskFrom, textKey } from "./text.js"
import { outboxElement, PostgresPushStore } from "./push.js"
import { PostgresEventLog } from "./events.js"
import { eventRetentionOf, type EventLog } from "../../streams/event-log.js"
import { eventTextsApart } from "../push-records.js"
import type { PushEvent, PushStore } from "../push-store.js"
import { loadPgDriver, newListenClient, newPool, type PgClient, type PgDriver, type PgPool } from "./pg-driver.js"
import { checkName, checkNames, createTables, schemaSql } from "./schema.js"
import { statements, type Statements } from "./statements.js"
import { idKey, rowOf, type TaskRow } from "./rows.js"
import { listTasks } from "./listing.js"
import { ChangeListener } from "./listener.js"

export interface PostgresTaskStoreOptions extends TaskStoreOptions {
  /** The Tasks table (default "toolnexus_tasks"). */
  table?: string
  /** The liveness table of the servers sharing the store (default "toolnexus_leases"). */
  leaseTable?: string
  /** The LISTEN/NOTIFY channel saves and deletes are announced on (default `<table>_changes`). */
  channel?: string
  /** Most connections the store opens for queries (default 10); `watch` adds one of its own. */
  poolSize?: number
  /** The package the driver is imported from (default "pg"): a fork or wrapper with pg's Pool and Client. */
  driverModule?: string
  /** The stream events table (default `<table>_events`); ended logs' expiries go in `<eventTable>_ends` (see PostgresEventLog). */
  eventTable?: string
  /** How long a finished Task's stream events are kept for resuming (`store.events`), in ms after it ended (default one hour). */
  eventRetentionMs?: number
}

const TERMINAL = [...TERMINAL_STATES]
/** Rows one retention statement deletes: each batch is its own short transaction, so a sweep of a million rows holds no long lock. */
const RETENTION_BATCH = 1000
/** Most saves one group commit carries; the rest wait for the next. */
const SAVE_BATCH = 256

/**
 * Tasks in a PostgreSQL table, shared by any number of servers: saves are
 * announced with NOTIFY (`watch`), a terminal Task is never overwritten (the
 * first final word wins, the loser gets a TaskConflictError), and a lease
 * table tells live servers from dead ones by the database's clock.
 *
 * The constructor does no I/O. The driver ("pg", an optional peer
 * dependency) is imported on first use, and the tables are created then if
 * they are missing (schema.ts shows them and what each column holds;
 * `PostgresTaskStore.schemaSql()` gives the SQL for an operator to run by
 * hand, and the store then needs no CREATE privilege).
 *
 * Saves are group-committed: those called while a save statement is under
 * way go together in the next one (one transaction, one WAL flush, the
 * NOTIFY lock taken once), and each resolves when that statement returns.
 * Reads by id, event-log appends and ends are batched the same way.
 *
 * With `opts.retention`, finished Tasks past their TTL are deleted in
 * batches of 1000 rows, oldest first, along the status_ts index, each
 * deleted id NOTIFYed like any delete (its push rows and events with it). Rows another transaction holds (a
 * save under way, another server's sweep) are skipped until the next
 * sweep, so servers sweeping at once neither wait for nor fail each other.
 * A save racing the sweep of its Task either comes first (and is refused:
 * the Task is terminal) or finds the row gone and stores the Task anew; it
 * is never acknowledged and then lost.
 */
export class PostgresTaskStore implements TaskStore {
  readonly table: string
  readonly leaseTable: string
  readonly eventTable: string
  readonly channel: string
  readonly leases: LeaseBook
  /** Push configs and the outbox, in tables beside the Tasks' (see PostgresPushStore). */
  readonly push: PushStore
  /** The Tasks' stream events, in tables beside theirs (see PostgresEventLog). */
  readonly events: EventLog
  private readonly eventLog: PostgresEventLog
  private readonly url: string
  private readonly poolSize: number
  private readonly driverModule: string
  private readonly report: ReportError
  private readonly sql: Statements
  private readonly listener: ChangeListener
  /** LISTEN on `<channel>_push`, NOTIFYed when a save enqueues notifications. */
  private readonly outboxListener: ChangeListener
  /** The pool, once it exists and the tables do. */
  private readonly connection: OpenOnce<PgPool>
  private readonly writes = new WriteOrder()
  /** Saves, committed together: those called while a commit is under way go in the next one. */
  private readonly saves: GroupCommit<BatchedSave, number>
  /** Reads by id, batched the same way: one statement for the gets called while one is under way. */
  private readonly reads: GroupCommit<string, string | undefined>
  private readonly retention: RetentionSweeper | undefined
  private closing: Promise<void> | undefined
  private closed = false

  constructor(url: string, opts: PostgresTaskStoreOptions = {}) {
    if (typeof url !== "string" || !/^postgres(ql)?:\/\//i.test(url)) {
      // Never echo the value: a connection string may carry a password.
      throw new TypeError("PostgresTaskStore: url should be a connection string starting with postgres:// or postgresql://")
    }
    if (opts === null || typeof opts !== "object") throw new TypeError("PostgresTaskStore: opts should be an object")
    const names = checkNames(opts)
    if (opts.channel !== undefined) checkName("opts.channel", opts.channel)
    if (opts.poolSize !== undefined && !(Number.isInteger(opts.poolSize) && opts.poolSize > 0)) {
      throw new TypeError("PostgresTaskStore: opts.poolSize should be a positive integer")
    }
    this.report = errorReporter("PostgresTaskStore", opts.onError)
    const eventRetentionMs = eventRetentionOf("PostgresTaskStore", opts.eventRetentionMs)
    this.retention = retentionSweeper("PostgresTaskStore", opts.retention, (cutoff) => this.deleteFinishedBefore(cutoff), this.report)
    this.driverModule = driverModuleOption("PostgresTaskStore", opts.driverModule, "pg")
    this.url = url
    this.table = names.table
    this.leaseTable = names.leaseTable
    this.eventTable = names.eventTable
    this.channel = opts.channel ?? `${this.table}_changes`
    this.poolSize = opts.poolSize ?? 10
    this.sql = statements(names)
    this.saves = new GroupCommit((rows) => this.writeBatch(rows), { maxBatch: SAVE_BATCH, inFlight: 1 })
    this.reads = new GroupCommit((keys) => this.readBatch(keys), { maxBatch: SAVE_BATCH, inFlight: 2 })
    this.connection = new OpenOnce(() => this.openPool(), closedError)
    this.listener = new ChangeListener(this.channel, () => this.listenClient(), this.report)
    this.outboxListener = new ChangeListener(`${this.channel}_push`, () => this.listenClient(), this.report)
    this.push = new PostgresPushStore({
      table: this.table,
      pool: () => {
        this.assertOpen()
        return this.pool()
      },
      saveWithEvent: (task, events) => this.saveWithEvent(task, events),
      watchOutbox: (onDue) => {
        this.assertOpen()
        return this.outboxListener.add(() => onDue())
      },
    })
    this.events = this.eventLog = new PostgresEventLog({
      eventTable: this.eventTable,
      retentionMs: eventRetentionMs,
      report: this.report,
      assertOpen: () => this.assertOpen(),
      pool: () => this.pool(),
      keyOf: idKey,
    })
    this.leases = {
      renew: (instance, ttlMs) => this.renewLease(instance, ttlMs),
      isAlive: (instance) => this.isLeaseAlive(instance),
      release: (instance) => this.releaseLease(instance),
    }
  }

  /** The SQL that creates the tables and indexes, for an operator to run by hand. */
  static schemaSql(opts: Pick<PostgresTaskStoreOptions, "table" | "leaseTable" | "eventTable"> = {}): string {
    return schemaSql(checkNames(opts))
  }

  async get(id: string): Promise<A2ATask | undefined> {
    this.assertOpen()
    assertTaskId(id)
    return this.read(id)
  }

  async save(task: A2ATask): Promise<void> {
    await this.saveWithEvent(task, [])
  }

  /** save(), and with events their notifications, enqueued by the same statement (see PostgresPushStore). */
  private saveWithEvent(task: A2ATask, events: readonly PushEvent[]): Promise<number> {
    try {
      this.assertOpen()
      // Everything is read from the Task before the first await: a caller changing it after save() changes nothing stored.
      const row = rowOf(task)
      const notified = eventTextsApart(events, task, "PostgresTaskStore")
      // The events as one jsonb array, in order, each with its trace context: the statement enqueues them in it.
      const event = notified.length === 0 ? null : `[${notified.map(({ event, traceContext }) => outboxElement(event, traceContext)).join(",")}]`
      return this.writes.run(task.id, () => this.saves.add({ row, event }))
    } catch (err) {
      return Promise.reject(err)
    }
  }

  /** ListTasks in SQL (see listTasks). */
  async list(query: TaskQuery): Promise<TaskPage> {
    this.assertOpen()
    return listTasks(() => this.pool(), this.sql.table, query, this.report)
  }

  delete(id: string): Promise<void> {
    try {
      this.assertOpen()
      assertTaskId(id)
      const key = textKey(id)
      return this.writes.run(id, async () => {
        const pool = await this.pool()
        await pool.query(this.sql.delete, [key, this.channel])
      })
    } catch (err) {
      return Promise.reject(err)
    }
  }

  /**
   * Calls `onChange(id)` for every save and delete of any server, once its
   * transaction commits. Notifications sent while the connection was down
   * are lost; it reconnects by itself (backoff up to 5 s), so a watcher
   * should still re-read now and then.
   */
  async watch(onChange: (id: string) => void): Promise<() => Promise<void>> {
    if (typeof onChange !== "function") throw new TypeError("PostgresTaskStore.watch needs a function")
    this.assertOpen()
    return this.listener.add(onChange)
  }

  /**
   * Connects and creates the tables if they are missing. Every other call
   * does it on first use, so calling it is needed only to learn early that
   * the database cannot be used.
   */
  async open(): Promise<void> {
    this.assertOpen()
    await this.pool()
  }

  /**
   * Stops retention sweeps (a batch under way ends first), waits for the
   * saves and deletes already called, then ends the watch connection and
   * the pool. Later calls are refused. Calling it again does nothing more.
   */
  close(): Promise<void> {
    this.closed = true
    this.closing ??= (async () => {
      await this.retention?.stop()
      await this.eventLog.stop()
      await this.writes.idle()
      await this.listener.stop()
      await this.outboxListener.stop()
      const pool = await this.connection.close()
      await pool?.end()
    })()
    return this.closing
  }

  private assertOpen(): void {
    if (this.closed) throw closedError()
  }

  /** The stored Task of a checked id. */
  private async read(id: string): Promise<A2ATask | undefined> {
    const text = await this.reads.add(textKey(id))
    return text === undefined ? undefined : taskFrom(text, id)
  }

  /** The stored text of each key (undefined: no row), in one statement. */
  private async readBatch(keys: string[]): Promise<Array<string | undefined>> {
    const pool = await this.pool()
    const { rows } = await pool.query<{ id: string; task: string }>({ name: this.sql.getName, text: this.sql.get, values: [keys] })
    const found = new Map(rows.map((row) => [row.id, row.task]))
    return keys.map((key) => found.get(key))
  }

  /**
   * One group commit: every row in one statement, so one transaction and one WAL flush for the lot (each
   * row still NOTIFYed). A row it did not write (its stored Task is terminal, or was deleted under it) is
   * written again alone, which says why; a batch that fails is tried save by save, so each gets its own
   * answer. Rows go in id order, so two servers' batches lock their rows in one order and never deadlock.
   */
  private async writeBatch(batch: BatchedSave[]): Promise<Array<number | Error>> {
    const alone = ({ row, event }: BatchedSave) => this.write(row.taskId, row, event ?? undefined).catch(asError)
    let written: Map<string, number>
    try {
      const pool = await this.pool()
      const column = <K extends keyof TaskRow>(key: K) => batch.map(({ row }) => row[key])
      const values = [column("id"), column("document"), column("state"), column("statusTs"), column("contextId"), column("owner"), column("tenant"), this.channel, TERMINAL]
      // Without push events, a statement that does not touch the outbox (an operator may grant a store only its Tasks' tables).
      const withEvents = batch.some(({ event }) => event !== null)
      const { rows } = await pool.query<{ id: string; queued?: number }>(
        withEvents
          ? { name: this.sql.saveBatchWithEventsName, text: this.sql.saveBatchWithEvents, values: [...values, batch.map(({ event }) => event), Date.now(), `${this.channel}_push`] }
          : { name: this.sql.saveBatchName, text: this.sql.saveBatch, values },
      )
      written = new Map(rows.map((row) => [row.id, row.queued ?? 0]))
    } catch (err) {
      if (batch.length === 1) return [asError(err)]
      return Promise.all(batch.map(alone))
    }
    return Promise.all(batch.map((save) => (written.has(save.row.id) ? Promise.resolve(written.get(save.row.id)!) : alone(save))))
  }

  /** Resolves with how many notifications the save enqueued. */
  private async write(id: string, row: TaskRow, event: string | undefined): Promise<number> {
    const pool = await this.pool()
    const params = [row.id, row.document, row.state, row.statusTs, row.contextId, [row.owner, row.tenant], this.channel, TERMINAL]
    const [statement, values] = event === undefined ? [this.sql.save, params] : [this.sql.saveWithEvent, [...params, event, Date.now(), `${this.channel}_push`]]
    // A refused row deleted before it was read back leaves room to insert: try again, a few times at most.
    for (let attempt = 1; ; attempt++) {
      const written = await pool.query<{ queued?: number }>(statement, values)
      if (written.rowCount === 1) return written.rows[0]?.queued ?? 0
      const stored = await this.read(id)
      if (stored !== undefined && TERMINAL_STATES.has(stored.status.state)) throw new TaskConflictError(id, stored)
      if (attempt >= 3) throw new Error(`PostgresTaskStore could not save task ${JSON.stringify(id.slice(0, 128))}: its row kept changing`)
    }
  }

  /** One retention sweep: batch after batch until one comes back short, or the store closes. */
  private async deleteFinishedBefore(cutoff: string): Promise<number> {
    const pool = await this.pool()
    let deleted = 0
    while (!this.closed) {
      const { rowCount } = await pool.query(this.sql.deleteExpired, [textKey(cutoff), TERMINAL, RETENTION_BATCH, this.channel])
      deleted += rowCount ?? 0
      if ((rowCount ?? 0) < RETENTION_BATCH) break
    }
    return deleted
  }

  private async renewLease(instance: string, ttlMs: number): Promise<void> {
    this.assertOpen()
    if (!(Number.isFinite(ttlMs) && ttlMs > 0)) throw new RangeError("PostgresTaskStore leases.renew: ttlMs should be a number of milliseconds > 0")
    const pool = await this.pool()
    await pool.query(this.sql.renewLease, [textKey(instance), ttlMs])
  }

  private async isLeaseAlive(instance: string): Promise<boolean> {
    this.assertOpen()
    const pool = await this.pool()
    const { rows } = await pool.query<{ alive: boolean }>(this.sql.isLeaseAlive, [textKey(instance)])
    return rows[0].alive
  }

  private async releaseLease(instance: string): Promise<void> {
    this.assertOpen()
    const pool = await this.pool()
    await pool.query(this.sql.releaseLease, [textKey(instance)])
  }

  private pool(): Promise<PgPool> {
    return this.connection.get()
  }

  private async openPool(): Promise<PgPool> {
    const pool = newPool(await this.driver(), this.url, this.poolSize)
    // Without a listener, an idle connection's error would be thrown at the process.
    pool.on("error", (err) => this.report(err, "connection"))
    try {
      await createTables(pool, this)
    } catch (err) {
      await pool.end().catch(() => {})
      throw err
    }
    this.retention?.start()
    this.eventLog.start()
    return pool
  }

  private driver(): Promise<PgDriver> {
    return loadPgDriver(this.driverModule)
  }

  private async listenClient(): Promise<PgClient> {
    return newListenClient(await this.driver(), this.url)
  }
}

/** A save waiting for its group commit: its row, and its push events as one jsonb array's text (null: none). */
interface BatchedSave {
  row: TaskRow
  event: string | null
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}

function closedError(): Error {
  return new Error("PostgresTaskStore is closed")
}
