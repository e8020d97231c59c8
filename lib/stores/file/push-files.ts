import path from "node:path"
import { BoundedCache } from "../../bounded-cache.js"
import { heapShare, textHeapBytes } from "../../heap-budget.js"
import type { PushConfigRecord } from "../push-store.js"
import { isMissing, readText, statOf, syncDirectory, syncFile, writeNew, type FileSystem } from "./file-system.js"
import { tmpFileName } from "./names.js"
import { currentConfigs } from "./push-names.js"

/** The store's name in the errors of its push files. */
export const STORE = "FileTaskStore"
/** Task directories a claim, a settle, a recovery or a dead-letter listing reads side by side. */
export const READERS = 8
/** How many configs and notifications (and how much heap of them) saves and claims keep, so each file is read once. */
const RECORD_CACHE_ENTRIES = 10_000
const RECORD_CACHE_HEAP_FRACTION = 1 / 64
/** A cached record's own objects (the record, the path key), besides its text. */
const CACHED_RECORD_HEAP_BYTES = 1024

/** A record (config, notification) as read or written. */
interface Cached {
  record: unknown
  bytes: number
}

let tmpCounter = 0

/**
 * The file operations of the push files under `<dir>/.push`, and the cache
 * of the records (configs, notifications) read or written there: no such
 * file's content changes (a put or a failed attempt writes a new name), so
 * each is read once.
 *
 * Configs, dead letters and a failed attempt's rewrite are written whole and
 * fsynced before they count (`writeReplacing`: a rename of a synced tmp
 * file), and their directory is fsynced after by the caller; a new
 * notification's file is not synced (`writeUnsynced`: the Task's save records
 * it, see push-durability.ts).
 */
export class PushFiles {
  readonly root: string
  /** Configs and notifications by file, each read once. */
  private readonly records = new BoundedCache<string, Cached>({ maxEntries: RECORD_CACHE_ENTRIES, maxBytes: heapShare(RECORD_CACHE_HEAP_FRACTION) }, (cached) => cached.bytes)

  constructor(
    dir: string,
    readonly fs: FileSystem,
  ) {
    this.root = path.join(dir, ".push")
  }

  /**
   * A config or a notification, read once: neither file changes (a put or a
   * failed attempt writes a new name); a held notification is read from its
   * held name `readFrom`, and cached by the one it was written under. Shared between callers: for the
   * store's own use (the sender does not change a claim), never handed to a
   * peer.
   */
  async record<T>(file: string, readFrom = file): Promise<T | undefined> {
    const cached = this.records.get(file)
    if (cached !== undefined) return cached.record as T
    const text = await this.readText(readFrom)
    const record = text === undefined ? undefined : parseJson<T>(text)
    this.remember(file, record, text)
    return record
  }

  /** Keeps what `file` holds in the cache. */
  remember(file: string, record: unknown, text: string | undefined): void {
    if (record === undefined || text === undefined) this.records.delete(file)
    else this.records.set(file, { record, bytes: CACHED_RECORD_HEAP_BYTES + textHeapBytes(text) })
  }

  /** Drops `file` from the cache (it was removed). */
  forget(file: string): void {
    this.records.delete(file)
  }

  /** The current configs among `names`, in id order, through the cache (for the store's own use: the records are shared). */
  async configsIn(dir: string, names: string[]): Promise<PushConfigRecord[]> {
    const configs: PushConfigRecord[] = []
    for (const name of currentConfigs(names).values()) {
      const config = await this.record<PushConfigRecord>(path.join(dir, name))
      if (config !== undefined) configs.push(config)
    }
    return configs.sort(byId)
  }

  /** A config as a listing named it; replaced since (a put writes the next version, then removes the one before): the current one. */
  async currentConfig(dir: string, configNames: Map<string, string>, configFile: string): Promise<PushConfigRecord | undefined> {
    const listed = configNames.get(configFile)
    const config = listed === undefined ? undefined : await this.record<PushConfigRecord>(path.join(dir, listed))
    if (config !== undefined) return config
    const current = await this.configName(dir, configFile)
    return current === undefined ? undefined : await this.record<PushConfigRecord>(path.join(dir, current))
  }

  /** The current file name of a config, read afresh (a listing taken while a put replaced it may show no version of it). */
  async configName(dir: string, configFile: string): Promise<string | undefined> {
    return currentConfigs(await this.names(dir)).get(configFile)
  }

  /** The Task id of a directory whose name is a hash: from any whole file in it. */
  async taskIdIn(dir: string, names: string[]): Promise<string | undefined> {
    for (const name of names) {
      if (!name.endsWith(".json")) continue
      const record = await this.readJson<{ taskId?: unknown }>(path.join(dir, name))
      if (typeof record?.taskId === "string") return record.taskId
    }
    return undefined
  }

  /** The names in `dir`; none when it is missing. */
  async names(dir: string): Promise<string[]> {
    try {
      return await this.fs.readdir(dir)
    } catch (err) {
      if (isMissing(err)) return []
      throw new Error(`${STORE} could not read ${dir}: ${(err as Error).message}`, { cause: err })
    }
  }

  /** The file's JSON; undefined when it is missing or not whole (a file being written is not read as anything). */
  async readJson<T>(file: string): Promise<T | undefined> {
    const text = await this.readText(file)
    return text === undefined ? undefined : parseJson<T>(text)
  }

  readText(file: string): Promise<string | undefined> {
    return readText(this.fs, file)
  }

  /** The file's mtime; 0 when it cannot be had. */
  async mtime(file: string): Promise<number> {
    try {
      return (await statOf(this.fs, file))?.mtimeMs ?? 0
    } catch {
      return 0
    }
  }

  /** Whether the file is there. */
  async exists(file: string): Promise<boolean> {
    return (await statOf(this.fs, file)) !== undefined
  }

  /** Creates `file` with `text`, not synced (its Task's save records it, see push-durability.ts); EEXIST when it exists. Synced on a file system layer that cannot. */
  async writeUnsynced(file: string, text: string): Promise<void> {
    const { fs } = this
    if (fs.createUnsynced === undefined) return writeNew(fs, file, text, { durable: true })
    await fs.createUnsynced(file, text, "utf8")
  }

  /** Replaces `name` in `dir` with `text` whole: a synced tmp file renamed over it (the directory is synced by the caller when it matters). */
  async writeReplacing(dir: string, name: string, text: string): Promise<void> {
    const tmp = path.join(dir, tmpFileName(name, process.pid, ++tmpCounter))
    try {
      await writeNew(this.fs, tmp, text, { durable: true })
      await this.fs.rename(tmp, path.join(dir, name))
    } catch (err) {
      await this.fs.rm(tmp, { force: true }).catch(() => {})
      throw err
    }
  }

  /** Renames `from` to `to` in `dir`; false when `from` is gone (another process renamed or removed it first). */
  async renamed(dir: string, from: string, to: string): Promise<boolean> {
    try {
      await this.fs.rename(path.join(dir, from), path.join(dir, to))
      return true
    } catch (err) {
      if (isMissing(err)) return false
      throw err
    }
  }

  async remove(file: string): Promise<void> {
    await this.fs.rm(file, { force: true })
  }

  syncDir(dir: string): Promise<void> {
    return syncDirectory(this.fs, dir)
  }

  /** Makes a file durable; false when it is gone. */
  syncFile(file: string): Promise<boolean> {
    return syncFile(this.fs, file)
  }
}

export const byId = (a: PushConfigRecord, b: PushConfigRecord) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** The JSON in `text`; undefined when it is not whole. */
export function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T
  } catch {
    return undefined
  }
}
