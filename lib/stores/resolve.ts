import type { TaskStoreOptions } from "./background-errors.js"
import { FileTaskStore } from "./file/store.js"
import { InMemoryTaskStore } from "./memory/store.js"
import { NatsTaskStore } from "./nats/store.js"
import { PostgresTaskStore } from "./postgres/store.js"
import { isTaskStore, type TaskStore } from "./task-store.js"
import { withoutPassword } from "../url-credentials.js"

/**
 * What `serve()`'s `a2a.store` and `resolveStore()` accept. Any other string type-checks (a selector
 * often comes from configuration) and is refused when resolved; `string & {}` keeps the listed forms
 * from collapsing into plain `string`, so editors still show them.
 */
export type StoreSelector = TaskStore | "memory" | `file:${string}` | `postgres://${string}` | `postgresql://${string}` | `nats://${string}` | (string & {})

/** What a store built from a selector is given: the same for every kind, so a server routes every store's background errors, and sets its retention, one way. */
export type ResolveStoreOptions = TaskStoreOptions

const ACCEPTED = `"memory", "file:<dir>", "postgres://…", "nats://…" or an object with get(id) and save(task)`

/**
 * Turns a store selector into a TaskStore: omitted or "memory" → a new
 * InMemoryTaskStore; "file:<dir>" → a FileTaskStore on that directory;
 * "postgres://…" (or "postgresql://…") → a PostgresTaskStore, with
 * `?table=` naming its table; "nats://…" → a NatsTaskStore, with
 * `?bucket=` naming its KV bucket; an object with get/save → itself
 * (`options` are for the stores built here: a host's object keeps its own
 * retention). Anything else throws. No store does I/O here: each opens on
 * first use (see `TaskStore.open`).
 */
export function resolveStore(store?: StoreSelector, options: ResolveStoreOptions = {}): TaskStore {
  const { onError, retention } = options
  const common: TaskStoreOptions = retention === undefined ? { onError } : { onError, retention }
  if (store === undefined || store === "memory") return new InMemoryTaskStore(common)
  if (typeof store === "string") {
    if (store.startsWith("file:")) {
      const dir = store.slice("file:".length)
      if (dir.length === 0) throw new Error(`A2A store "file:" names no directory: write "file:<dir>", e.g. "file:./.toolnexus/tasks"`)
      return new FileTaskStore(dir, common)
    }
    if (/^postgres(ql)?:\/\//.test(store)) {
      const { url, name } = splitNameParam(store, "table")
      return new PostgresTaskStore(url, name ? { ...common, table: name } : common)
    }
    if (store.startsWith("nats://")) {
      const { url, name } = splitNameParam(store, "bucket")
      return new NatsTaskStore(url, name ? { ...common, bucket: name } : common)
    }
    throw new Error(`Unknown A2A store ${JSON.stringify(withoutPassword(store))}: expected ${ACCEPTED}`)
  }
  if (isTaskStore(store)) {
    if (retention !== undefined) {
      throw new Error("A2A store: options.retention applies to the stores built from a selector; a store object of your own keeps (or sweeps) its Tasks as it was built to")
    }
    return store
  }
  throw new Error(`Unknown A2A store (${describe(store)}): expected ${ACCEPTED}`)
}

/** Takes our own `?table=` / `?bucket=` off a connection URL, so the driver never sees it. */
function splitNameParam(selector: string, param: string): { url: string; name?: string } {
  let parsed: URL
  try {
    parsed = new URL(selector)
  } catch {
    throw new Error(`A2A store ${JSON.stringify(withoutPassword(selector))} is not a valid URL`)
  }
  const name = parsed.searchParams.get(param) ?? undefined
  parsed.searchParams.delete(param)
  return { url: parsed.toString(), name }
}

function describe(value: unknown): string {
  if (value === null) return "null"
  if (typeof value === "object") return "an object without get/save methods"
  return `a ${typeof value}`
}
