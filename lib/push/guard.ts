import { promises as dns, type LookupAddress } from "node:dns"
import { BlockList, isIPv6, type LookupFunction } from "node:net"

/**
 * The SSRF guard for webhook URLs: a peer names a URL, the server POSTs to
 * it, so by default it may not reach the server's own network. Checked when
 * a config is created and again before every send; the connection then goes
 * to the address that was checked (`CheckedWebhook.lookup`), never to a
 * second DNS answer.
 */

/** Longest webhook URL accepted, in characters. */
export const MAX_WEBHOOK_URL_LENGTH = 2048

/** Why a URL was refused: a code for callers (delivery retries `unresolved`), the message for people. */
export type WebhookRefusal =
  | "invalid"
  | "scheme"
  | "credentials"
  | "length"
  | "unresolved"
  | "metadata"
  | "loopback"
  | "private"
  | "link-local"
  | "shared"
  | "multicast"
  | "unspecified"
  | "reserved"
  | "nat64"

export class WebhookRefusedError extends Error {
  constructor(
    readonly reason: WebhookRefusal,
    message: string,
    /** The address refused, when an address was. */
    readonly address?: string,
  ) {
    super(message)
    this.name = "WebhookRefusedError"
  }
}

/** Hosts let through without the address check: `HOST` for any port, `HOST:PORT` for that port alone. */
export interface AllowList {
  readonly entries: readonly AllowEntry[]
}

interface AllowEntry {
  /** As `URL.hostname` writes it: lower case, IPv6 in brackets. */
  host: string
  port?: number
}

/** A URL that passed the guard, and how to connect to what was checked. */
export interface CheckedWebhook {
  url: URL
  /** Every address the host resolved to (the literal itself for an IP). */
  addresses: readonly LookupAddress[]
  /** True when an allow-list entry let it through (its addresses were not judged). */
  allowed: boolean
  /** A `lookup` for http(s).request / net.connect that answers with `addresses` only. */
  lookup: LookupFunction
}

export interface CheckOptions {
  /** Names the URL in messages (default "webhook URL"; the protocol says "params.url"). */
  field?: string
  /** Resolves a host; tests replace it (default dns.promises.lookup with all and verbatim). */
  resolve?: (host: string) => Promise<LookupAddress[]>
}

export const NO_ALLOW_LIST: AllowList = { entries: [] }

/**
 * Parses allow-list entries: `example.com`, `example.com:8443`, `10.0.0.5`,
 * `[fd00::1]:9000` or a bare IPv6 `fd00::1`. Throws a TypeError naming the bad entry.
 */
export function allowList(entries: readonly string[]): AllowList {
  return { entries: entries.map(parseAllowEntry) }
}

function parseAllowEntry(entry: string): AllowEntry {
  const bad = (why: string) => new TypeError(`push allow-list entry ${JSON.stringify(entry.slice(0, 300))} ${why}; write HOST or HOST:PORT (IPv6 as [ADDR]:PORT)`)
  const text = entry.trim()
  let host: string
  let port: string | undefined
  const bracketed = /^(\[[^\]]*\])(?::(\d+))?$/.exec(text)
  if (bracketed !== null) [, host, port] = bracketed as unknown as [string, string, string | undefined]
  else if (isIPv6(text)) host = `[${text}]`
  else {
    const plain = /^([^:[\]/@?#\s]+)(?::(\d+))?$/.exec(text)
    if (plain === null) throw bad("is not a host name or address")
    ;[, host, port] = plain as unknown as [string, string, string | undefined]
  }
  let hostname: string
  try {
    hostname = new URL(`http://${host}/`).hostname
  } catch {
    throw bad("is not a host name or address")
  }
  if (port === undefined) return { host: stripDot(hostname) }
  const number = Number(port)
  if (!(Number.isInteger(number) && number >= 1 && number <= 65535)) throw bad("has a port outside 1-65535")
  return { host: stripDot(hostname), port: number }
}

const stripDot = (host: string): string => (host.endsWith(".") ? host.slice(0, -1) : host)

/** Names of cloud metadata services, refused before any lookup. */
const METADATA_NAMES = new Set(["metadata", "metadata.google.internal", "metadata.goog", "metadata.azure.internal", "instance-data", "instance-data.ec2.internal"])

/** Address rules in the order they are judged (the first match names the reason). */
const RULES: ReadonlyArray<[WebhookRefusal, string, ReadonlyArray<[string, number, "ipv4" | "ipv6"]>]> = [
  [
    "metadata",
    "a cloud metadata address",
    [
      ["169.254.169.254", 32, "ipv4"],
      ["169.254.170.2", 32, "ipv4"],
      ["100.100.100.200", 32, "ipv4"],
      ["192.0.0.192", 32, "ipv4"],
      ["fd00:ec2::254", 128, "ipv6"],
    ],
  ],
  ["unspecified", "an unspecified address", [["0.0.0.0", 8, "ipv4"], ["::", 128, "ipv6"]]],
  ["loopback", "a loopback address", [["127.0.0.0", 8, "ipv4"], ["::1", 128, "ipv6"]]],
  [
    "private",
    "a private address",
    [
      ["10.0.0.0", 8, "ipv4"],
      ["172.16.0.0", 12, "ipv4"],
      ["192.168.0.0", 16, "ipv4"],
      ["fc00::", 7, "ipv6"],
    ],
  ],
  ["link-local", "a link-local address", [["169.254.0.0", 16, "ipv4"], ["fe80::", 10, "ipv6"]]],
  ["shared", "a shared (CGNAT) address", [["100.64.0.0", 10, "ipv4"]]],
  ["multicast", "a multicast address", [["224.0.0.0", 4, "ipv4"], ["ff00::", 8, "ipv6"]]],
  ["nat64", "a NAT64 address", [["64:ff9b::", 96, "ipv6"], ["64:ff9b:1::", 48, "ipv6"]]],
  [
    "reserved",
    "a reserved address",
    [
      ["192.0.0.0", 24, "ipv4"],
      ["192.0.2.0", 24, "ipv4"],
      ["192.88.99.0", 24, "ipv4"],
      ["198.18.0.0", 15, "ipv4"],
      ["198.51.100.0", 24, "ipv4"],
      ["203.0.113.0", 24, "ipv4"],
      ["240.0.0.0", 4, "ipv4"],
      // IPv4-compatible (deprecated), discard-only, Teredo and 6to4 (both carry an IPv4 address), documentation, site-local.
      ["::", 96, "ipv6"],
      ["100::", 64, "ipv6"],
      ["2001::", 32, "ipv6"],
      ["2001:db8::", 32, "ipv6"],
      ["2002::", 16, "ipv6"],
      ["fec0::", 10, "ipv6"],
    ],
  ],
]

const BLOCKS: ReadonlyArray<{ reason: WebhookRefusal; what: string; list: BlockList }> = RULES.map(([reason, what, subnets]) => {
  const list = new BlockList()
  for (const [network, prefix, type] of subnets) list.addSubnet(network, prefix, type)
  return { reason, what, list }
})

/** The IPv4-translated range (RFC 2765, ::ffff:0:a.b.c.d), which BlockList does not read as IPv4 as it does the mapped ::ffff:a.b.c.d. */
const TRANSLATED = new BlockList()
TRANSLATED.addSubnet("::ffff:0:0:0", 96, "ipv6")

/**
 * The refusal for an address, or undefined when it may be reached. An
 * IPv4-mapped (::ffff:a.b.c.d) or IPv4-translated (::ffff:0:a.b.c.d) IPv6
 * address is judged as the IPv4 address it carries.
 */
export function blockedAddress(address: string, family: number): { reason: WebhookRefusal; what: string } | undefined {
  if (family === 6 && TRANSLATED.check(address, "ipv6")) return blockedAddress(lastIPv4(address), 4)
  const type = family === 6 ? "ipv6" : "ipv4"
  // BlockList matches an IPv4-mapped address (::ffff:a.b.c.d) against the IPv4 rules itself.
  return BLOCKS.find((block) => block.list.check(address, type))
}

/** The IPv4 address in an IPv6 address's last 32 bits, written either as a dotted quad or as two hex groups. */
function lastIPv4(address: string): string {
  const tail = address.slice(address.lastIndexOf(":") + 1)
  if (tail.includes(".")) return tail
  const high = address.slice(0, address.lastIndexOf(":"))
  const groups = [Number.parseInt(high.slice(high.lastIndexOf(":") + 1) || "0", 16), Number.parseInt(tail || "0", 16)]
  return [groups[0] >> 8, groups[0] & 0xff, groups[1] >> 8, groups[1] & 0xff].join(".")
}

const defaultResolve = (host: string): Promise<LookupAddress[]> => dns.lookup(host, { all: true, verbatim: true })

/**
 * Checks a webhook URL: http(s) only, no user or password, at most
 * MAX_WEBHOOK_URL_LENGTH characters; then resolves its host and refuses it
 * when any address is loopback, private, link-local, shared, multicast,
 * unspecified, reserved, NAT64 or a cloud metadata service (or the name is
 * one), unless the allow list names the host (and the port, when the entry
 * has one). Throws WebhookRefusedError saying why.
 */
export async function checkWebhookUrl(text: string, allow: AllowList, opts: CheckOptions = {}): Promise<CheckedWebhook> {
  const field = opts.field ?? "webhook URL"
  if (text.length > MAX_WEBHOOK_URL_LENGTH) {
    throw new WebhookRefusedError("length", `${field} is longer than ${MAX_WEBHOOK_URL_LENGTH} characters (${text.length})`)
  }
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new WebhookRefusedError("invalid", `${field} is not a valid absolute URL`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new WebhookRefusedError("scheme", `${field} should be an http: or https: URL, not ${url.protocol}`)
  }
  if (url.username !== "" || url.password !== "") {
    throw new WebhookRefusedError("credentials", `${field} should not carry a user name or password; give them as the config's authentication`)
  }
  const host = stripDot(url.hostname)
  const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
  const allowed = allow.entries.some((entry) => entry.host === host && (entry.port === undefined || entry.port === port))
  if (!allowed && METADATA_NAMES.has(host)) {
    throw new WebhookRefusedError("metadata", `${field} names a cloud metadata service (${host}); add it to the push allow list if it is meant`)
  }
  const bare = host.startsWith("[") ? host.slice(1, -1) : host
  let addresses: LookupAddress[]
  try {
    addresses = await (opts.resolve ?? defaultResolve)(bare)
  } catch (err) {
    const code = (err as { code?: unknown }).code
    throw new WebhookRefusedError("unresolved", `${field} host ${host} does not resolve (${typeof code === "string" ? code : "lookup failed"})`)
  }
  if (addresses.length === 0) throw new WebhookRefusedError("unresolved", `${field} host ${host} does not resolve (no addresses)`)
  if (!allowed) {
    for (const { address, family } of addresses) {
      const blocked = blockedAddress(address, family)
      if (blocked !== undefined) {
        const named = bare === address ? "is" : "resolves to"
        throw new WebhookRefusedError(
          blocked.reason,
          `${field} ${named} ${blocked.what} (${address}); add the host to the push allow list (push.allow, --push-allow) if it is meant`,
          address,
        )
      }
    }
  }
  return { url, addresses, allowed, lookup: pinnedLookup(addresses) }
}

/**
 * A `lookup` answering with these addresses only, whatever name it is asked:
 * the connection goes where the guard looked. Answers an array when asked
 * with `all: true` (Node 20's happy-eyeballs connect does), else the first
 * address of the family asked for.
 */
export function pinnedLookup(addresses: readonly LookupAddress[]): LookupFunction {
  return (hostname, options, callback) => {
    const family = typeof options.family === "number" ? options.family : options.family === "IPv6" ? 6 : options.family === "IPv4" ? 4 : 0
    const fitting = family === 0 ? addresses : addresses.filter((entry) => entry.family === family)
    if (fitting.length === 0) {
      const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname} (no checked IPv${family} address)`), { code: "ENOTFOUND", hostname })
      callback(err, "", 0)
    } else if (options.all === true) {
      callback(null, fitting.map(({ address, family }) => ({ address, family })))
    } else {
      callback(null, fitting[0].address, fitting[0].family)
    }
  }
}
