import { isVisibleTo } from "../internals.js"
import type { A2ATask, TaskState } from "../types.js"

/** What ListTasks asks a store for, in the stored form's terms. */
export interface TaskQuery {
  /** Only Tasks this principal may see (its own, and Tasks created without authentication). */
  principal?: string
  contextId?: string
  status?: TaskState
  /** Only Tasks whose status changed at or after this ISO-8601 time. */
  statusTimestampAfter?: string
  /** 1-100; default 50. */
  pageSize?: number
  /** A `nextPageToken` from an earlier page of the same query. */
  pageToken?: string
  /** Default false, as in ListTasks: listed Tasks come without `artifacts` unless asked. */
  includeArtifacts?: boolean
}

export interface TaskPage {
  /** Newest status first; ties broken by id, descending. */
  tasks: A2ATask[]
  /** Empty on the last page. */
  nextPageToken: string
  /** How many Tasks match the query across all pages. */
  totalSize: number
  pageSize: number
}

export const DEFAULT_PAGE_SIZE = 50
export const MAX_PAGE_SIZE = 100

/** Where a page ends: the sort key of its last Task. */
interface Cursor {
  t: string
  id: string
}

/** Thrown for a page token this module did not make. */
export class InvalidPageTokenError extends Error {
  constructor() {
    super("pageToken is not a token from an earlier ListTasks page")
    this.name = "InvalidPageTokenError"
  }
}

export function encodePageToken(task: A2ATask): string {
  const cursor: Cursor = { t: task.status.timestamp ?? "", id: task.id }
  return Buffer.from(JSON.stringify(cursor)).toString("base64url")
}

export function decodePageToken(token: string): Cursor {
  try {
    const cursor = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as Cursor
    if (typeof cursor?.t === "string" && typeof cursor?.id === "string") return cursor
  } catch {
    // fall through
  }
  throw new InvalidPageTokenError()
}

/** Newest first: by status timestamp, then by id, both descending. */
function compareNewestFirst(a: Cursor, b: Cursor): number {
  if (a.t !== b.t) return a.t < b.t ? 1 : -1
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0
}

const keyOf = (task: A2ATask): Cursor => ({ t: task.status.timestamp ?? "", id: task.id })

/** True when a Task matches the query's filters (not its paging). */
export function matchesQuery(task: A2ATask, query: TaskQuery): boolean {
  if (!isVisibleTo(task, query.principal)) return false
  if (query.contextId !== undefined && task.contextId !== query.contextId) return false
  if (query.status !== undefined && task.status.state !== query.status) return false
  if (query.statusTimestampAfter !== undefined && (task.status.timestamp ?? "") < query.statusTimestampAfter) return false
  return true
}

/**
 * One page of `tasks` for a query: the filtering, ordering and cursor rules
 * every store shares. A store that can do this in its database may do it
 * there instead, with the same results.
 */
export function pageOfTasks(tasks: Iterable<A2ATask>, query: TaskQuery): TaskPage {
  const pageSize = query.pageSize ?? DEFAULT_PAGE_SIZE
  const after = query.pageToken ? decodePageToken(query.pageToken) : undefined
  const matching = [...tasks].filter((task) => matchesQuery(task, query)).sort((a, b) => compareNewestFirst(keyOf(a), keyOf(b)))
  const start = after ? matching.findIndex((task) => compareNewestFirst(keyOf(task), after) > 0) : 0
  const page = start < 0 ? [] : matching.slice(start, start + pageSize)
  const more = start >= 0 && start + pageSize < matching.length
  return {
    tasks: query.includeArtifacts ? page : page.map(({ artifacts: _dropped, ...task }) => task),
    nextPageToken: more ? encodePageToken(page[page.length - 1]) : "",
    totalSize: matching.length,
    pageSize,
  }
}
