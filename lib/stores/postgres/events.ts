import type { JsonObject } from "../../types.js"
import { assertAppend, type EventLog, type LoggedEvent } from "../../streams/event-log.js"
import { eventSweeper, type EventLogHost } from "../event-sweep.js"
import { GroupCommit } from "../group-commit.js"
import { textKey } from "./text.js"
import type { RetentionSweeper } from "../retention.js"
import { assertTaskId } from "../task-checks.js"

/**
 * PostgresTaskStore's event log (`store.events`): two tables beside the Tasks'.
 *
 * - `<eventTable>` (default `<table>_events`): one row per event, keyed
 *   (task_id, position). The event is kept as its JSON text, not jsonb: the
 *   store never reads inside it, so text costs no jsonb parse on the way in
 *   and gives back exactly what was written (JSON.stringify escapes NUL and
 *   lone surrogates, so any event fits a text column as it is).
 * - `<eventTable>_ends`: one row per ended log, its expiry by the database's
 *   clock. `ended` inserts it once (a later `ended` changes nothing); a sweep
 *   (unref()-ed timer, a quarter of the retention apart, at most a minute)
 *   deletes the logs past it, a hundred logs per statement, rows another
 *   sweep holds skipped. An append landing after that (a writer that called
 *   `ended` before it was done) would start a log with no end, which goes
 *   with its Task.
 *
 * An append is one INSERT ... ON CONFLICT DO NOTHING RETURNING position: a
 * position already held keeps its row, and is told by its absence from what
 * the statement returns; two servers appending one position at once are
 * ordered by its key, one inserts and the other is told. The appends (and
 * the ends) of many Tasks called while one statement is under way go
 * together in the next one (see GroupCommit): one round trip for the lot. Its commit does not
 * wait for the WAL to reach the disk (a tenth of the cost here): a crash
 * may lose the appends of its last moment, never a Task's data. Nor does
 * `ended`'s: a crash may lose the end of a log written in its last moment,
 * and that log is then kept until its Task is deleted (by `delete` or the
 * Task retention sweep), as a log whose writer stopped before its end is. `delete` and the
 * Task retention sweep delete the Task's rows in the statement that deletes
 * the Task (`eventCleanupCtes`).
 */

/** The event tables' names: a checked name of at most 48 characters, or `<table>_events` (55), leaves room for `_ends_at`. */
export function eventTables(eventTable: string) {
  return { events: `"${eventTable}"`, ends: `"${eventTable}_ends"` }
}

export function eventSchemaSql(eventTable: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS "${eventTable}" (`,
    `  task_id text COLLATE "C" NOT NULL,`,
    `  position bigint NOT NULL,`,
    `  event text NOT NULL,`,
    `  PRIMARY KEY (task_id, position)`,
    `);`,
    `CREATE TABLE IF NOT EXISTS "${eventTable}_ends" (`,
    `  task_id text COLLATE "C" PRIMARY KEY,`,
    `  expires_at timestamptz NOT NULL`,
    `);`,
    `CREATE INDEX IF NOT EXISTS "${eventTable}_ends_at" ON "${eventTable}_ends" (expires_at);`,
  ]
}

/** The CTEs that delete the logs of the Task ids a CTE named `gone` returns: added to the statements that delete Tasks. */
export function eventCleanupCtes(eventTable: string): string {
  const { events, ends } = eventTables(eventTable)
  return `gone_events AS (DELETE FROM ${events} WHERE task_id IN (SELECT id FROM gone)),
          gone_event_ends AS (DELETE FROM ${ends} WHERE task_id IN (SELECT id FROM gone))`
}

interface PgQueryable {
  query<Row = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: Row[]; rowCount: number | null }>
  /** A named query: prepared once per connection, then only bound and run. */
  query<Row = Record<string, unknown>>(query: { name: string; text: string; values?: unknown[] }): Promise<{ rows: Row[]; rowCount: number | null }>
}

/** What PostgresEventLog needs of its PostgresTaskStore. */
export interface PostgresEventHost extends EventLogHost {
  eventTable: string
  pool(): Promise<PgQueryable>
}

/** Logs one sweep statement deletes: each batch is its own short transaction. */
const SWEEP_BATCH = 100
/** Most appends (or ends) one statement carries. */
const WRITE_BATCH = 256

interface Append {
  key: string
  positions: number[]
  texts: string[]
}

export class PostgresEventLog implements EventLog {
  private readonly sql: ReturnType<typeof statements>
  /** An ES private field: its timer stays out of JSON.stringify of the store. */
  readonly #sweeper: RetentionSweeper
  private stopping = false
  private readonly appends = new GroupCommit<Append, number[]>((batch) => this.appendBatch(batch), { maxBatch: WRITE_BATCH, inFlight: 1 })
  private readonly ends = new GroupCommit<string, void>((keys) => this.endBatch(keys), { maxBatch: WRITE_BATCH, inFlight: 1 })

  constructor(private readonly host: PostgresEventHost) {
    this.sql = statements(host.eventTable)
    // The timer only: what is due is judged by the database's clock, whatever the cutoff by ours.
    this.#sweeper = eventSweeper(host.retentionMs, () => this.removeExpired(), host.report)
  }

  async append(taskId: string, events: readonly LoggedEvent[]): Promise<number[]> {
    this.host.assertOpen()
    assertAppend(taskId, events)
    const key = this.host.keyOf(taskId)
    if (events.length === 0) return []
    // Serialized before anything is written: an event that is not JSON refuses the whole append.
    const texts = events.map(({ event }) => JSON.stringify(event))
    return this.appends.add({ key, positions: events.map((e) => e.position), texts })
  }

  /**
   * One statement for the appends of a batch, rows in the order given. Each append is told the positions it
   * did not insert; a position two appends in the batch both give is the first's, as if they ran one by one.
   */
  private async appendBatch(batch: Append[]): Promise<number[][]> {
    const pool = await this.host.pool()
    const keys = batch.flatMap(({ key, positions }) => positions.map(() => key))
    const { rows } = await pool.query<{ task_id: string; position: string }>({
      name: this.sql.appendName,
      text: this.sql.append,
      values: [keys, batch.flatMap((append) => append.positions), batch.flatMap((append) => append.texts)],
    })
    const inserted = new Set(rows.map((row) => `${row.position}:${row.task_id}`))
    return batch.map(({ key, positions }) => positions.filter((position) => !inserted.delete(`${position}:${key}`)))
  }

  private async endBatch(keys: string[]): Promise<void[]> {
    const pool = await this.host.pool()
    await pool.query({ name: this.sql.endedName, text: this.sql.ended, values: [keys, this.host.retentionMs] })
    return keys.map(() => undefined)
  }

  async read(taskId: string, after: number, limit: number): Promise<LoggedEvent[]> {
    this.host.assertOpen()
    assertTaskId(taskId)
    if (!(limit > 0) || after >= Number.MAX_SAFE_INTEGER) return []
    const pool = await this.host.pool()
    // Whole numbers, so the comparison stays on the key's index.
    const from = after > 0 ? Math.floor(after) : 0
    const { rows } = await pool.query<{ position: string; event: string }>(this.sql.read, [textKey(taskId), from, Math.floor(Math.min(limit, Number.MAX_SAFE_INTEGER))])
    return rows.map((row) => ({ position: Number(row.position), event: JSON.parse(row.event) as JsonObject }))
  }

  async lastPosition(taskId: string): Promise<number> {
    this.host.assertOpen()
    assertTaskId(taskId)
    const pool = await this.host.pool()
    const { rows } = await pool.query<{ last: string | null }>(this.sql.lastPosition, [textKey(taskId)])
    return Number(rows[0]?.last ?? 0)
  }

  async ended(taskId: string): Promise<void> {
    this.host.assertOpen()
    assertTaskId(taskId)
    await this.ends.add(this.host.keyOf(taskId))
  }

  /** Starts the sweeps (the store's pool and tables are ready). */
  start(): void {
    this.#sweeper.start()
  }

  /** Stops the sweeps; one under way ends after its batch. */
  stop(): Promise<void> {
    this.stopping = true
    return this.#sweeper.stop()
  }

  /** One sweep: batch after batch of expired logs until one comes back short, or the store closes. */
  private async removeExpired(): Promise<number> {
    const pool = await this.host.pool()
    let removed = 0
    while (!this.stopping) {
      const { rowCount } = await pool.query(this.sql.removeExpired, [SWEEP_BATCH])
      removed += rowCount ?? 0
      if ((rowCount ?? 0) < SWEEP_BATCH) break
    }
    return removed
  }
}

function statements(eventTable: string) {
  const { events, ends } = eventTables(eventTable)
  return {
    // One statement whatever the batch: the Tasks' keys, positions and texts as three arrays, unnested side by side.
    // Its commit does not wait for the WAL to reach the disk (set_config is local to the statement's
    // own transaction): a crash may lose the last appends of the moment, never a Task's data.
    appendName: "tn_event_append",
    append: `INSERT INTO ${events} (task_id, position, event)
             SELECT t, p, e FROM (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed,
                                 unnest($1::text[], $2::bigint[], $3::text[]) AS given(t, p, e)
             ON CONFLICT (task_id, position) DO NOTHING
             RETURNING task_id, position`,
    read: `SELECT position, event FROM ${events} WHERE task_id = $1 AND position > $2::bigint ORDER BY position LIMIT $3::bigint`,
    lastPosition: `SELECT max(position) AS last FROM ${events} WHERE task_id = $1`,
    // The first end counts: a later one does not extend the log's time. Not waiting for the WAL's flush either (see the class).
    endedName: "tn_event_ended",
    ended: `INSERT INTO ${ends} (task_id, expires_at)
            SELECT DISTINCT k, now() + $2::float8 * interval '1 millisecond' FROM (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed,
                                                                                unnest($1::text[]) AS k
            ON CONFLICT (task_id) DO NOTHING`,
    removeExpired: `WITH due AS (
                      SELECT task_id FROM ${ends} WHERE expires_at <= now() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED),
                    gone_events AS (DELETE FROM ${events} WHERE task_id IN (SELECT task_id FROM due))
                    DELETE FROM ${ends} WHERE task_id IN (SELECT task_id FROM due)`,
  }
}
