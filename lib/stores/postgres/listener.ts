import type { ReportError } from "../background-errors.js"
import { OpenOnce } from "../open-once.js"
import type { PgClient, PgNotification } from "./pg-driver.js"
import { fromTextKey } from "./text.js"

const WATCH_HEARTBEAT_MS = 30_000
const WATCH_RETRY_FIRST_MS = 100
const WATCH_RETRY_MAX_MS = 5_000

/**
 * The one LISTEN connection of a store, shared by its watchers: opened by
 * the first, closed after the last. While anyone watches, a dropped
 * connection is reopened with backoff; a heartbeat query finds a connection
 * the network silently lost.
 */
export class ChangeListener {
  /** One entry per watch() call, so one function watching twice is two watchers. */
  private readonly watchers = new Set<{ onChange: (id: string) => void }>()
  private readonly connection: OpenOnce<PgClient>
  private client: PgClient | undefined
  /** Bumped by stop(), so a connection that opens after it is closed at once. */
  private generation = 0
  private failures = 0
  private retryTimer: NodeJS.Timeout | undefined
  private heartbeat: NodeJS.Timeout | undefined

  constructor(
    private readonly channel: string,
    private readonly newClient: () => Promise<PgClient>,
    private readonly report: ReportError,
  ) {
    // Never closed for good: stop() forgets the connection, and the next watcher opens another.
    this.connection = new OpenOnce(() => this.open())
  }

  async add(onChange: (id: string) => void): Promise<() => Promise<void>> {
    const watcher = { onChange }
    this.watchers.add(watcher)
    try {
      await this.connection.get()
    } catch (err) {
      await this.remove(watcher)
      throw err
    }
    return () => this.remove(watcher)
  }

  async stop(): Promise<void> {
    this.watchers.clear()
    this.generation++
    clearTimeout(this.retryTimer)
    clearInterval(this.heartbeat)
    this.retryTimer = undefined
    this.connection.forget(this.connection.current)
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => {})
  }

  private async remove(watcher: { onChange: (id: string) => void }): Promise<void> {
    if (this.watchers.delete(watcher) && this.watchers.size === 0) await this.stop()
  }

  private async open(): Promise<PgClient> {
    const generation = this.generation
    const client = await this.newClient()
    client.on("notification", (message) => this.deliver(message))
    client.on("error", (err) => this.lost(client, err))
    client.on("end", () => this.lost(client))
    try {
      await client.connect()
      await client.query(`LISTEN "${this.channel}"`)
    } catch (err) {
      await client.end().catch(() => {})
      throw err
    }
    if (generation !== this.generation) {
      await client.end().catch(() => {})
      throw new Error("PostgresTaskStore was closed while watch() was starting")
    }
    this.client = client
    this.failures = 0
    this.heartbeat = setInterval(() => {
      client.query("SELECT 1").catch((err: Error) => this.lost(client, err))
    }, WATCH_HEARTBEAT_MS)
    this.heartbeat.unref()
    return client
  }

  private deliver(message: PgNotification): void {
    if (message.channel !== this.channel || message.payload === undefined) return
    const id = fromTextKey(message.payload)
    for (const watcher of [...this.watchers]) {
      try {
        watcher.onChange(id)
      } catch (err) {
        this.report(err, "watch", id)
      }
    }
  }

  /** The connection failed or ended: unless it was closed on purpose, open another. */
  private lost(client: PgClient, err?: Error): void {
    if (client !== this.client) return
    this.client = undefined
    this.connection.forget(this.connection.current)
    clearInterval(this.heartbeat)
    void client.end().catch(() => {})
    this.report(err ?? new Error("PostgresTaskStore: the watch connection ended; reconnecting"), "watch")
    this.reconnectLater()
  }

  private reconnectLater(): void {
    if (this.watchers.size === 0 || this.retryTimer !== undefined) return
    const backoff = Math.min(WATCH_RETRY_MAX_MS, WATCH_RETRY_FIRST_MS * 2 ** this.failures++)
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined
      this.connection.get().catch((err: unknown) => {
        if (this.watchers.size === 0) return
        this.report(err, "watch")
        this.reconnectLater()
      })
    }, backoff * (0.5 + Math.random() / 2))
    this.retryTimer.unref()
  }
}
