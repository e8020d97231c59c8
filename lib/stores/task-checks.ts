import type { A2ATask } from "../types.js"

/**
 * The checks every store makes on what it is given and what it reads back,
 * so a bad id or a bad stored text gets the same clear error from each.
 * A store adds only the limits of its own medium (a byte length, a character
 * its keys cannot hold).
 */

/** Refuses an id that is not a non-empty string. */
export function assertTaskId(id: unknown): asserts id is string {
  if (typeof id !== "string" || id.length === 0) {
    throw new TypeError(`A Task id must be a non-empty string, got ${typeof id === "string" ? '""' : id === null ? "null" : typeof id}`)
  }
}

/** Refuses to save what is not a Task: an object with an id (as assertTaskId wants) and a string status.state. */
export function assertTask(task: unknown, store: string): asserts task is A2ATask {
  if (task === null || typeof task !== "object") throw new TypeError(`${store}.save needs a Task object, got ${task === null ? "null" : typeof task}`)
  assertTaskId((task as A2ATask).id)
  if (typeof (task as A2ATask).status?.state !== "string") throw new TypeError(`${store}.save needs a Task with a status.state string`)
}

/**
 * The Task in a stored JSON text; an error naming `where` (e.g. "task file
 * at /x/a.json") when the text is not JSON or not a Task.
 */
export function parseStoredTask(text: string, store: string, where: string): A2ATask {
  let task: unknown
  try {
    task = JSON.parse(text)
  } catch (err) {
    throw new Error(`${store} found a corrupt ${where}: ${(err as Error).message}`, { cause: err })
  }
  return storedTask(task, store, where)
}

/** A parsed stored value as a Task; an error naming `where` when it is not one. */
export function storedTask(value: unknown, store: string, where: string): A2ATask {
  if (!isTaskShaped(value)) throw new Error(`${store} found a ${where} that is not a Task`)
  return value
}

/** An object with a string id and a string status.state: enough to list and order it. */
function isTaskShaped(value: unknown): value is A2ATask {
  return (
    value !== null &&
    typeof value === "object" &&
    typeof (value as A2ATask).id === "string" &&
    typeof (value as A2ATask).status?.state === "string"
  )
}
