import type { RetentionOptions } from "./retention.js"

/** What a store was doing when a failure no caller sees happened. */
export interface StoreErrorContext {
  /** The store's class name, e.g. "PostgresTaskStore". */
  store: string
  /**
   * `"list"`: a stored Task that cannot be read was left out of a listing;
   * `"watch"`: the change feed dropped or failed to come back, or a watcher threw;
   * `"connection"`: an idle connection failed or closed (the next call reconnects);
   * `"retention"`: a background sweep of expired finished Tasks failed (the next one tries again);
   * `"push"`: a claim of push notifications skipped a Task whose push files it could not read (the next claim tries again).
   */
  operation: "list" | "watch" | "connection" | "retention" | "push"
  /** The Task concerned, when there is one and its id is known. */
  taskId?: string
}

/** Told of a store's background failures. It should not throw; if it does, the failure goes to the default instead. */
export type StoreErrorHandler = (err: Error, context: StoreErrorContext) => void

/** The options every shipped store takes. */
export interface TaskStoreOptions {
  /**
   * Told of failures no caller sees: an unreadable Task left out of a
   * listing, a change feed that dropped, a watcher that threw, an idle
   * connection that failed. Default: a process warning (type
   * TaskStoreWarning, code TOOLNEXUS_STORE_ERROR), which Node prints to stderr.
   */
  onError?: StoreErrorHandler
  /** Deletes finished Tasks older than `terminalTtl` in the background; omitted, finished Tasks are kept. */
  retention?: RetentionOptions
}

/** A store's background failure as a line. */
function describeStoreError(err: Error, context: StoreErrorContext): string {
  const task = context.taskId === undefined ? "" : ` (task ${JSON.stringify(context.taskId.length > 128 ? context.taskId.slice(0, 128) + "…" : context.taskId)})`
  return `${context.store} ${context.operation}${task}: ${err.message}`
}

/** The default `onError`: a process warning, so a failure nobody asked to hear of still shows. */
const reportAsWarning: StoreErrorHandler = (err, context) => {
  process.emitWarning(describeStoreError(err, context), { type: "TaskStoreWarning", code: "TOOLNEXUS_STORE_ERROR" })
}

/** How a store reports: never throws, whatever it is given. */
export type ReportError = (err: unknown, operation: StoreErrorContext["operation"], taskId?: string) => void

/**
 * The reporter of one store, from its `opts.onError` (checked here, so every
 * store refuses a bad one with the same message).
 */
export function errorReporter(store: string, onError: unknown): ReportError {
  if (onError !== undefined && typeof onError !== "function") {
    throw new TypeError(`${store}: opts.onError should be a function (err, context) => void, got ${onError === null ? "null" : `a ${typeof onError}`}`)
  }
  const handler = (onError as StoreErrorHandler | undefined) ?? reportAsWarning
  return (failure, operation, taskId) => {
    const err = failure instanceof Error ? failure : new Error(String(failure))
    const context: StoreErrorContext = taskId === undefined ? { store, operation } : { store, operation, taskId }
    try {
      handler(err, context)
    } catch {
      // A throwing handler must not take the store's connection or watch down with it; the failure still shows.
      if (handler !== reportAsWarning) reportAsWarning(err, context)
    }
  }
}
