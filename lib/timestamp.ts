/**
 * The one reader of timestamps that come in from outside: RFC 3339
 * date-times only (`2026-01-31T12:00:00Z`, `2026-01-31T13:00:00.5+01:00`).
 * `Date.parse` also takes "2026", "-1" and "Nov 30 2026", each read as some
 * instant nobody meant; those are refused here.
 */

/** What a refused timestamp should have looked like, for error messages. */
export const TIMESTAMP_EXAMPLE = "an RFC 3339 date-time such as 2026-01-31T12:00:00Z or 2026-01-31T13:00:00.250+01:00"

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/

/**
 * Milliseconds since the epoch for an RFC 3339 date-time, or undefined when
 * the text is not one (wrong form, or a field out of range: month 13,
 * February 30, hour 24, offset +24:00). A fraction finer than a millisecond
 * rounds up, so "after this time" never takes in an earlier millisecond.
 * A leap second (:60) is the first moment of the next minute.
 */
function parseTimestamp(text: string): number | undefined {
  const match = RFC3339.exec(text)
  if (!match) return undefined
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number)
  const offsetHours = match[10] === undefined ? 0 : Number(match[10])
  const offsetMinutes = match[11] === undefined ? 0 : Number(match[11])
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 60 || offsetHours > 23 || offsetMinutes > 59) return undefined
  const millis = fractionToMillis(match[7] ?? "")
  const date = new Date(0)
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute, second, millis)
  const sign = match[9] === "-" ? -1 : 1
  return date.getTime() - sign * (offsetHours * 60 + offsetMinutes) * 60_000
}

/**
 * The same instant as the stored form writes times (ISO 8601 in UTC with
 * milliseconds, which sorts as text); undefined when not RFC 3339, or when
 * its offset takes it outside the years 0000-9999, which would not sort.
 */
export function normalizeTimestamp(text: string): string | undefined {
  const ms = parseTimestamp(text)
  if (ms === undefined) return undefined
  const iso = new Date(ms).toISOString()
  return /^\d{4}-/.test(iso) ? iso : undefined
}

/** Digits after the point as whole milliseconds, rounded up; integer arithmetic, so ".123" is exactly 123. */
function fractionToMillis(digits: string): number {
  const millis = Number(digits.slice(0, 3).padEnd(3, "0"))
  return /[1-9]/.test(digits.slice(3)) ? millis + 1 : millis
}

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31
}
