import { TERMINAL_STATES, type TaskState } from "../types.js"

/** States a stream or a blocking call stops at: terminal, or waiting on the peer. */
export function isFinalForNow(state: TaskState): boolean {
  return TERMINAL_STATES.has(state) || state === "input-required" || state === "auth-required"
}

/** States a Task never leaves. */
export function isTerminal(state: TaskState): boolean {
  return TERMINAL_STATES.has(state)
}
