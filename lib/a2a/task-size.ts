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

/** What a number, `true`, `false` or `null` takes at most in JSON ("-1.2345678901234567e+308"). */
const MAX_SCALAR_BYTES = 24

/**
 * At least jsonBytes(value), found by a walk instead of serializing: each
 * string as jsonBytesAtMost, every other value at its longest, every
 * bracket, colon and comma counted. It stops early, with Infinity, once past
 * `limit`: a Task well within the limit (nearly all) is never serialized
 * just to be measured.
 */
export function jsonBytesAtMostOf(value: unknown, limit: number): number {
  let total = 0
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const next = stack.pop()
    if (typeof next === "string") total += jsonBytesAtMost(next)
    else if (Array.isArray(next)) {
      total += 2 + next.length
      for (const item of next) stack.push(item)
    } else if (typeof next === "object" && next !== null) {
      total += 2
      for (const key in next) {
        total += jsonBytesAtMost(key) + 2
        stack.push((next as Record<string, unknown>)[key])
      }
    } else total += MAX_SCALAR_BYTES
    if (total > limit) return Infinity
  }
  return total
}
