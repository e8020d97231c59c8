/** Durations as people write them in options and flags: "500ms", "90s", "45m", "12h", "30d". */

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** A duration as milliseconds: a non-negative finite number, or digits followed by ms, s, m, h or d. Undefined when it is neither. */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) && value >= 0 ? value : undefined
  if (typeof value !== "string") return undefined
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(value)
  return match ? Number(match[1]) * UNIT_MS[match[2]] : undefined
}

/** Node's longest timer (2^31 - 1 ms, about 24.8 days): a longer delay fires at once, with a warning. */
export const MAX_TIMER_MS = 2 ** 31 - 1
