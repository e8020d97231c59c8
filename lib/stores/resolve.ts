import { FileTaskStore } from "./file.js"
import { InMemoryTaskStore } from "./memory.js"
import { isTaskStore, type TaskStore } from "./task-store.js"

/** What `serve()`'s `a2a.store` and `resolveStore()` accept. */
export type StoreSelector = TaskStore | "memory" | `file:${string}` | string

const ACCEPTED = `"memory", "file:<dir>" or an object with get(id) and save(task)`

/**
 * Turns a store selector into a TaskStore: omitted or "memory" → a new
 * InMemoryTaskStore; "file:<dir>" → a FileTaskStore on that directory; an
 * object with get/save → itself. Anything else throws.
 */
export function resolveStore(store?: StoreSelector): TaskStore {
  if (store === undefined || store === "memory") return new InMemoryTaskStore()
  if (typeof store === "string") {
    if (store.startsWith("file:")) {
      const dir = store.slice("file:".length)
      if (dir.length === 0) throw new Error(`A2A store "file:" names no directory: write "file:<dir>", e.g. "file:./.toolnexus/tasks"`)
      return new FileTaskStore(dir)
    }
    throw new Error(`Unknown A2A store ${JSON.stringify(store)}: expected ${ACCEPTED}`)
  }
  if (isTaskStore(store)) return store
  throw new Error(`Unknown A2A store (${describe(store)}): expected ${ACCEPTED}`)
}

function describe(value: unknown): string {
  if (value === null) return "null"
  if (typeof value === "object") return "an object without get/save methods"
  return `a ${typeof value}`
}
