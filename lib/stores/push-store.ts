import type { A2ATask } from "../types.js"

/**
 * The push-notification capability of a store (`TaskStore.push`): the
 * webhooks peers registered for their Tasks, and an outbox of the
 * notifications not yet delivered. A store without it keeps answering the
 * push methods with -32003, and the agent card says push is off.
 *
 * Who may reach a config is decided by its Task (the server reads the Task
 * under the caller's owner rule first); a store never checks owners here.
 */
export interface PushStore {
  /**
   * Creates the config, or replaces the one of the same Task with the same
   * id. It may come before the Task's first save (a config inline with
   * SendMessage is stored first, so the first notifications are not missed);
   * the server deletes it when that save fails.
   */
  putConfig(config: PushConfigRecord): Promise<void>
  /** The Task's config with this id, or undefined. */
  getConfig(taskId: string, id: string): Promise<PushConfigRecord | undefined>
  /** Every config of the Task, ordered by id (the server bounds how many a Task has). */
  listConfigs(taskId: string): Promise<PushConfigRecord[]>
  /** Removes the config and its undelivered notifications; a missing one is not an error. */
  deleteConfig(taskId: string, id: string): Promise<void>
  /**
   * Saves the Task as `TaskStore.save` does (the same checks and refusals,
   * TaskConflictError included) and enqueues, for every config the Task has,
   * one notification of each event given, in the order given (a completion
   * reports its artifact, then its status: one save, two events), after the
   * Task's earlier ones. No event: a plain save.
   * Both land or neither does, as a reader of the store sees it: no
   * acknowledged save is left without its notifications, and no notification
   * reports a save that did not land (a store may write the notifications
   * first and treat them as pending until the Task's save is seen).
   * Resolves with how many notifications it enqueued (0: the Task has no
   * configs, or no event was given), so the server wakes its sender only
   * when there is something to send; a store that cannot tell resolves with
   * nothing, and the sender is woken after every save.
   */
  saveWithEvent(task: A2ATask, ...events: PushEvent[]): Promise<number | void>
  /**
   * Takes up to `limit` notifications that are due (`notBefore` <= `now`)
   * for `instance` for `leaseMs`: for each config of each Task only the
   * lowest `seq` still in the outbox, and none held under an unexpired lease
   * (by another instance or by this one: a notification under way is not
   * handed out twice). A claim not settled (ack, retryLater, deadLetter)
   * before its lease ends can be taken again, by any instance.
   */
  claim(instance: string, limit: number, leaseMs: number, now: number): Promise<PushClaim[]>
  /** Delivered (the webhook answered 2xx): the notification leaves the outbox. */
  ack(claim: PushClaim): Promise<void>
  /** Failed, to be tried again: `attempts` + 1, not before `notBefore`; the lease ends. */
  retryLater(claim: PushClaim, notBefore: number, error: string): Promise<void>
  /**
   * Failed for good: moved to the dead letters (kept for an operator), out
   * of the outbox, with `attempts` as its failed attempts in all (the one
   * that ended it included; default: the claim's own count).
   */
  deadLetter(claim: PushClaim, reason: string, attempts?: number): Promise<void>
  /** The dead letters, newest first, at most `limit`. */
  listDeadLetters(limit: number): Promise<PushDeadLetter[]>
  /** For stores several servers share: calls `onDue` when another process enqueued; the function it gives stops it. */
  watchOutbox?(onDue: () => void): Promise<() => Promise<void>>
  /**
   * When the oldest notification still in the outbox was enqueued (ms since
   * the epoch), undefined when none is; for stores that can tell cheaply. The
   * metrics' push age gauge reads it at each scrape; without it there is no such gauge.
   */
  oldestPendingAt?(): Promise<number | undefined>
}

/** A webhook a peer registered for a Task, as stored. */
export interface PushConfigRecord {
  taskId: string
  /** Unique within the Task: the peer's, else the server's (1.0: a UUID; 0.3: the Task id, as 0.3 peers expect). */
  id: string
  /** The wire version of the request that created it: its notifications are posted in that version's shape. */
  version: "0.3" | "1.0"
  /** http(s) URL, checked when the config was created and again before every send. */
  url: string
  /** Sent as X-A2A-Notification-Token. */
  token?: string
  /** Sent as `Authorization: <scheme> <credentials>` (a 0.3 config: its first scheme). Never logged, never shown to another principal. */
  authentication?: { scheme: string; credentials?: string }
  /** ISO 8601 time of creation. */
  createdAt: string
}

/** What a notification reports: one saved change of a Task. */
export interface PushEvent {
  kind: "status" | "artifact"
  /** The Task as saved with this change, in the stored form (rendered for the wire when sent). */
  task: A2ATask
  /** For an artifact event: the index in `task.artifacts` of the artifact it reports. */
  artifactIndex?: number
  /**
   * Given to a save, not stored in the event: the trace of the save that
   * enqueues it (the server's observe layer sets it when tracing). The store
   * keeps it as its notifications' `PushOutboxItem.traceContext`; one that is
   * not a TraceContext is not kept.
   */
  traceContext?: TraceContext
}

/** A W3C trace context, as the `traceparent` and `tracestate` headers carry it. */
export interface TraceContext {
  traceparent: string
  tracestate?: string
}

/** One notification to one webhook, in the outbox until delivered or dead. */
export interface PushOutboxItem {
  /** Sent as Idempotency-Key: fixed when enqueued, the same on every retry, different between notifications. */
  key: string
  taskId: string
  configId: string
  /** The Task's order of notifications: per config, sent one at a time, lowest first. */
  seq: number
  event: PushEvent
  /** Failed attempts so far. */
  attempts: number
  /** Not to be tried before this time, in ms since the epoch. */
  notBefore: number
  /** When it was enqueued, in ms since the epoch: past the maximum age it goes to the dead letters. */
  enqueuedAt: number
  /** Why the last attempt failed. */
  lastError?: string
  /**
   * The trace of the save that enqueued it (its event's traceContext), kept
   * through retries and into the dead letters: each delivery attempt's span
   * continues it, on whichever instance claims it, after a restart too.
   * Absent when the save had none (no tracing), and in notifications stored
   * before it was kept.
   */
  traceContext?: TraceContext
}

/** A notification an instance holds for delivery, with the config it goes to. */
export interface PushClaim {
  item: PushOutboxItem
  config: PushConfigRecord
  /** The store's own proof of the claim (a lease id, a revision): opaque to the sender. */
  token: string
}

/** A notification given up on, kept for an operator to read. */
export interface PushDeadLetter extends PushOutboxItem {
  reason: string
  /** When it was given up on, in ms since the epoch. */
  deadAt: number
}
