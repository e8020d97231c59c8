import type { ReportError } from "../background-errors.js"
import { OpenOnce } from "../open-once.js"
import { nextMessage } from "./api.js"
import { closedError, messageOf, withContext } from "./errors.js"
import type { NatsEventStreams } from "./events.js"
import type { NatsConnection, NatsDriver, NatsKv } from "./nats-driver.js"
import type { NatsPushMessage } from "./push.js"

/** The header a KV delete or purge marker carries ("DEL", "PURGE"); a value written has none. */
const KV_OPERATION = "KV-Operation"

/** What the push bucket needs of its store. */
export interface NatsPushBucketHost {
  /** The bucket's name, `<bucket>_push`. */
  name: string
  report: ReportError
  /** The store's current connection. */
  connection(): Promise<{ driver: NatsDriver; nc: NatsConnection }>
  /** Throws when the store is closed. */
  assertOpen(): void
  isClosing(): boolean
}

/**
 * The KV bucket of a NatsTaskStore's push configs and outbox, and the reads
 * of its stream that NatsPushStore makes beside the KV: opened on first use
 * over whatever connection is current, and again after a new connection.
 */
export class NatsPushBucket {
  private ready: OpenOnce<NatsKv>

  constructor(private readonly host: NatsPushBucketHost) {
    this.ready = this.newKv()
  }

  kv(): Promise<NatsKv> {
    this.host.assertOpen()
    return this.ready.get()
  }

  /** The connection was lost: the bucket is opened again on the next one. */
  reconnected(): void {
    this.ready = this.newKv()
  }

  async close(): Promise<void> {
    await this.ready.close()
  }

  /** Calls `onPut` for every write of a push key matching `filter`, by any server, from now on (headers only). */
  async watchPuts(filter: string, onPut: () => void): Promise<() => Promise<void>> {
    this.host.assertOpen()
    const { driver } = await this.host.connection()
    const kv = await this.ready.get()
    const updates = await withContext("watch the push outbox", () => kv.watch({ key: filter, include: driver.KvWatchInclude.UpdatesOnly, headers_only: true }))
    const done = (async () => {
      try {
        for await (const entry of updates) {
          if (entry.operation !== "PUT") continue
          try {
            onPut()
          } catch (err) {
            this.host.report(err, "watch")
          }
        }
      } catch (err) {
        if (!this.host.isClosing()) this.host.report(new Error(`NatsTaskStore's watch of the push outbox ended: ${messageOf(err)}`, { cause: err }), "watch")
      }
    })()
    return async () => {
      updates.stop()
      await done
    }
  }

  /** The bucket's first message at or after stream sequence `seq` whose key matches `filter` (one request); undefined when there is none. */
  async nextMessage(filter: string, seq: number): Promise<NatsPushMessage | undefined> {
    const { streams, stream, prefix } = await this.stream()
    const msg = await nextMessage(streams, stream, `${prefix}${filter}`, seq)
    if (msg === undefined) return undefined
    const operation = (msg.header?.get(KV_OPERATION) || "PUT") as NatsPushMessage["operation"]
    return { seq: msg.seq, key: msg.subject.slice(prefix.length), operation, time: msg.time, string: () => msg.string() }
  }

  /**
   * The bucket's keys matching `filter` that have a message in its
   * stream, from the stream's info (one request, paged by the client past
   * the server's page): a snapshot. Not the KV's keys(), whose consumer
   * counts the messages pending when it starts and waits for each: a key
   * purged in between (a delivered notification, a settled retry mark)
   * never comes, and the listing never ends.
   */
  async keys(filter: string): Promise<string[]> {
    const { streams, stream, prefix } = await this.stream()
    const info = await streams.info(stream, { subjects_filter: `${prefix}${filter}` })
    return Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(prefix.length))
  }

  /** Removes every message of these subjects (relative to the bucket's keys) from the bucket's stream, or those below stream sequence `before`: no marker is left. */
  async purge(filters: string[], before?: number): Promise<void> {
    const { nc } = await this.host.connection()
    const { streams } = await nc.jetstreamManager()
    const bucket = this.host.name
    for (const filter of filters) await streams.purge(`KV_${bucket}`, { filter: `$KV.${bucket}.${filter}`, ...(before !== undefined && { seq: before }) })
  }

  /** The bucket's stream, its name and the prefix of its subjects, once the bucket exists. */
  private async stream(): Promise<{ streams: NatsEventStreams; stream: string; prefix: string }> {
    this.host.assertOpen()
    await this.ready.get() // its stream exists from here on
    const { nc } = await this.host.connection()
    const { streams } = await nc.jetstreamManager()
    const bucket = this.host.name
    return { streams, stream: `KV_${bucket}`, prefix: `$KV.${bucket}.` }
  }

  private newKv(): OpenOnce<NatsKv> {
    return new OpenOnce(async () => {
      const { nc } = await this.host.connection()
      return withContext(`open the KV bucket "${this.host.name}"`, () => nc.jetstream().views.kv(this.host.name, { history: 1 }))
    }, closedError)
  }
}
