import { ownerOf, tenantOf } from "../internals.js"
import type { A2ATask, TaskState } from "../types.js"

/** What ListTasks asks a store for, in the stored form's terms. */
export interface TaskQuery {
  /**
   * Only Tasks whose owner is one of these: a principal's name for the
   * Tasks it created, `null` for Tasks created without authentication.
   * Absent: Tasks of any owner. An empty list matches nothing.
   */
  owners?: ReadonlyArray<string | null>
  /**
   * Only Tasks created under this tenant; `null`: only those created under
   * none. Absent: Tasks of every tenant (the server always names one, or null).
   */
  tenant?: string | null
  contextId?: string
  status?: TaskState
  /** Only Tasks whose status changed at or after this ISO-8601 time. */
  statusTimestampAfter?: string
  /** A positive integer, default 50; ListTasks asks for at most MAX_PAGE_SIZE. */
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

const DEFAULT_PAGE_SIZE = 50
/** The largest page ListTasks lets a peer ask for; the server reads the store in pages this size too. */
export const MAX_PAGE_SIZE = 100

/**
 * The fields of a Task that list() filters and orders by, and nothing
 * else: what a store may keep beside a Task to list it without reading it.
 */
export interface ListKey {
  id: string
  contextId: string | undefined
  state: TaskState
  /** status.timestamp, "" when missing. */
  timestamp: string
  owner: ReturnType<typeof ownerOf>
  tenant: ReturnType<typeof tenantOf>
}

export function listKeyOf(task: A2ATask): ListKey {
  return { id: task.id, contextId: task.contextId, state: task.status.state, timestamp: task.status.timestamp ?? "", owner: ownerOf(task), tenant: tenantOf(task) }
}

/** Where a page ends: the sort key of its last Task. */
interface Cursor {
  t: string
  id: string
}

/** Thrown for a page token this module did not make. */
class InvalidPageTokenError extends Error {
  constructor() {
    super("pageToken is not a token from an earlier ListTasks page")
    this.name = "InvalidPageTokenError"
  }
}

/** The page token of a page ending at the Task with this status timestamp ("" when none) and id. */
export function encodeCursor(t: string, id: string): string {
  const cursor: Cursor = { t, id }
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

/**
 * Refuses a query no store could answer, with the field named: every store
 * checks with this before it lists. Returns the page size to use.
 */
export function checkQuery(query: TaskQuery): number {
  if (query === null || typeof query !== "object") throw new TypeError("list needs a query object, e.g. {} for every Task")
  const pageSize = query.pageSize ?? DEFAULT_PAGE_SIZE
  if (!(Number.isInteger(pageSize) && pageSize > 0)) throw new RangeError(`list: query.pageSize should be a positive integer, got ${String(pageSize)}`)
  const owners = query.owners
  if (owners !== undefined && !(Array.isArray(owners) && owners.every((owner) => owner === null || typeof owner === "string"))) {
    throw new TypeError("list: query.owners should be an array of principal names (strings) and null (for Tasks without an owner)")
  }
  if (query.tenant !== undefined && query.tenant !== null && typeof query.tenant !== "string") {
    throw new TypeError("list: query.tenant should be a tenant's name, or null for the Tasks created under none")
  }
  return pageSize
}

/** Newest first: by status timestamp, then by id, both descending. */
function compareNewestFirst(aTime: string, aId: string, bTime: string, bId: string): number {
  if (aTime !== bTime) return aTime < bTime ? 1 : -1
  return aId < bId ? 1 : aId > bId ? -1 : 0
}

/** True when a Task's key matches the query's filters (not its paging). */
function matchesQuery(key: ListKey, query: TaskQuery): boolean {
  if (query.owners !== undefined && (key.owner === false || !query.owners.includes(key.owner))) return false
  if (query.tenant !== undefined && key.tenant !== query.tenant) return false
  if (query.contextId !== undefined && key.contextId !== query.contextId) return false
  if (query.status !== undefined && key.state !== query.status) return false
  if (query.statusTimestampAfter !== undefined && key.timestamp < query.statusTimestampAfter) return false
  return true
}

/** One page of what a query asks for, as the items it came from: a store keeping keys beside its Tasks pages those. */
interface PageOf<T> {
  items: T[]
  nextPageToken: string
  totalSize: number
  pageSize: number
}

/**
 * One page of `items` for a query, each seen through its ListKey: the
 * filtering, ordering and cursor rules every store shares.
 */
export function pageOf<T>(items: Iterable<T>, keyOf: (item: T) => ListKey, query: TaskQuery): PageOf<T> {
  const pageSize = checkQuery(query)
  const after = query.pageToken ? decodePageToken(query.pageToken) : undefined
  const matching: Array<{ key: ListKey; item: T }> = []
  for (const item of items) {
    const key = keyOf(item)
    if (matchesQuery(key, query)) matching.push({ key, item })
  }
  matching.sort((a, b) => compareNewestFirst(a.key.timestamp, a.key.id, b.key.timestamp, b.key.id))
  const start = after ? matching.findIndex(({ key }) => compareNewestFirst(key.timestamp, key.id, after.t, after.id) > 0) : 0
  const page = start < 0 ? [] : matching.slice(start, start + pageSize)
  const last = page[page.length - 1]?.key
  const more = start >= 0 && start + pageSize < matching.length
  return {
    items: page.map((entry) => entry.item),
    nextPageToken: more ? encodeCursor(last.timestamp, last.id) : "",
    totalSize: matching.length,
    pageSize,
  }
}

/**
 * One page of `tasks` for a query, with the rules every store shares. A
 * store that can do this in its database may do it there instead, with
 * the same results.
 */
export function pageOfTasks(tasks: Iterable<A2ATask>, query: TaskQuery): TaskPage {
  const { items, ...page } = pageOf(tasks, listKeyOf, query)
  return { ...page, tasks: query.includeArtifacts ? items : items.map(withoutArtifacts) }
}

/** A listed Task as ListTasks gives it by default. */
export function withoutArtifacts({ artifacts: _dropped, ...task }: A2ATask): A2ATask {
  return task
}
