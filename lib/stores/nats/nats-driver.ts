import { loadDriver } from "../driver.js"
import type { NatsEventJetStream, NatsEventStreams, NatsHeaders } from "./events.js"

/*
 * The little of the nats driver the store uses, declared here rather than
 * imported from "nats": nats is an optional peer, and the published types
 * must compile for an application without it. test/package/declarations.test.ts
 * checks that nats itself fits these.
 */

export interface NatsKvEntry {
  key: string
  operation: "PUT" | "DEL" | "PURGE"
  revision: number
  /** The server's time of the write. */
  created: Date
  string(): string
}

/** Entries as a watch delivers them, until stopped. */
export interface NatsKvWatch extends AsyncIterable<NatsKvEntry> {
  stop(): void
}

export interface NatsKv {
  get(key: string, opts?: { revision: number }): Promise<NatsKvEntry | null>
  put(key: string, value: Uint8Array, opts?: { previousSeq: number }): Promise<number>
  /** Replaces the key's values with a PURGE marker; with `previousSeq`, only if the key is still at that revision. */
  purge(key: string, opts?: { previousSeq: number }): Promise<void>
  watch(opts?: { key?: string | string[]; include?: string; headers_only?: boolean; initializedFn?: () => void }): Promise<NatsKvWatch>
  /** The keys (not deleted) matching a filter. */
  keys(filter?: string): Promise<AsyncIterable<string>>
}

export interface NatsConnection {
  jetstream(): { views: { kv(name: string, opts: { history: number; ttl?: number }): Promise<NatsKv> } } & NatsEventJetStream
  /** To remove delete markers (`purge` of one subject's messages before a sequence), and the event log's stream. */
  jetstreamManager(): Promise<{ streams: NatsEventStreams }>
  /** What the server told on connecting: the most a message may carry. */
  readonly info?: { max_payload: number }
  /** Settles when the connection closes for good, with the error that closed it, if any. */
  closed(): Promise<void | Error>
  close(): Promise<void>
  drain(): Promise<void>
  isClosed(): boolean
}

export interface NatsDriver {
  connect(opts: { servers: string; user?: string; pass?: string; token?: string; name: string; maxReconnectAttempts: number; noAsyncTraces?: boolean }): Promise<NatsConnection>
  /** What a KV watch starts with: the last value of every key, or only the updates from now on. */
  KvWatchInclude: { LastValue: string; UpdatesOnly: string }
  /** An empty set of message headers. */
  headers(): NatsHeaders
}

const isNatsDriver = (module: unknown): module is NatsDriver =>
  typeof (module as NatsDriver)?.connect === "function" && typeof (module as NatsDriver).KvWatchInclude === "object"

/** The nats driver from `specifier` (the store's driverModule option), imported on first use (see loadDriver). */
export function loadNatsDriver(specifier: string): Promise<NatsDriver> {
  return loadDriver({ store: "NatsTaskStore", specifier, expected: "nats@2", uses: "connect() and KvWatchInclude", fits: isNatsDriver })
}
