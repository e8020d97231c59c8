import { internalsOf, mayRead } from "../internals.js"
import type { PushDeadLetter, PushStore } from "../stores/push-store.js"

/** The most dead letters one read returns; a store keeps more (the memory store 1000, the durable ones until their Task goes). */
export const MAX_DEAD_LETTERS = 1000

/** A dead letter as an operator reads it: what was given up on and why, without the Task's body or any credential. */
export interface DeadLetterView {
  /** The notification's Idempotency-Key. */
  key: string
  taskId: string
  configId: string
  /** "status" or "artifact": what the notification reported. */
  kind: string
  /** The Task's state in the notification. */
  state: string
  /** Why it was given up on (a final answer, maxAttempts with the count, maxAge, a refused URL). */
  reason: string
  /** Attempts made, the one that ended it included (0: given up before any, as past maxAge). */
  attempts: number
  lastError?: string
  /** ISO 8601 times. */
  enqueuedAt: string
  deadAt: string
}

/**
 * The newest dead letters (at most `limit`) of the Tasks `owners` may read:
 * what ownersVisibleTo gives for the caller, undefined for everyone's
 * (no authentication). Another principal's never show.
 */
export async function deadLettersVisibleTo(push: PushStore, owners: ReadonlyArray<string | null> | undefined, limit: number): Promise<DeadLetterView[]> {
  const letters = await push.listDeadLetters(MAX_DEAD_LETTERS)
  return letters.filter((letter) => mayRead(owners, internalsOf(letter.event.task).principal)).slice(0, limit).map(viewOf)
}

function viewOf(letter: PushDeadLetter): DeadLetterView {
  const view: DeadLetterView = {
    key: letter.key,
    taskId: letter.taskId,
    configId: letter.configId,
    kind: letter.event.kind,
    state: letter.event.task.status?.state ?? "unknown",
    reason: letter.reason,
    attempts: letter.attempts,
    enqueuedAt: new Date(letter.enqueuedAt).toISOString(),
    deadAt: new Date(letter.deadAt).toISOString(),
  }
  if (letter.lastError !== undefined) view.lastError = letter.lastError
  return view
}
