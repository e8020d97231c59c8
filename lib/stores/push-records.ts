import { randomUUID } from "node:crypto"
import type { A2ATask } from "../types.js"
import type { PushConfigRecord, PushDeadLetter, PushEvent, PushOutboxItem, TraceContext } from "./push-store.js"
import { assertTaskId } from "./task-checks.js"

/**
 * What the durable stores (file, Postgres, NATS) share about push records:
 * the checks of what they are given and the making of outbox items, so each
 * store only says where the records live.
 */

/** A pending notification left above its Task's committed sequence this long was written by a save that never landed. */
export const ABANDONED_PUSH_ITEM_MS = 10 * 60_000

export function assertPushConfig(config: PushConfigRecord, store: string): void {
  if (config === null || typeof config !== "object") throw new TypeError(`${store}.push.putConfig needs a config object`)
  assertTaskId(config.taskId)
  if (typeof config.id !== "string" || config.id.length === 0) throw new TypeError(`${store}.push.putConfig: config.id should be a non-empty string`)
  if (typeof config.url !== "string" || config.url.length === 0) throw new TypeError(`${store}.push.putConfig: config.url should be a non-empty string`)
  if (config.version !== "0.3" && config.version !== "1.0") throw new TypeError(`${store}.push.putConfig: config.version should be "0.3" or "1.0"`)
}

export function assertClaimArgs(store: string, instance: string, limit: number, leaseMs: number, now: number): void {
  if (typeof instance !== "string" || instance.length === 0) throw new TypeError(`${store}.push.claim needs an instance name`)
  if (!(Number.isInteger(limit) && limit >= 0)) throw new RangeError(`${store}.push.claim: limit should be a whole number >= 0`)
  if (!(Number.isFinite(leaseMs) && leaseMs > 0)) throw new RangeError(`${store}.push.claim: leaseMs should be a number of milliseconds > 0`)
  if (!Number.isFinite(now)) throw new RangeError(`${store}.push.claim: now should be a time in ms since the epoch`)
}

/** One new notification of `given` (an event as its save was given it) to config `configId`, due at once; `key`, a new one unless it is made again. */
export function newOutboxItem(taskId: string, configId: string, seq: number, given: PushEvent, now: number, key: string = randomUUID()): PushOutboxItem {
  const { event, traceContext } = splitTrace(given)
  const item: PushOutboxItem = { key, taskId, configId, seq, event, attempts: 0, notBefore: now, enqueuedAt: now }
  if (traceContext !== undefined) item.traceContext = traceContext
  return item
}

/** An event as a save is given it, apart: the event its notifications report, and the trace context they keep beside it (when it is one). */
export function splitTrace(given: PushEvent): { event: PushEvent; traceContext?: TraceContext } {
  if (given === null || typeof given !== "object" || !("traceContext" in given)) return { event: given }
  const { traceContext, ...event } = given
  const kept = keptTraceContext(traceContext)
  return kept === undefined ? { event } : { event, traceContext: kept }
}

/** A trace context as stored, when `value` is one: a copy of its two strings; anything else (none, an older record's) is none. */
export function keptTraceContext(value: unknown): TraceContext | undefined {
  if (value === null || typeof value !== "object") return undefined
  const { traceparent, tracestate } = value as Partial<Record<keyof TraceContext, unknown>>
  if (typeof traceparent !== "string" || traceparent.length === 0) return undefined
  return typeof tracestate === "string" && tracestate.length > 0 ? { traceparent, tracestate } : { traceparent }
}

/** The item as retryLater leaves it. */
export function retried(item: PushOutboxItem, notBefore: number, error: string): PushOutboxItem {
  return { ...item, attempts: item.attempts + 1, notBefore, lastError: error }
}

/** The item as deadLetter keeps it: `attempts` (when given) counts the attempt that ended it. */
export function deadLetterOf(item: PushOutboxItem, reason: string, deadAt: number, attempts = item.attempts): PushDeadLetter {
  return { ...item, attempts: attemptsOf(attempts, item), reason, deadAt }
}

/** deadLetter's `attempts`, checked: a whole number, never below what the claim had. */
export function attemptsOf(attempts: number | undefined, item: Pick<PushOutboxItem, "attempts">): number {
  return Number.isSafeInteger(attempts) && attempts! >= item.attempts ? attempts! : item.attempts
}

/** A stored event, checked enough to be sent: a `kind` and a Task. */
export function checkedEvent(event: PushEvent, store: string): PushEvent {
  if (event === null || typeof event !== "object" || (event.kind !== "status" && event.kind !== "artifact")) {
    throw new TypeError(`${store}.push.saveWithEvent: event.kind should be "status" or "artifact"`)
  }
  if (event.task === null || typeof event.task !== "object") throw new TypeError(`${store}.push.saveWithEvent: event.task should be the Task as saved`)
  return event
}

/** The events of a save as JSON texts, in order, fixed when the save is called (a caller changing its Task later changes nothing stored); with their trace context, which newOutboxItem sets apart. */
export function eventTexts(events: readonly PushEvent[], task: A2ATask, store: string): string[] {
  return events.map((event) => JSON.stringify(eventOfSave(event, task, store)))
}

/** The events of a save as eventTexts fixes them, for a store that keeps their trace context apart: each event's JSON without it, and the trace context's JSON (none: undefined). */
export function eventTextsApart(events: readonly PushEvent[], task: A2ATask, store: string): Array<{ event: string; traceContext?: string }> {
  return events.map((given) => {
    const { event, traceContext } = splitTrace(eventOfSave(given, task, store))
    return { event: JSON.stringify(event), traceContext: traceContext === undefined ? undefined : JSON.stringify(traceContext) }
  })
}

/** An event of a save, fixed when the save is called: `text`, its JSON; none when it reports the very Task saved (the save's own text is its Task). */
export interface SavedEvent {
  kind: PushEvent["kind"]
  artifactIndex?: number
  /** Its trace context (in `text` when there is one). */
  traceContext?: TraceContext
  text?: string
}

/** The events of a save as eventTexts fixes them, without serializing again the Task the save serializes anyway. */
export function savedEvents(events: readonly PushEvent[], task: A2ATask, store: string): SavedEvent[] {
  return events.map((event) => {
    eventOfSave(event, task, store)
    if (event.task !== task) return { kind: event.kind, text: JSON.stringify(event) }
    const saved: SavedEvent = event.artifactIndex === undefined ? { kind: event.kind } : { kind: event.kind, artifactIndex: event.artifactIndex }
    const traceContext = keptTraceContext(event.traceContext)
    if (traceContext !== undefined) saved.traceContext = traceContext
    return saved
  })
}

function eventOfSave(event: PushEvent, task: A2ATask, store: string): PushEvent {
  checkedEvent(event, store)
  if (event.task.id !== task.id) throw new TypeError(`${store}.push.saveWithEvent: event.task should be the Task saved (${JSON.stringify(task.id.slice(0, 128))})`)
  return event
}

/** A 16-digit, zero-padded number: names that sort as the numbers do. */
export function padded(n: number): string {
  return String(n).padStart(16, "0")
}
