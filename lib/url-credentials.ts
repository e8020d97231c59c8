/** A URL's user info: what it is, and how it may be shown. Logs and errors must never carry a password. */

/** True when `text` parses as a URL that names a user or a password. */
export function hasCredentials(text: string): boolean {
  try {
    const { username, password } = new URL(text)
    return username !== "" || password !== ""
  } catch {
    return /\/\/[^/@]*@/.test(text)
  }
}

/**
 * `text` with any password after "//user:" replaced by "***"; the user name stays so the
 * reader knows which account. Works on strings that are not valid URLs too, for error messages.
 */
export function withoutPassword(text: string): string {
  return text.replace(/\/\/([^:/@]*):[^@/]*@/, "//$1:***@")
}

/** True when `value` parses as an http: or https: URL. */
export function isHttpUrl(value: unknown): value is string {
  if (typeof value !== "string") return false
  try {
    const { protocol } = new URL(value)
    return protocol === "http:" || protocol === "https:"
  } catch {
    return false
  }
}

/** An http(s) URL naming no user or password: fit to be published, as on the agent card. */
export function isPlainHttpUrl(value: unknown): boolean {
  return isHttpUrl(value) && !hasCredentials(value)
}
