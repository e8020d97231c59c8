import type { JsonObject } from "../types.js"

/**
 * The event-log capability of a store (`TaskStore.events`): every event a
 * Task's streams were sent, by position, so a peer whose stream dropped
 * resumes it (`Last-Event-ID`) on this server or on any other sharing the
 * store, with no gap and no duplicate. A store without it serves streams as
 * before, and a `Last-Event-ID` gets an error saying resuming is not
 * possible here.
 *
 * Positions are 1, 2, 3 … per Task, given by the server that writes the
 * events (the one running the Task), so they are dense: a reader that asks
 * for the events after `n` and does not get `n + 1` first knows the log no
 * longer holds it. The store keeps the events as they are given; it never
 * reads inside them.
 *
 * The log is not the Task: a lost event never loses data (the Task's own
 * saves hold its state), so a store may write it without waiting for the
 * disk. It is bounded: a Task's log goes `eventRetentionMs` (a store
 * option, default one hour) after `ended`, and with the Task when the Task
 * is deleted (by `delete` or a retention sweep).
 */
export interface EventLog {
  /**
   * Whether other processes read this log (file, Postgres, NATS: several
   * servers on one store follow each other's Tasks through it); then every
   * Task's events are written. False (the memory store): a Task's events are
   * written only from its first stream on, the only ones a peer can ask for
   * again. Absent counts as true.
   */
  readonly shared?: boolean
  /**
   * Adds events of one Task, in the order given (increasing positions).
   * A position the log already holds keeps what it holds, the first writer
   * wins; resolves with the positions of `events` it did not take that way
   * (empty: all taken), so a writer racing another process can move on.
   */
  append(taskId: string, events: readonly LoggedEvent[]): Promise<number[]>
  /** The Task's events with positions above `after`, in position order, at most `limit` of them; none when there is no log. */
  read(taskId: string, after: number, limit: number): Promise<LoggedEvent[]>
  /** The highest position the Task's log holds; 0 when it holds none. */
  lastPosition(taskId: string): Promise<number>
  /**
   * The Task reached a terminal state: its log is removed `eventRetentionMs`
   * from now (a later `ended` does not extend it). Appends after it are
   * still taken, and go with the log.
   */
  ended(taskId: string): Promise<void>
}

/** One event of a Task, as the log keeps it. */
export interface LoggedEvent {
  /** 1, 2, 3 … per Task: the SSE `id:` of the frame that carried it. */
  position: number
  /** The event in the stored (0.3-like) shapes; JSON, opaque to the store. */
  event: JsonObject
}

/** How long a Task's events are kept after it ended, unless a store is told otherwise. */
export const DEFAULT_EVENT_RETENTION_MS = 60 * 60 * 1000

/** Checks a store's `eventRetentionMs` option: a whole number of ms >= 0 (0: removed at the next sweep after the end). */
export function eventRetentionOf(store: string, value: unknown): number {
  if (value === undefined) return DEFAULT_EVENT_RETENTION_MS
  if (!(Number.isSafeInteger(value) && (value as number) >= 0)) {
    throw new TypeError(`${store} options.eventRetentionMs should be a whole number of milliseconds >= 0 (how long a finished Task's stream events are kept for resuming), got ${JSON.stringify(value)}`)
  }
  return value as number
}

/** Checks what `append` is given: whole positions >= 1, increasing, each with an object event. */
export function assertAppend(taskId: unknown, events: readonly LoggedEvent[]): void {
  if (typeof taskId !== "string" || taskId === "") throw new TypeError("event log: taskId should be a non-empty string")
  let last = 0
  for (const { position, event } of events) {
    if (!(Number.isSafeInteger(position) && position > last)) {
      throw new TypeError(`event log: positions should be whole numbers >= 1, increasing, got ${JSON.stringify(position)} after ${last}`)
    }
    if (typeof event !== "object" || event === null || Array.isArray(event)) throw new TypeError(`event log: the event at position ${position} should be an object`)
    last = position
  }
}
