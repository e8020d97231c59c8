import path from "node:path"
import type { ReportError } from "../background-errors.js"
import { isMissing, type FileStat, type FileSystem } from "./file-system.js"
import { TASK_FILE_SUFFIX } from "./names.js"
import { listKeyOf, type ListKey } from "../list.js"
import { parseStoredTask } from "../task-checks.js"
import { NextRun } from "../next-run.js"

/**
 * What tells one version of a file from another: a save renames a new file
 * into place (a new inode), an edit in place moves its times. `ctimeMs` is
 * unknown for a file this store stamped before renaming it (the rename
 * moves the ctime); such a stamp matches any ctime.
 */
export interface FileStamp {
  ino: number
  size: number
  mtimeMs: number
  ctimeMs: number | undefined
}

/** A readable Task file as the index keeps it: its name in the directory, its ListKey, and the stamp of the file the key was read from. */
export interface Listed {
  name: string
  key: ListKey
  /** Undefined when the file system gives no inode and size: the file is then read again whenever it is looked at. */
  stamp: FileStamp | undefined
}

/** Files looked at side by side when the index reads or stats many. */
const CONCURRENCY = 32
/**
 * A directory whose times are this close to now may change again within
 * the same tick of its clock (1 s on some file systems, 2 s on FAT)
 * without its times moving: until it is older, "unchanged" is not trusted.
 */
const RACY_MS = 2000
/** Past this many names waiting to be looked at, one sweep of the whole directory is cheaper to keep. */
const MAX_DIRTY_NAMES = 10_000

/** The stamp of what `stats` describes, or undefined when the file system does not give inode and size. */
export function stampOf(stats: FileStat): FileStamp | undefined {
  const { ino, size, mtimeMs, ctimeMs } = stats
  return ino === undefined || size === undefined ? undefined : { ino, size, mtimeMs, ctimeMs }
}

/** True when `stats` shows the very file `stamp` was taken of, unchanged since. */
export function unchanged(stamp: FileStamp | undefined, stats: FileStat): boolean {
  return (
    stamp !== undefined &&
    stats.ino === stamp.ino &&
    stats.size === stamp.size &&
    stats.mtimeMs === stamp.mtimeMs &&
    (stamp.ctimeMs === undefined || stats.ctimeMs === stamp.ctimeMs)
  )
}

export function sameKey(a: ListKey, b: ListKey): boolean {
  return a.id === b.id && a.contextId === b.contextId && a.state === b.state && a.timestamp === b.timestamp && a.owner === b.owner && a.tenant === b.tenant
}

/** `run(item)` for every item, at most `limit` at a time; the results in the items' order. */
export async function mapLimited<T, R>(items: readonly T[], limit: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await run(items[i])
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

const isTaskFile = (name: string) => name.endsWith(TASK_FILE_SUFFIX)

/**
 * The ListKey of every Task file in a FileTaskStore's directory, so a
 * listing reads only the files of its page.
 *
 * Built by the first refresh, which reads every file once. Kept by the
 * store's own saves and deletes, and by other processes' changes found
 * through the directory: with a watcher (fs.watch), each refresh looks at
 * the names it reported; without one, or when it cannot say what changed,
 * a refresh whose directory times moved stats every file and reads those
 * whose stamp changed. A refresh thus answers for every save and delete
 * that finished before it began, whoever made it, watcher or not.
 *
 * Every key is recorded with a stamp taken before its file was read, so a
 * key is never newer than its stamp says; and a key recorded outside a
 * refresh (a save, a page read) also marks its name to be looked at by the
 * next refresh, so a slower, older observation cannot hide a newer one.
 */
export class FileIndex {
  /** Readable Task files by name. */
  private readonly entries = new Map<string, Listed>()
  /** Task files that could not be read or parsed, by name, with why: looked at again by every refresh. */
  private readonly unreadableFiles = new Map<string, Error>()
  /** Names to look at in the next refresh: reported by the watcher, or recorded outside a refresh. */
  private dirty = new Set<string>()
  /** The next refresh looks at every file: nothing is indexed yet, or the watcher could not say what changed. */
  private sweepNeeded = true
  private started = false
  private stopped = false
  private watcher: { close(): void } | undefined
  /** The directory itself was moved or removed (a watcher then watches what is gone): the next refresh watches anew. */
  private rewatch = false
  /** Watcher events so far, and at the last refresh: a directory that changed without one means the watcher missed it. */
  private events = 0
  private eventsAtRefresh = 0
  /** The directory's stat at the last refresh, and whether its times were too recent to trust "unchanged" after. */
  private dirStats: FileStat | undefined
  private dirRacy = true
  /** Refreshes: one under way, and the next one that callers arriving meanwhile share. */
  private readonly refreshes = new NextRun(() => this.refresh())

  /** `onOtherName`: told of a change the watcher saw to a name that is not a Task file (`.push` being made). */
  constructor(
    private readonly fs: FileSystem,
    private readonly dir: string,
    private readonly report: ReportError,
    private readonly onOtherName: (name: string) => void = () => {},
  ) {}

  /** True once a refresh has begun: before that, saves and deletes need not tell the index. */
  get active(): boolean {
    return this.started
  }

  /** The readable Task files, as indexed. */
  listed(): IterableIterator<Listed> {
    return this.entries.values()
  }

  /** The Task files that could not be read or parsed at the last look, by name. */
  unreadable(): ReadonlyMap<string, Error> {
    return this.unreadableFiles
  }

  /**
   * Brings the index up to date: every save and delete that finished
   * before this call, by any process, is in it when this resolves. Calls
   * made while a refresh runs share the next one.
   */
  current(): Promise<void> {
    return this.refreshes.request()
  }

  /** This store renamed a file with `key` into place as `name`; `stamp` is the file's, taken before the rename (or undefined). */
  saved(name: string, key: ListKey, stamp: FileStamp | undefined): void {
    if (!this.started) return
    this.set({ name, key, stamp })
    this.markDirty(name)
  }

  /** What a read of `name` outside a refresh found: a key with the stamp taken before reading, or why it cannot be read. */
  found(name: string, read: { key: ListKey; stamp: FileStamp | undefined } | { error: Error }): void {
    if ("error" in read) this.setUnreadable(name, read.error)
    else this.set({ name, ...read })
    this.markDirty(name)
  }

  /** `name` is gone (this store removed it, or a read found it missing). */
  removed(name: string): void {
    if (!this.started) return
    this.entries.delete(name)
    this.unreadableFiles.delete(name)
    this.markDirty(name)
  }

  /** `name` may have changed: the next refresh looks at it. */
  markDirty(name: string): void {
    if (this.sweepNeeded) return
    this.dirty.add(name)
    if (this.dirty.size > MAX_DIRTY_NAMES) {
      this.sweepNeeded = true
      this.dirty = new Set()
    }
  }

  /** Stops watching; later refreshes find other processes' changes by the directory's times, as without a watcher. */
  stop(): void {
    this.stopped = true
    this.unwatch()
  }

  private async refresh(): Promise<void> {
    if (!this.started) {
      this.started = true
      // Before the first readdir, so nothing that changes after it goes unreported.
      this.watch()
    }
    const dirStats = await this.fs.stat(this.dir)
    // An event the kernel queued before this refresh began is delivered by now: the stat above took a turn of the
    // event loop, and this waits for the rest of that turn's I/O callbacks.
    if (this.watcher !== undefined) await new Promise((resolve) => setImmediate(resolve))
    const before = this.dirStats
    if (this.rewatch || (before !== undefined && before.ino !== dirStats.ino)) {
      // The directory was replaced: a watcher watches the old one.
      this.rewatch = false
      this.unwatch()
      this.watch()
      this.sweepNeeded = true
    }
    const dirChanged = before === undefined || before.ino !== dirStats.ino || before.mtimeMs !== dirStats.mtimeMs || before.ctimeMs !== dirStats.ctimeMs
    const silent = this.events === this.eventsAtRefresh
    this.eventsAtRefresh = this.events
    const sweep = this.sweepNeeded || (this.watcher === undefined ? dirChanged || this.dirRacy : dirChanged && silent)
    const names = this.dirty
    this.dirty = new Set()
    this.sweepNeeded = false
    try {
      if (sweep) await this.sweep()
      else {
        // Unreadable files are read again every time: the failure may have passed.
        for (const name of this.unreadableFiles.keys()) names.add(name)
        await mapLimited([...names], CONCURRENCY, (name) => this.check(name))
      }
    } catch (err) {
      this.sweepNeeded = true
      throw err
    }
    this.dirStats = dirStats
    // A change now could leave both times as they are only while both are that recent.
    this.dirRacy = Date.now() - Math.min(dirStats.mtimeMs, dirStats.ctimeMs ?? dirStats.mtimeMs) < RACY_MS
  }

  /** Every Task file in the directory: names gone are dropped, the others looked at. */
  private async sweep(): Promise<void> {
    const names = (await this.fs.readdir(this.dir)).filter(isTaskFile)
    const present = new Set(names)
    for (const name of this.entries.keys()) if (!present.has(name)) this.entries.delete(name)
    for (const name of this.unreadableFiles.keys()) if (!present.has(name)) this.unreadableFiles.delete(name)
    await mapLimited(names, CONCURRENCY, (name) => this.check(name))
  }

  /** Stats `name`, and reads it unless it is indexed with the same stamp. */
  private async check(name: string): Promise<void> {
    const file = path.join(this.dir, name)
    let stats: FileStat
    try {
      stats = await this.fs.stat(file)
    } catch (err) {
      if (isMissing(err)) this.forget(name)
      else this.setUnreadable(name, readError(file, err))
      return
    }
    const entry = this.entries.get(name)
    if (entry !== undefined && unchanged(entry.stamp, stats)) {
      if (entry.stamp!.ctimeMs === undefined) entry.stamp = stampOf(stats)
      return
    }
    let text: string
    try {
      text = await this.fs.readFile(file, "utf8")
    } catch (err) {
      if (isMissing(err)) this.forget(name)
      else this.setUnreadable(name, readError(file, err))
      return
    }
    try {
      this.set({ name, key: listKeyOf(parseStoredTask(text, "FileTaskStore", `task file at ${file}`)), stamp: stampOf(stats) })
    } catch (err) {
      this.setUnreadable(name, err as Error)
    }
  }

  private set(entry: Listed): void {
    this.entries.set(entry.name, entry)
    this.unreadableFiles.delete(entry.name)
  }

  private setUnreadable(name: string, error: Error): void {
    this.entries.delete(name)
    this.unreadableFiles.set(name, error)
  }

  private forget(name: string): void {
    this.entries.delete(name)
    this.unreadableFiles.delete(name)
  }

  private watch(): void {
    if (this.fs.watchDirectory === undefined || this.stopped) return
    try {
      this.watcher = this.fs.watchDirectory(
        this.dir,
        (name) => this.changed(name),
        (err) => this.lost(err),
      )
    } catch (err) {
      this.lost(err as Error)
    }
  }

  private changed(name: string | undefined): void {
    this.events++
    if (name === undefined) this.sweepNeeded = true
    else if (isTaskFile(name)) this.markDirty(name)
    else this.onOtherName(name)
    // fs.watch names the directory itself when it is removed or moved, then goes quiet (even if one is made again in its place).
    if (name === path.basename(this.dir)) this.rewatch = true
  }

  /** The watcher failed or could not start: from now on, refreshes go by the directory's times. */
  private lost(err: Error): void {
    this.unwatch()
    this.sweepNeeded = true
    this.report(
      new Error(`FileTaskStore cannot watch ${this.dir}; listings now find other processes' changes by a stat of every file whenever the directory changes: ${err.message}`, { cause: err }),
      "watch",
    )
  }

  private unwatch(): void {
    const watcher = this.watcher
    this.watcher = undefined
    try {
      watcher?.close()
    } catch {
      // Closing a watcher that already failed: nothing more to stop.
    }
  }
}

function readError(file: string, err: unknown): Error {
  return new Error(`FileTaskStore could not read ${file}: ${(err as Error).message}`, { cause: err })
}
