/**
 * A Retry-After header as a wait in ms from `now`: delta-seconds or an HTTP
 * date (one in the past: 0); undefined when absent or unreadable. Read the
 * same for model endpoints and push webhooks.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  if (value === undefined || value === null) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  // An HTTP date names its day and month ("Thu, 01 Jan 2026 00:00:30 GMT"); Date.parse alone would read "-5" as a year.
  if (!/^[A-Za-z]{3},? /.test(text)) return undefined
  const at = Date.parse(text)
  if (Number.isNaN(at)) return undefined
  return Math.max(0, at - now)
}
