import type { A2ATask } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { checkQuery, decodePageToken, encodeCursor, withoutArtifacts, type TaskPage, type TaskQuery } from "../list.js"
import type { PgQueryable } from "./pg-driver.js"
import { fromTextKey, taskFrom, textKey } from "./text.js"

/**
 * ListTasks in SQL over the Tasks table (`table`, quoted): one statement, so
 * the page and its total come from one snapshot. Pages run along the
 * (status_ts, id) index, newest first; the page token is the last row's pair.
 * The query is checked before `pool` is asked for a connection.
 */
export async function listTasks(pool: () => Promise<PgQueryable>, table: string, query: TaskQuery, report: ReportError): Promise<TaskPage> {
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
  const db = await pool()
  const { rows } = await db.query<{ total: string; task: string | null; status_ts: string; id: string }>(
    `SELECT total.n::text AS total, page.task, page.status_ts, page.id
       FROM (SELECT count(*) AS n FROM ${table} WHERE ${matching}) AS total
       LEFT JOIN LATERAL (
         SELECT (${document})::text AS task, status_ts, id FROM ${table}
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
      report(err, "list", id)
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

/** The WHERE clause of `TaskQuery.owners`; `param` adds a parameter and gives its placeholder. */
function ownerFilter(owners: ReadonlyArray<string | null>, param: (value: unknown) => string): string {
  const names = owners.filter((owner): owner is string => owner !== null).map(textKey)
  const clauses = [...(names.length > 0 ? [`principal = ANY(${param(names)}::text[])`] : []), ...(owners.includes(null) ? ["principal IS NULL"] : [])]
  return clauses.length === 0 ? "false" : `(${clauses.join(" OR ")})`
}
