// The official @a2a-js/sdk 1.3 on Express with its DatabaseTaskStore (Kysely over pg) and server C's echo executor.
// argv: <postgres URL> <table>. The table is made as the SDK's own migration (`a2a-db upgrade`, 0001_create_tasks)
// makes it, when missing; the bench drops it after.
import { Kysely, PostgresDialect } from "kysely"
import pg from "pg"
import { DatabaseTaskStore } from "@a2a-js/sdk/server/database"
import { reportStartFailure } from "../child.mjs"
import { serveSdk } from "./sdk-app.mjs"
import { EchoExecutor } from "./sdk-echo.mjs"

const [url, table] = process.argv.slice(2)

/** The SDK's task table (its migration 0001_create_tasks on Postgres): the same columns, key and indexes. */
/** @param {string} name */
const sdkTaskTableSql = (name) => `
  CREATE TABLE IF NOT EXISTS "${name}" (
    tenant varchar(255) COLLATE "C" NOT NULL,
    owner varchar(255) COLLATE "C" NOT NULL,
    id varchar(36) COLLATE "C" NOT NULL,
    context_id varchar(36) COLLATE "C" NOT NULL,
    status_last_updated bigint NOT NULL,
    status_state varchar(255) COLLATE "C",
    status text,
    artifacts text,
    history text,
    metadata text,
    protocol_version varchar(255),
    CONSTRAINT "${name}_pkey" PRIMARY KEY (tenant, owner, id)
  );
  CREATE INDEX IF NOT EXISTS "${name}_scope_updated_idx" ON "${name}" (tenant, owner, status_last_updated, id);
  CREATE INDEX IF NOT EXISTS "${name}_scope_context_updated_idx" ON "${name}" (tenant, owner, context_id, status_last_updated, id);`

/** @type {Kysely<any> | undefined} */
let db
try {
  if (!url || !/^[a-z_][a-z0-9_]*$/.test(table ?? "")) throw new Error("usage: sdk-db.mjs <postgres URL> <table>")
  // pg's Pool as Kysely's documentation builds it (10 connections, as ours).
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  await pool.query(sdkTaskTableSql(table))
  db = new Kysely({ dialect: new PostgresDialect({ pool }) })
} catch (err) {
  reportStartFailure(err)
}
if (db) {
  const opened = db
  await serveSdk(new EchoExecutor(), "echo agent for the benchmark, DatabaseTaskStore on Postgres", {
    taskStore: new DatabaseTaskStore(db, { tableName: table }),
    close: () => opened.destroy(),
  })
}
