import { randomUUID } from "node:crypto"
import { checkWebhookUrl, WebhookRefusedError, type AllowList } from "../push/guard.js"
import type { PushConfigRecord, PushStore } from "../stores/push-store.js"
import { WriteOrder } from "../stores/write-order.js"
import { A2AError, ErrorCode, truncate } from "./errors.js"
import { PUSH_LIMITS, type PushConfigInput, type PushConfigPage, type PushConfigRef } from "./params.js"
import type { WireVersion } from "./wire.js"

/** Push is on: the store's capability and the webhook allow list. */
export interface PushSettings {
  store: PushStore
  allow: AllowList
}

/**
 * The push-config operations, for every version and binding: Create, Get,
 * List, Delete and the inline config of SendMessage. The caller has read the
 * Task under the caller's owner rule first (another principal's Task is
 * "not found"), so a config is reached only through a Task the caller may see.
 */
export class PushConfigs {
  /** Puts of one Task's configs, one at a time: the count checked is the count stored. */
  private readonly puts = new WriteOrder()

  constructor(private readonly settings: PushSettings) {}

  /** Refuses a webhook URL the SSRF guard refuses, with -32602 saying why (`params.url resolves to a private address (10.0.0.5)`). */
  async checkUrl(config: PushConfigInput, field: string): Promise<void> {
    try {
      await checkWebhookUrl(config.url, this.settings.allow, { field: `${field}.url` })
    } catch (err) {
      if (err instanceof WebhookRefusedError) throw new A2AError(ErrorCode.InvalidParams, `Invalid params: ${err.message}`, { field: `${field}.url` })
      throw err
    }
  }

  /**
   * The config as stored: its id is the peer's, else the server's (1.0: a
   * UUID; 0.3: the Task's id, as 0.3 peers expect, so a second id-less set
   * replaces the first); `version` makes its notifications that version's.
   */
  record(taskId: string, config: PushConfigInput, version: WireVersion): PushConfigRecord {
    const record: PushConfigRecord = { taskId, id: config.id ?? (version === "1.0" ? randomUUID() : taskId), version, url: config.url, createdAt: new Date().toISOString() }
    if (config.token !== undefined) record.token = config.token
    if (config.authentication !== undefined) record.authentication = config.authentication
    return record
  }

  /**
   * Stores the config, refusing a new one past PUSH_LIMITS.configsPerTask
   * (replacing one of the same id is always allowed). This server's puts of
   * one Task go one at a time, so concurrent creates cannot pass the limit
   * together; two replicas creating at the same instant each check alone.
   */
  put(record: PushConfigRecord, field: string): Promise<void> {
    return this.puts.run(record.taskId, async () => {
      const existing = await this.settings.store.listConfigs(record.taskId)
      if (existing.length >= PUSH_LIMITS.configsPerTask && !existing.some((config) => config.id === record.id)) {
        throw A2AError.invalidParams(
          field,
          `would be push notification config ${existing.length + 1} of task ${truncate(record.taskId)}; a Task has at most ${PUSH_LIMITS.configsPerTask}: delete one (DeleteTaskPushNotificationConfig) or reuse its id`,
        )
      }
      await this.settings.store.putConfig(record)
    })
  }

  /** Create / set: checks the URL, stores, answers the config as stored. */
  async create(taskId: string, config: PushConfigInput, version: WireVersion, field: string): Promise<PushConfigRecord> {
    await this.checkUrl(config, field)
    const record = this.record(taskId, config, version)
    await this.put(record, field)
    return record
  }

  /** The Task's config with this id, if any. */
  find(taskId: string, id: string): Promise<PushConfigRecord | undefined> {
    return this.settings.store.getConfig(taskId, id)
  }

  /** Puts back a config as it was (no checks: it was stored before). */
  restore(record: PushConfigRecord): Promise<void> {
    return this.settings.store.putConfig(record)
  }

  /** The config, or -32001 (the spec's TaskNotFoundError for a missing config). A 0.3 get without an id means the config whose id is the Task's. */
  async get(ref: PushConfigRef): Promise<PushConfigRecord> {
    const id = ref.id ?? ref.taskId
    const config = await this.settings.store.getConfig(ref.taskId, id)
    if (config === undefined) {
      throw new A2AError(ErrorCode.TaskNotFound, `Push notification config not found: ${truncate(id)} for task ${truncate(ref.taskId)}`, {
        taskId: truncate(ref.taskId),
        id: truncate(id),
      })
    }
    return config
  }

  /** A page of the Task's configs, in id order; `nextPageToken` empty on the last page. */
  async list(page: PushConfigPage): Promise<{ configs: PushConfigRecord[]; nextPageToken: string }> {
    const after = page.pageToken === undefined ? undefined : decodeToken(page.pageToken)
    // Sorted here, whatever order (a database collation) the store used: the token compares ids as JavaScript does.
    const all = (await this.settings.store.listConfigs(page.taskId)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    const rest = after === undefined ? all : all.filter((config) => config.id > after)
    const size = page.pageSize ?? rest.length
    const configs = rest.slice(0, size)
    return { configs, nextPageToken: rest.length > size ? encodeToken(configs[configs.length - 1].id) : "" }
  }

  /** Removes the config and its undelivered notifications; a missing one is no error (Delete is idempotent). */
  async delete(ref: Required<PushConfigRef>): Promise<void> {
    await this.settings.store.deleteConfig(ref.taskId, ref.id)
  }
}

const encodeToken = (afterId: string): string => Buffer.from(JSON.stringify({ after: afterId })).toString("base64url")

function decodeToken(token: string): string {
  try {
    const { after } = JSON.parse(Buffer.from(token, "base64url").toString()) as { after?: unknown }
    if (typeof after === "string") return after
  } catch {
    // answered below
  }
  throw A2AError.invalidParams("params.pageToken", "is not a nextPageToken from an earlier page")
}
