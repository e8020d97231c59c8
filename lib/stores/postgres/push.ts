import { randomUUID } from "node:crypto"
import type { A2ATask } from "../../types.js"
import { fromJsonbDocument, fromTextKey, jsonbDocument, textKey } from "./text.js"
import { assertClaimArgs, assertPushConfig, attemptsOf, keptTraceContext } from "../push-records.js"
import type { PushClaim, PushConfigRecord, PushDeadLetter, PushEvent, PushOutboxItem, PushStore } from "../push-store.js"
import { assertTaskId } from "../task-checks.js"

/**
 * PostgresTaskStore's push capability: three tables beside the Tasks'.
 *
 * - `<table>_pushcfg`: one row per config, keyed (task_id, id).
 * - `<table>_outbox`: one row per notification to one config; `seq` is an
 *   identity column, so the order of the saves that enqueued them. A
 *   notification is enqueued by the very statement that saves its Task
 *   (see `saveWithEventSql`): both land or neither does, and a save the
 *   terminal-state rule refuses enqueues nothing.
 * - `<table>_dead`: the notifications given up on.
 *
 * A claim is one UPDATE (its own short transaction): the head of each
 * (task, config) channel that is due and unclaimed or whose lease ran out
 * by the database's clock, locked FOR UPDATE SKIP LOCKED so replicas
 * claiming at once take different rows. Configs, notifications and dead
 * letters are deleted with their Task (delete and retention sweeps).
 */

/** The push tables' names for a Tasks table; a checked name of at most 48 characters leaves room for the suffixes. */
export function pushTables(table: string) {
  return { configs: `"${table}_pushcfg"`, outbox: `"${table}_outbox"`, dead: `"${table}_dead"` }
}

export function pushSchemaSql(table: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS "${table}_pushcfg" (`,
    `  task_id text COLLATE "C" NOT NULL,`,
    `  id text COLLATE "C" NOT NULL,`,
    `  config jsonb NOT NULL,`,
    `  PRIMARY KEY (task_id, id)`,
    `);`,
    `CREATE TABLE IF NOT EXISTS "${table}_outbox" (`,
    `  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,`,
    `  key text NOT NULL,`,
    `  task_id text COLLATE "C" NOT NULL,`,
    `  config_id text COLLATE "C" NOT NULL,`,
    `  event jsonb NOT NULL,`,
    `  attempts integer NOT NULL DEFAULT 0,`,
    `  not_before bigint NOT NULL,`,
    `  enqueued_at bigint NOT NULL,`,
    `  last_error text,`,
    `  claimed_by text,`,
    `  claim_token text,`,
    `  claim_until timestamptz`,
    `);`,
    `CREATE INDEX IF NOT EXISTS "${table}_outbox_ch" ON "${table}_outbox" (task_id, config_id, seq);`,
    `CREATE TABLE IF NOT EXISTS "${table}_dead" (`,
    `  seq bigint PRIMARY KEY,`,
    `  key text NOT NULL,`,
    `  task_id text COLLATE "C" NOT NULL,`,
    `  config_id text COLLATE "C" NOT NULL,`,
    `  event jsonb NOT NULL,`,
    `  attempts integer NOT NULL,`,
    `  not_before bigint NOT NULL,`,
    `  enqueued_at bigint NOT NULL,`,
    `  last_error text,`,
    `  reason text NOT NULL,`,
    `  dead_at bigint NOT NULL`,
    `);`,
    `CREATE INDEX IF NOT EXISTS "${table}_dead_at" ON "${table}_dead" (dead_at DESC, seq DESC);`,
    `CREATE INDEX IF NOT EXISTS "${table}_dead_task" ON "${table}_dead" (task_id);`,
    // Tables made before trace contexts were kept gain the column; their rows have none.
    `ALTER TABLE "${table}_outbox" ADD COLUMN IF NOT EXISTS trace_context jsonb;`,
    `ALTER TABLE "${table}_dead" ADD COLUMN IF NOT EXISTS trace_context jsonb;`,
  ]
}

/**
 * The CTEs that delete the push rows of the Task ids a CTE named `gone`
 * returns: added to the statements that delete Tasks, so they go together.
 */
export function pushCleanupCtes(table: string): string {
  const { configs, outbox, dead } = pushTables(table)
  return `gone_configs AS (DELETE FROM ${configs} WHERE task_id IN (SELECT id FROM gone)),
          gone_outbox AS (DELETE FROM ${outbox} WHERE task_id IN (SELECT id FROM gone)),
          gone_dead AS (DELETE FROM ${dead} WHERE task_id IN (SELECT id FROM gone))`
}

/**
 * One event of a save as the save statements take it, an element of their
 * jsonb array: the event's JSON text, and its trace context's (none: undefined).
 */
export function outboxElement(event: string, traceContext: string | undefined): string {
  return traceContext === undefined ? `{"event":${jsonbDocument(event)}}` : `{"event":${jsonbDocument(event)},"trace":${jsonbDocument(traceContext)}}`
}

/**
 * The save statement with its notifications: `written` is the save's CTE
 * (the upsert with the terminal-state guard, RETURNING id). Parameters after
 * the save's eight: $9 the events (a jsonb array of outboxElement's, in order), $10 now in ms,
 * $11 the outbox channel, NOTIFYed once at commit when anything was
 * enqueued. Rows are inserted event by event, so each config's seq follows
 * the events' order.
 */
export function saveWithEventSql(table: string, written: string): string {
  const { configs, outbox } = pushTables(table)
  return `WITH written AS (${written}),
          queued AS (
            INSERT INTO ${outbox} (key, task_id, config_id, event, trace_context, not_before, enqueued_at)
            SELECT gen_random_uuid()::text, c.task_id, c.id, e.given -> 'event', e.given -> 'trace', $10, $10
              FROM written JOIN ${configs} c ON c.task_id = written.id
             CROSS JOIN LATERAL jsonb_array_elements($9::jsonb) WITH ORDINALITY AS e(given, n)
             ORDER BY e.n, c.id
            RETURNING seq)
          SELECT pg_notify($7, w.id), (SELECT count(*) FROM (SELECT pg_notify($11, $1) FROM queued LIMIT 1) AS woken),
                 (SELECT count(*) FROM queued)::int AS queued
            FROM written w`
}

/**
 * saveWithEventSql for a batch of Tasks, one group commit: `given` selects
 * the batch's rows (with their `events`), `written` is its upsert (reading
 * them from the CTE `given`, RETURNING id).
 * Parameters: $1-$7 the rows' columns as arrays, $8 the channel, $9 the
 * terminal states (as the single save's), $10 each row's events (a jsonb
 * array's text of outboxElement's, or NULL), $11 now in ms, $12 the outbox channel. One row
 * back per Task written, with how many notifications it enqueued.
 */
export function saveBatchWithEventsSql(table: string, given: string, written: string): string {
  const { configs, outbox } = pushTables(table)
  return `WITH given AS (${given}),
          written AS (${written}),
          queued AS (
            INSERT INTO ${outbox} (key, task_id, config_id, event, trace_context, not_before, enqueued_at)
            SELECT gen_random_uuid()::text, c.task_id, c.id, e.given -> 'event', e.given -> 'trace', $11, $11
              FROM written JOIN given g ON g.id = written.id JOIN ${configs} c ON c.task_id = written.id
             CROSS JOIN LATERAL jsonb_array_elements(g.events::jsonb) WITH ORDINALITY AS e(given, n)
             ORDER BY written.id, e.n, c.id
            RETURNING seq, task_id)
          SELECT w.id, pg_notify($8, w.id), (SELECT count(*) FROM (SELECT pg_notify($12, task_id) FROM queued LIMIT 1) AS woken),
                 (SELECT count(*) FROM queued q WHERE q.task_id = w.id)::int AS queued
            FROM written w`
}

interface PgQueryable {
  query<Row = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: Row[]; rowCount: number | null }>
}

interface OutboxRow {
  seq: string
  key: string
  task_id: string
  config_id: string
  event: string
  attempts: number
  not_before: string
  enqueued_at: string
  last_error: string | null
  trace_context: string | null
}

/** What PostgresPushStore needs of its PostgresTaskStore. */
export interface PostgresPushHost {
  table: string
  pool(): Promise<PgQueryable>
  /** The store's save, with the events enqueued by the same statement; resolves with how many it enqueued. */
  saveWithEvent(task: A2ATask, events: readonly PushEvent[]): Promise<number>
  /** LISTEN on the outbox channel (the store's change listener for it). */
  watchOutbox(onDue: () => void): Promise<() => Promise<void>>
}

const STORE = "PostgresTaskStore"

export class PostgresPushStore implements PushStore {
  private readonly sql: ReturnType<typeof statements>

  constructor(private readonly host: PostgresPushHost) {
    this.sql = statements(host.table)
  }

  async putConfig(config: PushConfigRecord): Promise<void> {
    assertPushConfig(config, STORE)
    const pool = await this.host.pool()
    await pool.query(this.sql.putConfig, [textKey(config.taskId), textKey(config.id), jsonbDocument(JSON.stringify(config))])
  }

  async getConfig(taskId: string, id: string): Promise<PushConfigRecord | undefined> {
    assertTaskId(taskId)
    const pool = await this.host.pool()
    const { rows } = await pool.query<{ config: string }>(this.sql.getConfig, [textKey(taskId), textKey(String(id))])
    return rows.length === 0 ? undefined : (fromJsonbDocument(rows[0].config) as PushConfigRecord)
  }

  async listConfigs(taskId: string): Promise<PushConfigRecord[]> {
    assertTaskId(taskId)
    const pool = await this.host.pool()
    const { rows } = await pool.query<{ config: string }>(this.sql.listConfigs, [textKey(taskId)])
    return rows.map((row) => fromJsonbDocument(row.config) as PushConfigRecord)
  }

  async deleteConfig(taskId: string, id: string): Promise<void> {
    assertTaskId(taskId)
    const pool = await this.host.pool()
    await pool.query(this.sql.deleteConfig, [textKey(taskId), textKey(String(id))])
  }

  saveWithEvent(task: A2ATask, ...events: PushEvent[]): Promise<number> {
    return this.host.saveWithEvent(task, events)
  }

  async claim(instance: string, limit: number, leaseMs: number, now: number): Promise<PushClaim[]> {
    assertClaimArgs(STORE, instance, limit, leaseMs, now)
    if (limit === 0) return []
    const token = randomUUID()
    const pool = await this.host.pool()
    const { rows } = await pool.query<OutboxRow & { config: string }>(this.sql.claim, [textKey(instance), token, leaseMs, now, limit])
    return rows
      .map((row) => ({ item: itemOf(row), config: fromJsonbDocument(row.config) as PushConfigRecord, token: `${row.seq}:${token}` }))
      .sort((a, b) => a.item.seq - b.item.seq)
  }

  async oldestPendingAt(): Promise<number | undefined> {
    const pool = await this.host.pool()
    const { rows } = await pool.query<{ enqueued_at: string }>(this.sql.oldestPending)
    return rows.length === 0 ? undefined : Number(rows[0].enqueued_at)
  }

  async ack(claim: PushClaim): Promise<void> {
    const pool = await this.host.pool()
    await pool.query(this.sql.ack, [claim.item.seq])
  }

  async retryLater(claim: PushClaim, notBefore: number, error: string): Promise<void> {
    const pool = await this.host.pool()
    await pool.query(this.sql.retryLater, [claim.item.seq, tokenOf(claim), notBefore, textKey(String(error))])
  }

  async deadLetter(claim: PushClaim, reason: string, attempts?: number): Promise<void> {
    const pool = await this.host.pool()
    await pool.query(this.sql.deadLetter, [claim.item.seq, tokenOf(claim), textKey(String(reason)), Date.now(), attemptsOf(attempts, claim.item)])
  }

  async listDeadLetters(limit: number): Promise<PushDeadLetter[]> {
    if (!(Number.isInteger(limit) && limit >= 0)) throw new RangeError(`${STORE}.push.listDeadLetters: limit should be a whole number >= 0`)
    const pool = await this.host.pool()
    const { rows } = await pool.query<OutboxRow & { reason: string; dead_at: string }>(this.sql.listDeadLetters, [limit])
    return rows.map((row) => ({ ...itemOf(row), reason: fromTextKey(row.reason), deadAt: Number(row.dead_at) }))
  }

  watchOutbox(onDue: () => void): Promise<() => Promise<void>> {
    if (typeof onDue !== "function") throw new TypeError(`${STORE}.push.watchOutbox needs a function`)
    return this.host.watchOutbox(onDue)
  }
}

/** The claim's own token: a retry or dead letter by an instance whose lease was taken over changes nothing. */
function tokenOf(claim: PushClaim): string {
  return claim.token.slice(claim.token.indexOf(":") + 1)
}

function itemOf(row: OutboxRow): PushOutboxItem {
  const item: PushOutboxItem = {
    key: row.key,
    taskId: fromTextKey(row.task_id),
    configId: fromTextKey(row.config_id),
    seq: Number(row.seq),
    event: fromJsonbDocument(row.event) as PushEvent,
    attempts: row.attempts,
    notBefore: Number(row.not_before),
    enqueuedAt: Number(row.enqueued_at),
  }
  if (row.last_error !== null) item.lastError = fromTextKey(row.last_error)
  const traceContext = row.trace_context === null ? undefined : keptTraceContext(fromJsonbDocument(row.trace_context))
  if (traceContext !== undefined) item.traceContext = traceContext
  return item
}

const ITEM_COLUMNS = "seq, key, task_id, config_id, event::text AS event, attempts, not_before, enqueued_at, last_error, trace_context::text AS trace_context"

function statements(table: string) {
  const { configs, outbox, dead } = pushTables(table)
  return {
    // Also before the Task's first save (an inline config): the server deletes it when that save fails.
    putConfig: `INSERT INTO ${configs} (task_id, id, config) VALUES ($1, $2, $3::jsonb)
                ON CONFLICT (task_id, id) DO UPDATE SET config = excluded.config`,
    getConfig: `SELECT config::text AS config FROM ${configs} WHERE task_id = $1 AND id = $2`,
    listConfigs: `SELECT config::text AS config FROM ${configs} WHERE task_id = $1 ORDER BY id`,
    deleteConfig: `WITH gone AS (DELETE FROM ${configs} WHERE task_id = $1 AND id = $2)
                   DELETE FROM ${outbox} WHERE task_id = $1 AND config_id = $2`,
    // The head of each channel only (no lower seq left), due by the caller's clock, leased by the database's.
    claim: `UPDATE ${outbox} AS o
               SET claimed_by = $1, claim_token = $2, claim_until = now() + $3::float8 * interval '1 millisecond'
              FROM (SELECT h.seq FROM ${outbox} h
                     WHERE h.not_before <= $4
                       AND (h.claim_until IS NULL OR h.claim_until <= now())
                       AND NOT EXISTS (SELECT 1 FROM ${outbox} x WHERE x.task_id = h.task_id AND x.config_id = h.config_id AND x.seq < h.seq)
                     ORDER BY h.seq
                     LIMIT $5
                     FOR UPDATE OF h SKIP LOCKED) AS due,
                   ${configs} AS c
             WHERE o.seq = due.seq AND c.task_id = o.task_id AND c.id = o.config_id
         RETURNING o.seq, o.key, o.task_id, o.config_id, o.event::text AS event, o.attempts, o.not_before, o.enqueued_at, o.last_error,
                   o.trace_context::text AS trace_context, c.config::text AS config`,
    // Delivered is delivered, whoever holds the lease now.
    ack: `DELETE FROM ${outbox} WHERE seq = $1`,
    // The first in the outbox's order (its primary key): one index read, whatever the outbox holds.
    oldestPending: `SELECT enqueued_at FROM ${outbox} ORDER BY seq LIMIT 1`,
    retryLater: `UPDATE ${outbox}
                    SET attempts = attempts + 1, not_before = $3, last_error = $4, claimed_by = NULL, claim_token = NULL, claim_until = NULL
                  WHERE seq = $1 AND claim_token = $2`,
    deadLetter: `WITH moved AS (DELETE FROM ${outbox} WHERE seq = $1 AND claim_token = $2 RETURNING *)
                 INSERT INTO ${dead} (seq, key, task_id, config_id, event, attempts, not_before, enqueued_at, last_error, trace_context, reason, dead_at)
                 SELECT seq, key, task_id, config_id, event, GREATEST(attempts, $5), not_before, enqueued_at, last_error, trace_context, $3, $4 FROM moved`,
    listDeadLetters: `SELECT ${ITEM_COLUMNS}, reason, dead_at FROM ${dead} ORDER BY dead_at DESC, seq DESC LIMIT $1`,
  }
}
