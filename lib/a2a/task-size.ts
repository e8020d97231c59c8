/**
 * The per-Task size limit: how big a Task may grow, in UTF-8 bytes of its
 * JSON (what a store writes), checked by the runner before it saves, so it
 * holds for every store.
 */

/** Default: room for several messages at the default 1 MiB body limit, and the agent's answers to them. */
export const DEFAULT_MAX_TASK_BYTES = 4 * 1024 * 1024

/** UTF-8 bytes of a value's JSON text. */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value))
}

/** At least jsonBytes(text), without encoding it: 6 bytes a character (a `\u001f` escape) and the quotes. */
export function jsonBytesAtMost(text: string): number {
  return 6 * text.length + 2
}
