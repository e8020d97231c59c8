import type { PushStore, TraceContext } from "../stores/push-store.js"
import type { TaskStore } from "../stores/task-store.js"
import type { Telemetry } from "./telemetry.js"

/**
 * The store as the server uses it when observing: its operations timed and
 * traced (get, getText, save, list, delete, and the push capability's
 * saveWithEvent, the save of a state change when push is on), everything else
 * handed through as it is. Made only when metrics are on or a tracer is
 * registered, so a store is untouched otherwise.
 */

/** The shipped stores' kinds, by class name; a host's own store is "custom" (a bounded label). */
const STORE_KINDS: Readonly<Record<string, string>> = {
  InMemoryTaskStore: "memory",
  FileTaskStore: "file",
  PostgresTaskStore: "postgres",
  NatsTaskStore: "nats",
}

/** A store's kind, as the store label names it: a subclass of a shipped store is of its kind. */
export function storeKind(store: TaskStore): string {
  for (let proto: unknown = Object.getPrototypeOf(store); proto !== null && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    const kind = STORE_KINDS[(proto as { constructor?: { name?: string } }).constructor?.name ?? ""]
    if (kind !== undefined) return kind
  }
  return "custom"
}

export function observedStore(store: TaskStore, telemetry: Telemetry): TaskStore {
  const kind = storeKind(store)
  const observe = <T>(operation: string, work: (traceContext: () => TraceContext | undefined) => Promise<T>) => telemetry.storeOperation(kind, operation, work)
  const observed: TaskStore = {
    get: (id) => observe("get", () => store.get(id)),
    save: (task) => observe("save", () => store.save(task)),
  }
  if (store.getText) observed.getText = (id) => observe("get", () => store.getText!(id))
  if (store.list) observed.list = (query) => observe("list", () => store.list!(query))
  if (store.delete) observed.delete = (id) => observe("delete", () => store.delete!(id))
  if (store.open) observed.open = () => store.open!()
  if (store.close) observed.close = () => store.close!()
  if (store.watch) observed.watch = (onChange) => store.watch!(onChange)
  // Read when asked: a store may make its capabilities as it opens.
  Object.defineProperties(observed, {
    leases: { get: () => store.leases, enumerable: true },
    events: { get: () => store.events, enumerable: true },
    push: { get: () => pushOf(store.push), enumerable: true },
  })
  let push: { of: PushStore; observed: PushStore } | undefined
  function pushOf(of: PushStore | undefined): PushStore | undefined {
    if (of === undefined) return undefined
    if (push?.of !== of) push = { of, observed: observedPush(of, (work) => observe("save", work)) }
    return push.observed
  }
  return observed
}

/** The push capability with its saves observed; its other methods called on it as they are. */
function observedPush(push: PushStore, observeSave: <T>(work: (traceContext: () => TraceContext | undefined) => Promise<T>) => Promise<T>): PushStore {
  const observed = Object.create(push) as PushStore
  // Called on the store itself, never on this object: a method that sets a field sets it on the store.
  for (const key of ["putConfig", "getConfig", "listConfigs", "deleteConfig", "claim", "ack", "retryLater", "deadLetter", "listDeadLetters", "watchOutbox", "oldestPendingAt"] as const) {
    const method = (push as unknown as Record<string, unknown>)[key]
    if (typeof method === "function") Object.defineProperty(observed, key, { value: (method as (...args: unknown[]) => unknown).bind(push), enumerable: true })
  }
  observed.saveWithEvent = (task, ...events) =>
    observeSave((traceContext) => {
      // Each notification keeps the trace of the save that enqueues it: its delivery, however late and wherever, continues it.
      const kept = events.length === 0 ? undefined : traceContext()
      return push.saveWithEvent(task, ...(kept === undefined ? events : events.map((event) => ({ ...event, traceContext: kept }))))
    })
  return observed
}
