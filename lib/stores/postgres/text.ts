import type { A2ATask } from "../../types.js"
import { parseStoredTask, storedTask } from "../task-checks.js"

/** How PostgresTaskStore keeps strings and documents Postgres cannot hold as they are; shared by its Tasks and its push tables. */

/** The escapes JSON.stringify writes for NUL and for lone surrogates (a well-formed pair is written as itself). */
const UNSTORABLE_IN_JSONB = /\\u(?:0000|d[89a-f])/i

/** JSON text for a jsonb column: itself, or, when jsonb refuses it (\u0000, lone surrogates, which any client can put in a message), a jsonb string of it. */
export function jsonbDocument(json: string): string {
  return UNSTORABLE_IN_JSONB.test(json) ? JSON.stringify(json) : json
}

/** The value in a jsonb column's text written by jsonbDocument. */
export function fromJsonbDocument(text: string): unknown {
  const value: unknown = JSON.parse(text)
  return typeof value === "string" ? JSON.parse(value) : value
}

/** The Task in a `task` column's text (jsonb, so always JSON): the document, or the JSON text a jsonb string holds. */
export function taskFrom(text: string, id: string): A2ATask {
  const value: unknown = JSON.parse(text)
  const where = `row of task ${JSON.stringify(id.slice(0, 128))}`
  return typeof value === "string" ? parseStoredTask(value, "PostgresTaskStore", where) : storedTask(value, "PostgresTaskStore", where)
}

export const ESCAPED = "\u0001"
/** What a Postgres text value cannot hold: NUL and lone surrogates. */
// eslint-disable-next-line no-control-regex -- NUL is the character this pattern exists to find
const UNSTORABLE_IN_TEXT = /[\u0000\p{Cs}]/u

/**
 * A string as a text column keeps it: itself when Postgres can hold it, else
 * ESCAPED + its JSON (which is plain ASCII for those characters). Strings
 * starting with ESCAPED are escaped too, so two strings never share a key.
 */
export function textKey(value: string): string {
  return UNSTORABLE_IN_TEXT.test(value) || value.startsWith(ESCAPED) ? ESCAPED + JSON.stringify(value) : value
}

export function fromTextKey(key: string): string {
  return key.startsWith(ESCAPED) ? (JSON.parse(key.slice(ESCAPED.length)) as string) : key
}
