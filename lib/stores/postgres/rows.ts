import { ownerOf, tenantOf } from "../../internals.js"
import type { A2ATask } from "../../types.js"
import { assertTask } from "../task-checks.js"
import { ESCAPED, jsonbDocument, textKey } from "./text.js"

/*
 * A Task as the columns of its row. The Task read back from a row is
 * `taskFrom` (text.ts), since the push tables read Tasks too.
 */

/** The btree index on id holds keys up to ~2700 bytes; refusing longer ids up front beats a failure that depends on how well the id compresses. */
const MAX_ID_BYTES = 2048
const MAX_TIMESTAMP_BYTES = 256

/** A Task id as a key column holds it, refused when longer than the key indexes take. */
export function idKey(id: string): string {
  const key = textKey(id)
  if (Buffer.byteLength(key) > MAX_ID_BYTES) throw new RangeError(`PostgresTaskStore stores Task ids of up to ${MAX_ID_BYTES} bytes`)
  return key
}

/** The columns of a Task's row, all of them strings Postgres can hold; `taskId` is the id itself. */
export function rowOf(task: A2ATask) {
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

export type TaskRow = ReturnType<typeof rowOf>
