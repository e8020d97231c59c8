import { ownerOf, tenantOf } from "../../internals.js"
import type { A2ATask } from "../../types.js"
import { TERMINAL_STATES } from "../../types.js"
import { errorReporter, type ReportError, type TaskStoreOptions } from "../background-errors.js"
import { loadDriver } from "../driver.js"
import { checkQuery, decodePageToken, encodeCursor, withoutArtifacts, type TaskPage, type TaskQuery } from "../list.js"
import { OpenOnce } from "../open-once.js"
import { retentionSweeper, type RetentionSweeper } from "../retention.js"
import { assertTask, assertTaskId } from "../task-checks.js"
import { TaskConflictError, type LeaseBook, type TaskStore } from "../task-store.js"
import { WriteOrder } from "../write-order.js"
import { GroupCommit } from "../group-commit.js"
import { ESCAPED, fromTextKey, jsonbDocument, taskFrom, textKey } from "./text.js"
import { outboxElement, PostgresPushStore, pushCleanupCtes, pushSchemaSql, pushTables, saveBatchWithEventsSql, saveWithEventSql } from "./push.js"
import { eventCleanupCtes, eventSchemaSql, eventTables, PostgresEventLog } from "./events.js"
import { eventRetentionOf, type EventLog } from "../../streams/event-log.js"
import { eventTextsApart } from "../push-records.js"
import type { PushEvent, PushStore } from "../push-store.js"

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

/*
 * The little of the pg driver the store uses, declared here rather than
 * imported from "pg": pg is an optional peer, and the published types must
 * compile for an application without it. test/package/declarations.test.ts checks
 * that pg itself fits these.
 */

interface PgQueryResult<Row> {
  rows: Row[]
  rowCount: number | null
}

/** A named query: prepared once per connection, then only bound and run. */
interface PgNamedQuery {
  name: string
  text: string
  values?: unknown[]
}

interface PgQueryable {
  query<Row = Record<string, unknown>>(text: string, values?: unknown[]): Promise<PgQueryResult<Row>>
  query<Row = Record<string, unknown>>(query: PgNamedQuery): Promise<PgQueryResult<Row>>
}

interface PgPool extends PgQueryable {
  on(event: "error", listener: (err: Error) => void): unknown
  end(): Promise<void>
}

interface PgNotification {
  channel: string
  payload?: string
}

interface PgClient extends PgQueryable {
  connect(): Promise<unknown>
  end(): Promise<void>
  on(event: "notification", listener: (message: PgNotification) => void): unknown
  on(event: "error", listener: (err: Error) => void): unknown
  on(event: "end", listener: () => void): unknown
}

/** What the store passes to `new Pool()` and `new Client()`. */
interface PgConnectionConfig {
  connectionString: string
  connectionTimeoutMillis: number
  application_name: string
  max?: number
  allowExitOnIdle?: boolean
  query_timeout?: number
  keepAlive?: boolean
}

export interface PgDriver {
  Pool: new (config: PgConnectionConfig) => PgPool
  Client: new (config: PgConnectionConfig) => PgClient
}

const isPgDriver = (module: unknown): module is PgDriver =>
  typeof (module as PgDriver)?.Pool === "function" && typeof (module as PgDriver).Client === "function"

/** Lowercase only, so a name means the same table quoted or not; short enough for the derived index and channel names to fit Postgres's 63 bytes. */
const NAME = /^[a-z_][a-z0-9_]{0,47}$/
const NAME_RULE = "a lowercase SQL name (a-z, 0-9 and _, not starting with a digit, at most 48 characters)"
/** The btree index on id holds keys up to ~2700 bytes; refusing longer ids up front beats a failure that depends on how well the id compresses. */
const MAX_ID_BYTES = 2048
const MAX_TIMESTAMP_BYTES = 256
/** A query or connect that takes this long is a dead server or network, not a slow one. */
const CONNECT_TIMEOUT_MS = 15_000
const WATCH_HEARTBEAT_MS = 30_000
const WATCH_QUERY_TIMEOUT_MS = 10_000
const WATCH_RETRY_FIRST_MS = 100
const WATCH_RETRY_MAX_MS = 5_000
/** Expired leases this old are pruned on any renew: no one asks about a server gone that long. */
const LEASE_PRUNE_AFTER = "1 hour"
/** Errors two servers' concurrent CREATE ... IF NOT EXISTS can hit: unique_violation, duplicate_table, duplicate_object. */
const CREATE_RACE_CODES = new Set(["23505", "42P07", "42710"])
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
 * they are missing. The schema, as `PostgresTaskStore.schemaSql()` returns
 * it for the default names; an operator may run it by hand, and the store
 * then needs no CREATE privilege:
 *
 *     CREATE TABLE IF NOT EXISTS "toolnexus_tasks" (
 *       id text COLLATE "C" PRIMARY KEY,
 *       task jsonb NOT NULL,
 *       state text NOT NULL,
 *       status_ts text COLLATE "C" NOT NULL DEFAULT '',
 *       context_id text,
 *       principal text,
 *       version bigint NOT NULL DEFAULT 1
 *     );
 *     ALTER TABLE "toolnexus_tasks" ADD COLUMN IF NOT EXISTS tenant text;
 *     CREATE INDEX IF NOT EXISTS "toolnexus_tasks_ts_id" ON "toolnexus_tasks" (status_ts DESC, id DESC);
 *     CREATE INDEX IF NOT EXISTS "toolnexus_tasks_context" ON "toolnexus_tasks" USING hash (context_id);
 *     CREATE TABLE IF NOT EXISTS "toolnexus_leases" (
 *       instance text PRIMARY KEY,
 *       expires_at timestamptz NOT NULL
 *     );
 *     CREATE TABLE IF NOT EXISTS "toolnexus_tasks_pushcfg" (
 *       task_id text COLLATE "C" NOT NULL,
 *       id text COLLATE "C" NOT NULL,
 *       config jsonb NOT NULL,
 *       PRIMARY KEY (task_id, id)
 *     );
 *     CREATE TABLE IF NOT EXISTS "toolnexus_tasks_outbox" (
 *       seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
 *       key text NOT NULL,
 *       task_id text COLLATE "C" NOT NULL,
 *       config_id text COLLATE "C" NOT NULL,
 *       event jsonb NOT NULL,
 *       attempts integer NOT NULL DEFAULT 0,
 *       not_before bigint NOT NULL,
 *       enqueued_at bigint NOT NULL,
 *       last_error text,
 *       claimed_by text,
 *       claim_token text,
 *       claim_until timestamptz
 *     );
 *     CREATE INDEX IF NOT EXISTS "toolnexus_tasks_outbox_ch" ON "toolnexus_tasks_outbox" (task_id, config_id, seq);
 *     CREATE TABLE IF NOT EXISTS "toolnexus_tasks_dead" (
 *       seq bigint PRIMARY KEY,
 *       key text NOT NULL,
 *       task_id text COLLATE "C" NOT NULL,
 *       config_id text COLLATE "C" NOT NULL,
 *       event jsonb NOT NULL,
 *       attempts integer NOT NULL,
 *       not_before bigint NOT NULL,
 *       enqueued_at bigint NOT NULL,
 *       last_error text,
 *       reason text NOT NULL,
 *       dead_at bigint NOT NULL
 *     );
 *     CREATE INDEX IF NOT EXISTS "toolnexus_tasks_dead_at" ON "toolnexus_tasks_dead" (dead_at DESC, seq DESC);
 *     CREATE INDEX IF NOT EXISTS "toolnexus_tasks_dead_task" ON "toolnexus_tasks_dead" (task_id);
 *     ALTER TABLE "toolnexus_tasks_outbox" ADD COLUMN IF NOT EXISTS trace_context jsonb;
 *     ALTER TABLE "toolnexus_tasks_dead" ADD COLUMN IF NOT EXISTS trace_context jsonb;
 *     CREATE TABLE IF NOT EXISTS "toolnexus_tasks_events" (
 *       task_id text COLLATE "C" NOT NULL,
 *       position bigint NOT NULL,
 *       event text NOT NULL,
 *       PRIMARY KEY (task_id, position)
 *     );
 *     CREATE TABLE IF NOT EXISTS "toolnexus_tasks_events_ends" (
 *       task_id text COLLATE "C" PRIMARY KEY,
 *       expires_at timestamptz NOT NULL
 *     );
 *     CREATE INDEX IF NOT EXISTS "toolnexus_tasks_events_ends_at" ON "toolnexus_tasks_events_ends" (expires_at);
 *
 * The push tables hold push configs, the outbox of notifications not yet
 * delivered and the dead letters (see PostgresPushStore); the last two, the
 * Tasks' stream events and when ended logs expire (see PostgresEventLog).
 * `task` is the whole Task and the truth; the other columns are copies for
 * filtering and ordering: `status_ts` is status.timestamp ('' when missing),
 * `principal` is the Task's owner (`ownerOf`, what `TaskQuery.owners` names),
 * `tenant` the tenant it was created under (`tenantOf`, `TaskQuery.tenant`;
 * added to tables made before tenants by the store's open, or by hand),
 * `version` counts the writes.
 * COLLATE "C" orders by code point, as ListTasks' JavaScript ordering does
 * (the two differ only between U+E000-U+FFFF and characters past U+FFFF).
 * Postgres text holds no NUL and no lone surrogate: a key column holding
 * such a string keeps an escaped form starting with \x01 (`textKey`), which
 * is also where such an id sorts, and a Task containing one is kept as a
 * jsonb string of its JSON text. Every save and delete NOTIFYs the channel
 * with the id's key; ids are at most 2048 bytes, well inside NOTIFY's 8000.
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
  private readonly sql: ReturnType<typeof statements>
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
    if (opts.driverModule !== undefined && (typeof opts.driverModule !== "string" || opts.driverModule.length === 0)) {
      throw new TypeError("PostgresTaskStore: opts.driverModule should be a package name, e.g. \"pg\"")
    }
    this.url = url
    this.table = names.table
    this.leaseTable = names.leaseTable
    this.eventTable = names.eventTable
    this.channel = opts.channel ?? `${this.table}_changes`
    this.poolSize = opts.poolSize ?? 10
    this.driverModule = opts.driverModule ?? "pg"
    this.sql = statements(this.table, this.leaseTable, this.eventTable)
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
    const { table, leaseTable, eventTable } = checkNames(opts)
    return schemaSql(table, leaseTable, eventTable)
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

  /** ListTasks in SQL: one statement, so the page and its total come from one snapshot. */
  async list(query: TaskQuery): Promise<TaskPage> {
    this.assertOpen()
    const pageSize = checkQuery(query)
    const after = query.pageToken ? decodePageToken(query.pageToken) : undefined
    const params: unknown[] = []
    const param = (value: unknown) => `$${params.push(value)}`
    const filters = ["true"]
    if (query.owners !== undefined) filters.push(ownerFilter(query.owners, param))
    if (query.tenant === null) filters.push("tenant IS NULL")
    else if (query.tenant !== undefined) filters.push(`tenant = ${param(textKey(query.tenant))}`)
    if (query.contextId !== undefined) filters.push(`context_id = ${param(textKey(query.contextId))}`)
    if (query.status !== undefined) filters.push(`state = ${param(textKey(query.status))}`)
    if (query.statusTimestampAfter !== undefined) filters.push(`status_ts >= ${param(textKey(query.statusTimestampAfter))}`)
    const matching = filters.join(" AND ")
    const cursor = after ? `(status_ts, id) < (${param(textKey(after.t))}, ${param(textKey(after.id))})` : "true"
    // Without artifacts, leave them in the database; a Task kept as a jsonb string is trimmed below.
    const document = query.includeArtifacts ? "task" : "CASE WHEN jsonb_typeof(task) = 'object' THEN task - 'artifacts' ELSE task END"
    const pool = await this.pool()
    const { rows } = await pool.query<{ total: string; task: string | null; status_ts: string; id: string }>(
      `SELECT total.n::text AS total, page.task, page.status_ts, page.id
         FROM (SELECT count(*) AS n FROM ${this.sql.table} WHERE ${matching}) AS total
         LEFT JOIN LATERAL (
           SELECT (${document})::text AS task, status_ts, id FROM ${this.sql.table}
            WHERE ${matching} AND ${cursor}
            ORDER BY status_ts DESC, id DESC
            LIMIT ${param(pageSize + 1)}
         ) AS page ON true
        ORDER BY page.status_ts DESC, page.id DESC`,
      params,
    )
    const found = rows.filter((row) => row.task !== null)
    const more = found.length > pageSize
    const page = found.slice(0, pageSize)
    const tasks: A2ATask[] = []
    for (const row of page) {
      const id = fromTextKey(row.id)
      try {
        tasks.push(taskFrom(row.task!, id))
      } catch (err) {
        // Left out, as the other stores leave out what they cannot read: one bad row must not stop every listing and recovery.
        this.report(err, "list", id)
      }
    }
    const last = page[page.length - 1]
    return {
      tasks: query.includeArtifacts ? tasks : tasks.map(withoutArtifacts),
      nextPageToken: more ? encodeCursor(fromTextKey(last.status_ts), fromTextKey(last.id)) : "",
      totalSize: Number(rows[0].total),
      pageSize,
    }
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
      const column = <K extends keyof SaveRow>(key: K) => batch.map(({ row }) => row[key])
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
  private async write(id: string, row: SaveRow, event: string | undefined): Promise<number> {
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
    const { Pool } = await this.driver()
    const pool = new Pool({
      connectionString: this.url,
      max: this.poolSize,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      application_name: "toolnexus",
      // A store nobody closed must not keep the process alive.
      allowExitOnIdle: true,
    })
    // Without a listener, an idle connection's error would be thrown at the process.
    pool.on("error", (err) => this.report(err, "connection"))
    try {
      await this.createTables(pool)
    } catch (err) {
      await pool.end().catch(() => {})
      throw err
    }
    this.retention?.start()
    this.eventLog.start()
    return pool
  }

  /** Creates what is missing. Two servers starting at once may race; the loser's retry finds the winner's committed tables. */
  private async createTables(pool: PgPool): Promise<void> {
    const { configs, outbox, dead } = pushTables(this.table)
    const { events, ends } = eventTables(this.eventTable)
    const added = [this.sql.table, outbox, dead]
    const { rows } = await pool.query<{ ready: boolean }>(this.sql.tablesExist, [[this.sql.table, this.sql.leaseTable, configs, outbox, dead, events, ends], added, ["tenant", "trace_context", "trace_context"]])
    if (rows[0].ready) return
    const schema = schemaSql(this.table, this.leaseTable, this.eventTable)
    try {
      await pool.query(schema)
    } catch (err) {
      if (!CREATE_RACE_CODES.has((err as { code?: string }).code ?? "")) throw err
      await pool.query(schema)
    }
  }

  private driver(): Promise<PgDriver> {
    return loadDriver({ store: "PostgresTaskStore", specifier: this.driverModule, expected: "pg", uses: "Pool and Client classes", fits: isPgDriver })
  }

  private async listenClient(): Promise<PgClient> {
    const { Client } = await this.driver()
    return new Client({
      connectionString: this.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: WATCH_QUERY_TIMEOUT_MS,
      keepAlive: true,
      application_name: "toolnexus-watch",
    })
  }
}

/**
 * The one LISTEN connection of a store, shared by its watchers: opened by
 * the first, closed after the last. While anyone watches, a dropped
 * connection is reopened with backoff; a heartbeat query finds a connection
 * the network silently lost.
 */
class ChangeListener {
  /** One entry per watch() call, so one function watching twice is two watchers. */
  private readonly watchers = new Set<{ onChange: (id: string) => void }>()
  private readonly connection: OpenOnce<PgClient>
  private client: PgClient | undefined
  /** Bumped by stop(), so a connection that opens after it is closed at once. */
  private generation = 0
  private failures = 0
  private retryTimer: NodeJS.Timeout | undefined
  private heartbeat: NodeJS.Timeout | undefined

  constructor(
    private readonly channel: string,
    private readonly newClient: () => Promise<PgClient>,
    private readonly report: ReportError,
  ) {
    // Never closed for good: stop() forgets the connection, and the next watcher opens another.
    this.connection = new OpenOnce(() => this.open())
  }

  async add(onChange: (id: string) => void): Promise<() => Promise<void>> {
    const watcher = { onChange }
    this.watchers.add(watcher)
    try {
      await this.connection.get()
    } catch (err) {
      await this.remove(watcher)
      throw err
    }
    return () => this.remove(watcher)
  }

  async stop(): Promise<void> {
    this.watchers.clear()
    this.generation++
    clearTimeout(this.retryTimer)
    clearInterval(this.heartbeat)
    this.retryTimer = undefined
    this.connection.forget(this.connection.current)
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => {})
  }

  private async remove(watcher: { onChange: (id: string) => void }): Promise<void> {
    if (this.watchers.delete(watcher) && this.watchers.size === 0) await this.stop()
  }

  private async open(): Promise<PgClient> {
    const generation = this.generation
    const client = await this.newClient()
    client.on("notification", (message) => this.deliver(message))
    client.on("error", (err) => this.lost(client, err))
    client.on("end", () => this.lost(client))
    try {
      await client.connect()
      await client.query(`LISTEN "${this.channel}"`)
    } catch (err) {
      await client.end().catch(() => {})
      throw err
    }
    if (generation !== this.generation) {
      await client.end().catch(() => {})
      throw new Error("PostgresTaskStore was closed while watch() was starting")
    }
    this.client = client
    this.failures = 0
    this.heartbeat = setInterval(() => {
      client.query("SELECT 1").catch((err: Error) => this.lost(client, err))
    }, WATCH_HEARTBEAT_MS)
    this.heartbeat.unref()
    return client
  }

  private deliver(message: PgNotification): void {
    if (message.channel !== this.channel || message.payload === undefined) return
    const id = fromTextKey(message.payload)
    for (const watcher of [...this.watchers]) {
      try {
        watcher.onChange(id)
      } catch (err) {
        this.report(err, "watch", id)
      }
    }
  }

  /** The connection failed or ended: unless it was closed on purpose, open another. */
  private lost(client: PgClient, err?: Error): void {
    if (client !== this.client) return
    this.client = undefined
    this.connection.forget(this.connection.current)
    clearInterval(this.heartbeat)
    void client.end().catch(() => {})
    this.report(err ?? new Error("PostgresTaskStore: the watch connection ended; reconnecting"), "watch")
    this.reconnectLater()
  }

  private reconnectLater(): void {
    if (this.watchers.size === 0 || this.retryTimer !== undefined) return
    const backoff = Math.min(WATCH_RETRY_MAX_MS, WATCH_RETRY_FIRST_MS * 2 ** this.failures++)
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined
      this.connection.get().catch((err: unknown) => {
        if (this.watchers.size === 0) return
        this.report(err, "watch")
        this.reconnectLater()
      })
    }, backoff * (0.5 + Math.random() / 2))
    this.retryTimer.unref()
  }
}

function checkName(option: string, value: unknown): string {
  if (typeof value !== "string" || !NAME.test(value)) {
    const got = typeof value === "string" ? JSON.stringify(value.slice(0, 80)) : `a ${typeof value}`
    throw new TypeError(`PostgresTaskStore: ${option} should be ${NAME_RULE}, got ${got}`)
  }
  return value
}

function checkNames(opts: Pick<PostgresTaskStoreOptions, "table" | "leaseTable" | "eventTable">): { table: string; leaseTable: string; eventTable: string } {
  const table = opts.table === undefined ? "toolnexus_tasks" : checkName("opts.table", opts.table)
  const leaseTable = opts.leaseTable === undefined ? "toolnexus_leases" : checkName("opts.leaseTable", opts.leaseTable)
  if (table === leaseTable) throw new TypeError(`PostgresTaskStore: opts.leaseTable should differ from opts.table (both are "${table}")`)
  const eventTable = opts.eventTable === undefined ? `${table}_events` : checkName("opts.eventTable", opts.eventTable)
  // Its two tables must not be any other table of the store.
  const others = [table, leaseTable, ...Object.values(pushTables(table))].map((name) => name.replaceAll('"', ""))
  const clash = Object.values(eventTables(eventTable)).map((name) => name.replaceAll('"', "")).find((name) => others.includes(name))
  if (clash !== undefined) throw new TypeError(`PostgresTaskStore: opts.eventTable should name tables of its own, but "${clash}" is another table of the store`)
  return { table, leaseTable, eventTable }
}

function schemaSql(table: string, leaseTable: string, eventTable: string): string {
  return [
    `CREATE TABLE IF NOT EXISTS "${table}" (`,
    `  id text COLLATE "C" PRIMARY KEY,`,
    `  task jsonb NOT NULL,`,
    `  state text NOT NULL,`,
    `  status_ts text COLLATE "C" NOT NULL DEFAULT '',`,
    `  context_id text,`,
    `  principal text,`,
    `  version bigint NOT NULL DEFAULT 1`,
    `);`,
    // Tables made before tenants gain the column; a new one has it from here.
    `ALTER TABLE "${table}" ADD COLUMN IF NOT EXISTS tenant text;`,
    `CREATE INDEX IF NOT EXISTS "${table}_ts_id" ON "${table}" (status_ts DESC, id DESC);`,
    // Hash: equality is all ListTasks needs, and unlike a btree it takes a client's contextId of any length.
    `CREATE INDEX IF NOT EXISTS "${table}_context" ON "${table}" USING hash (context_id);`,
    `CREATE TABLE IF NOT EXISTS "${leaseTable}" (`,
    `  instance text PRIMARY KEY,`,
    `  expires_at timestamptz NOT NULL`,
    `);`,
    ...pushSchemaSql(table),
    ...eventSchemaSql(eventTable),
  ].join("\n")
}

/** Every statement but list's, written once per store. Names are checked, so quoting them is enough. */
function statements(table: string, leaseTable: string, eventTable: string) {
  const tasks = `"${table}"`
  const leases = `"${leaseTable}"`
  // One statement: the write, the terminal-state guard and the NOTIFY (sent at commit) stand or fall together.
  // $6 is the pair [owner, tenant], so the statements built on this one keep their parameters' numbers.
  const written = `INSERT INTO ${tasks} AS stored (id, task, state, status_ts, context_id, principal, tenant, version)
             VALUES ($1, $2::jsonb, $3, $4, $5, ($6::text[])[1], ($6::text[])[2], 1)
             ON CONFLICT (id) DO UPDATE SET
               task = excluded.task, state = excluded.state, status_ts = excluded.status_ts,
               context_id = excluded.context_id, principal = excluded.principal, tenant = excluded.tenant, version = stored.version + 1
             WHERE stored.state <> ALL ($8::text[])
             RETURNING id`
  // The batch's rows, one per element of the arrays $1-$7 (and `more`), and its upsert, in id order (see writeBatch).
  const batchRows = (more: string, moreNames = "") =>
    `SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]${more})
              AS given(id, task, state, status_ts, context_id, principal, tenant${moreNames})`
  const writtenBatch = `INSERT INTO ${tasks} AS stored (id, task, state, status_ts, context_id, principal, tenant, version)
             SELECT id, task::jsonb, state, status_ts, context_id, principal, tenant, 1 FROM given ORDER BY id COLLATE "C"
             ON CONFLICT (id) DO UPDATE SET
               task = excluded.task, state = excluded.state, status_ts = excluded.status_ts,
               context_id = excluded.context_id, principal = excluded.principal, tenant = excluded.tenant, version = stored.version + 1
             WHERE stored.state <> ALL ($9::text[])
             RETURNING id`
  return {
    table: tasks,
    leaseTable: leases,
    // Ready: every table, and every column added since a table's first shape (pairs of $2 and $3: the tasks' tenant, the outbox's and dead letters' trace_context).
    tablesExist: `SELECT bool_and(to_regclass(name) IS NOT NULL)
                     AND (SELECT count(*) FROM unnest($2::text[], $3::text[]) AS added(tab, col)
                           WHERE EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(added.tab) AND attname = added.col AND NOT attisdropped)) = cardinality($2::text[]) AS ready
                    FROM unnest($1::text[]) AS name`,
    // Prepared statements' names: each connection is of this store's own pool, so fixed names do (and stay under 63 bytes).
    getName: "tn_get",
    get: `SELECT id, task::text AS task FROM ${tasks} WHERE id = ANY ($1::text[])`,
    save: `WITH written AS (${written}) SELECT pg_notify($7, id) FROM written`,
    // The same for a batch of Tasks (a group commit): $1-$7 the rows' columns as arrays, $8 the channel, $9 the terminal states.
    saveBatchName: "tn_save_batch",
    saveBatch: `WITH given AS (${batchRows("")}), written AS (${writtenBatch}) SELECT id, pg_notify($8, id) FROM written`,
    // And with their push events: see saveBatchWithEventsSql.
    saveBatchWithEventsName: "tn_save_batch_push",
    saveBatchWithEvents: saveBatchWithEventsSql(table, batchRows(", $10::text[]", ", events"), writtenBatch),
    // The same, enqueueing the event for each of the Task's push configs: a refused save enqueues nothing.
    saveWithEvent: saveWithEventSql(table, written),
    // A Task's push rows and events go with it, even when the Task row was gone already.
    delete: `WITH gone AS (SELECT $1::text AS id), deleted AS (DELETE FROM ${tasks} WHERE id = $1 RETURNING id), ${pushCleanupCtes(table)}, ${eventCleanupCtes(eventTable)}
             SELECT pg_notify($2, id) FROM deleted`,
    // isExpired in SQL: a range of the status_ts index (from '0', past the '' of no timestamp), oldest first.
    deleteExpired: `WITH gone AS (
                      DELETE FROM ${tasks} WHERE id IN (
                        SELECT id FROM ${tasks}
                         WHERE status_ts >= '0' AND status_ts < $1 AND status_ts ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T'
                           AND state = ANY ($2::text[])
                         ORDER BY status_ts
                         LIMIT $3
                         FOR UPDATE SKIP LOCKED)
                      RETURNING id),
                    ${pushCleanupCtes(table)},
                    ${eventCleanupCtes(eventTable)}
                    SELECT pg_notify($4, id) FROM gone`,
    // The database's clock, so servers whose clocks disagree still agree on who is alive.
    renewLease: `WITH pruned AS (DELETE FROM ${leases} WHERE expires_at < now() - interval '${LEASE_PRUNE_AFTER}' AND instance <> $1)
                 INSERT INTO ${leases} (instance, expires_at) VALUES ($1, now() + $2::float8 * interval '1 millisecond')
                 ON CONFLICT (instance) DO UPDATE SET expires_at = excluded.expires_at`,
    isLeaseAlive: `SELECT EXISTS (SELECT 1 FROM ${leases} WHERE instance = $1 AND expires_at > now()) AS alive`,
    releaseLease: `DELETE FROM ${leases} WHERE instance = $1`,
  }
}

/** A Task id as a key column holds it, refused when longer than the key indexes take. */
function idKey(id: string): string {
  const key = textKey(id)
  if (Buffer.byteLength(key) > MAX_ID_BYTES) throw new RangeError(`PostgresTaskStore stores Task ids of up to ${MAX_ID_BYTES} bytes`)
  return key
}

type SaveRow = ReturnType<typeof rowOf>
/** A save waiting for its group commit: its row, and its push events as one jsonb array's text (null: none). */
interface BatchedSave {
  row: SaveRow
  event: string | null
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}

/** The columns of a Task's row, all of them strings Postgres can hold; `taskId` is the id itself. */
function rowOf(task: A2ATask) {
  assertTask(task, "PostgresTaskStore")
  const id = idKey(task.id)
  const statusTs = textKey(task.status.timestamp ?? "")
  if (Buffer.byteLength(statusTs) > MAX_TIMESTAMP_BYTES) throw new RangeError("PostgresTaskStore: status.timestamp should be an ISO-8601 time")
  const json = JSON.stringify(task)
  const owner = ownerOf(task)
  const tenant = tenantOf(task)
  return {
    taskId: task.id,
    id,
    document: jsonbDocument(json),
    state: textKey(task.status.state),
    statusTs,
    contextId: typeof task.contextId === "string" ? textKey(task.contextId) : null,
    // An owner field that is not a name matches no owner a query names: no name's key equals ESCAPED alone.
    owner: owner === null ? null : owner === false ? ESCAPED : textKey(owner),
    // The same for a tenant field that is not a name: no tenant's key equals ESCAPED alone.
    tenant: tenant === null ? null : tenant === false ? ESCAPED : textKey(tenant),
  }
}

/** The WHERE clause of `TaskQuery.owners`; `param` adds a parameter and gives its placeholder. */
function ownerFilter(owners: ReadonlyArray<string | null>, param: (value: unknown) => string): string {
  const names = owners.filter((owner): owner is string => owner !== null).map(textKey)
  const clauses = [...(names.length > 0 ? [`principal = ANY(${param(names)}::text[])`] : []), ...(owners.includes(null) ? ["principal IS NULL"] : [])]
  return clauses.length === 0 ? "false" : `(${clauses.join(" OR ")})`
}

function closedError(): Error {
  return new Error("PostgresTaskStore is closed")
}
