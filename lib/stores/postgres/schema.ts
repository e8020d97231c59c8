import type { PgPool } from "./pg-driver.js"
import { pushSchemaSql, pushTables } from "./push.js"
import { eventSchemaSql, eventTables } from "./events.js"

/*
 * The store's tables, created on first use if they are missing. The schema,
 * as `PostgresTaskStore.schemaSql()` returns it for the default names; an
 * operator may run it by hand, and the store then needs no CREATE privilege:
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
 */

/** The store's own tables, beside which its push and event tables are named. */
export interface TableNames {
  table: string
  leaseTable: string
  eventTable: string
}

/** Lowercase only, so a name means the same table quoted or not; short enough for the derived index and channel names to fit Postgres's 63 bytes. */
const NAME = /^[a-z_][a-z0-9_]{0,47}$/
const NAME_RULE = "a lowercase SQL name (a-z, 0-9 and _, not starting with a digit, at most 48 characters)"
/** Errors two servers' concurrent CREATE ... IF NOT EXISTS can hit: unique_violation, duplicate_table, duplicate_object. */
const CREATE_RACE_CODES = new Set(["23505", "42P07", "42710"])

/** A name option (a table, a channel), checked. */
export function checkName(option: string, value: unknown): string {
  if (typeof value !== "string" || !NAME.test(value)) {
    const got = typeof value === "string" ? JSON.stringify(value.slice(0, 80)) : `a ${typeof value}`
    throw new TypeError(`PostgresTaskStore: ${option} should be ${NAME_RULE}, got ${got}`)
  }
  return value
}

/** The table names the options give, checked, with the defaults for those not given. */
/** The table options of PostgresTaskStoreOptions (named here, not imported: store.ts imports this module). */
export function checkNames(opts: { table?: string; leaseTable?: string; eventTable?: string }): TableNames {
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

/** The SQL that creates the tables and indexes (see the comment at the top). */
export function schemaSql({ table, leaseTable, eventTable }: TableNames): string {
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

/** Ready: every table, and every column added since a table's first shape (pairs of $2 and $3: the tasks' tenant, the outbox's and dead letters' trace_context). */
const TABLES_EXIST = `SELECT bool_and(to_regclass(name) IS NOT NULL)
                     AND (SELECT count(*) FROM unnest($2::text[], $3::text[]) AS added(tab, col)
                           WHERE EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(added.tab) AND attname = added.col AND NOT attisdropped)) = cardinality($2::text[]) AS ready
                    FROM unnest($1::text[]) AS name`

/** Creates what is missing. Two servers starting at once may race; the loser's retry finds the winner's committed tables. */
export async function createTables(pool: PgPool, names: TableNames): Promise<void> {
  const table = `"${names.table}"`
  const { configs, outbox, dead } = pushTables(names.table)
  const { events, ends } = eventTables(names.eventTable)
  const added = [table, outbox, dead]
  const { rows } = await pool.query<{ ready: boolean }>(TABLES_EXIST, [[table, `"${names.leaseTable}"`, configs, outbox, dead, events, ends], added, ["tenant", "trace_context", "trace_context"]])
  if (rows[0].ready) return
  const schema = schemaSql(names)
  try {
    await pool.query(schema)
  } catch (err) {
    if (!CREATE_RACE_CODES.has((err as { code?: string }).code ?? "")) throw err
    await pool.query(schema)
  }
}
