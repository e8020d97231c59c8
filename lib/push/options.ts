import { allowList, type AllowList } from "./guard.js"

/** Push notifications' settings: the plugin's `push` option (`a2a.push` in serve()); `push: false` turns push off. */
export interface PushOptions {
  /**
   * Hosts webhooks may reach though they resolve to loopback, private, link-local or other refused
   * addresses: `HOST` for any port, `HOST:PORT` for that port alone (IPv6 as `[ADDR]:PORT`), e.g.
   * `["hooks.internal", "127.0.0.1:8080"]`. Default: none; every webhook must resolve to public addresses only.
   */
  allow?: string[]
}

/** Throws a TypeError naming the option and what it wanted. */
export function checkPushOptions(push: unknown): void {
  if (push === undefined || push === false) return
  if (typeof push !== "object" || push === null || Array.isArray(push)) {
    throw new TypeError("toolnexus: opts.push should be an object such as { allow: [\"hooks.internal\"] }, or false to turn push notifications off")
  }
  const { allow } = push as PushOptions
  if (allow !== undefined) {
    if (!Array.isArray(allow) || !allow.every((entry) => typeof entry === "string")) {
      throw new TypeError('toolnexus: opts.push.allow should be an array of "HOST" or "HOST:PORT" strings')
    }
    try {
      allowList(allow)
    } catch (err) {
      throw new TypeError(`toolnexus: opts.push.allow: ${(err as Error).message}`, { cause: err })
    }
  }
}

/** The allow list of checked push options. */
export function pushAllowList(push: PushOptions | false | undefined): AllowList {
  return allowList(push === false || push === undefined ? [] : (push.allow ?? []))
}
