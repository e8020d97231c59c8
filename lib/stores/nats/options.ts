import type { TaskStoreOptions } from "../background-errors.js"
import { driverModuleOption } from "../driver.js"
import { eventRetentionOf } from "../../streams/event-log.js"

export interface NatsTaskStoreOptions extends TaskStoreOptions {
  /** The JetStream KV bucket holding the Tasks (default "toolnexus_tasks"); created on first use. Push configs and notifications go in `<bucket>_push`. */
  bucket?: string
  /** The KV bucket holding the servers' leases (default "toolnexus_leases"); created on first lease call. */
  leaseBucket?: string
  /** The package the driver is imported from (default "nats"): a fork or wrapper with nats@2's connect and KV. */
  driverModule?: string
  /** The JetStream stream holding the Tasks' stream events (default `<bucket>_events`, subjects `<eventStream>.>`); created on first use (see NatsEventLog). */
  eventStream?: string
  /** How long a finished Task's stream events are kept for resuming (`store.events`), in ms after it ended (default one hour). */
  eventRetentionMs?: number
}

/** What a NatsTaskStore is made with, its url and options checked, the defaults filled in. */
export interface NatsStoreSettings {
  /** The server URL without credentials, fit for logs. */
  server: string
  credentials: { user?: string; pass?: string; token?: string }
  bucket: string
  leaseBucket: string
  eventStream: string
  eventRetentionMs: number
  driverModule: string
}

const DEFAULT_BUCKET = "toolnexus_tasks"
const DEFAULT_LEASE_BUCKET = "toolnexus_leases"
/** What the nats client accepts as a bucket name, kept short: it names the stream, a directory on the server. */
const BUCKET_NAME = /^[-\w]{1,64}$/

/** The store's url and options, checked: a bad one is a TypeError naming the option and what it wants. */
export function natsStoreSettings(url: unknown, opts: NatsTaskStoreOptions): NatsStoreSettings {
  if (opts === null || typeof opts !== "object") throw new TypeError("NatsTaskStore: opts should be an object like { bucket, leaseBucket }")
  const { server, ...credentials } = parseServerUrl(url)
  const bucket = bucketName("opts.bucket", opts.bucket ?? DEFAULT_BUCKET)
  const leaseBucket = bucketName("opts.leaseBucket", opts.leaseBucket ?? DEFAULT_LEASE_BUCKET)
  if (leaseBucket === bucket) throw new TypeError(`NatsTaskStore: opts.leaseBucket should differ from opts.bucket (both are "${bucket}")`)
  // Not a bucket, but the same rule fits a stream's name, and it is its subjects' first token too.
  const eventStream = opts.eventStream === undefined ? `${bucket}_events` : bucketName("opts.eventStream", opts.eventStream)
  const eventRetentionMs = eventRetentionOf("NatsTaskStore", opts.eventRetentionMs)
  const driverModule = driverModuleOption("NatsTaskStore", opts.driverModule, "nats")
  return { server, credentials, bucket, leaseBucket, eventStream, eventRetentionMs, driverModule }
}

/** `nats://[user:pass@]host[:port]`; a user alone is a token. */
function parseServerUrl(url: unknown): { server: string; user?: string; pass?: string; token?: string } {
  const wanted = 'NatsTaskStore: url should be "nats://[user:pass@]host[:port]", e.g. "nats://127.0.0.1:4222"'
  if (typeof url !== "string") throw new TypeError(`${wanted}, got ${url === null ? "null" : `a ${typeof url}`}`)
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new TypeError(`${wanted}; got a string that is not a URL`)
  }
  // Never echo the URL: it may hold a password.
  if (parsed.protocol !== "nats:") throw new TypeError(`${wanted}; got a ${parsed.protocol} URL`)
  if (parsed.hostname === "") throw new TypeError(`${wanted}; got no host`)
  if ((parsed.pathname !== "" && parsed.pathname !== "/") || parsed.search !== "" || parsed.hash !== "") {
    throw new TypeError(`${wanted}; got a path, query or fragment after the host`)
  }
  const server = `nats://${parsed.host}`
  const user = decodeURIComponent(parsed.username)
  const pass = decodeURIComponent(parsed.password)
  if (user !== "" && pass !== "") return { server, user, pass }
  if (user !== "") return { server, token: user }
  if (pass !== "") throw new TypeError(`${wanted}; got a password without a user`)
  return { server }
}

function bucketName(option: string, value: unknown): string {
  if (typeof value === "string" && BUCKET_NAME.test(value)) return value
  const got = typeof value === "string" ? JSON.stringify(value.slice(0, 80)) : value === null ? "null" : `a ${typeof value}`
  throw new TypeError(`NatsTaskStore: ${option} should be a KV bucket name of 1-64 letters, digits, "-" or "_", got ${got}`)
}
