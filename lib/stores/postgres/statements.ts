import { eventCleanupCtes } from "./events.js"
import { pushCleanupCtes, saveBatchWithEventsSql, saveWithEventSql } from "./push.js"
import type { TableNames } from "./schema.js"

/** Expired leases this old are pruned on any renew: no one asks about a server gone that long. */
const LEASE_PRUNE_AFTER = "1 hour"

/** Every statement but list's and the schema's, written once per store. Names are checked, so quoting them is enough. */
export function statements({ table, leaseTable, eventTable }: TableNames) {
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

export type Statements = ReturnType<typeof statements>
