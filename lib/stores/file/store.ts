import fs from "node:fs"
import fsp from "node:fs/promises"
import path from "node:path"
import { BoundedCache } from "../../bounded-cache.js"
import { heapShare, textHeapBytes } from "../../heap-budget.js"
import { isProcessAlive } from "../../process.js"
import type { A2ATask } from "../../types.js"
import { errorReporter, type ReportError, type TaskStoreOptions } from "../background-errors.js"
import { FileIndex, mapLimited, sameKey, stampOf, unchanged, type FileStamp, type Listed } from "./list-index.js"
import { idFromFileName, pidFromTmpFileName, taskFileName, tmpFileName } from "./names.js"
import { checkQuery, listKeyOf, pageOf, withoutArtifacts, type ListKey, type TaskPage, type TaskQuery } from "../list.js"
import { OpenOnce } from "../open-once.js"
import { isExpired, retentionSweeper, type RetentionSweeper } from "../retention.js"
import { assertTask, assertTaskId, parseStoredTask } from "../task-checks.js"
import type { TaskStore } from "../task-store.js"
import { WriteOrder } from "../write-order.js"
import { isMissing, readText, syncDirectory, type FileStat, type FileSystem, type FileSystemHandle } from "./file-system.js"
import { NextRun } from "../next-run.js"
import { FilePushStore } from "./push.js"
import { FileEventLog } from "./events.js"
import { eventRetentionOf, type EventLog } from "../../streams/event-log.js"
import { savedEvents, type SavedEvent } from "../push-records.js"
import type { PushEvent, PushStore } from "../push-store.js"

export type { FileStat, FileSystem, FileSystemHandle } from "./file-system.js"

export interface FileTaskStoreOptions extends TaskStoreOptions {
  /** Every file operation goes through it, creating the directory included; default node:fs (its callback API). */
  fs?: FileSystem
  /** Heap the read cache may take, in bytes (2 per character of each file's text); default a sixteenth of the heap limit. */
  readCacheBytes?: number
  /**
   * How long a finished Task's stream events are kept for resuming (`store.events`, in `<dir>/.events`),
   * in ms after the Task ended (default one hour); the log goes sooner with its Task.
   */
  eventRetentionMs?: number
}

/** A save never takes this long, so a tmp file this old is abandoned whoever wrote it. */
const ABANDONED_TMP_AGE_MS = 10 * 60_000
const FILE_SYSTEM_METHODS = ["mkdir", "open", "rename", "rm", "readFile", "readdir", "stat"] as const
/** Files a listing reads side by side, and how often it pages again when its page's files were not what the index said. */
const PAGE_READERS = 16
const PAGE_ATTEMPTS = 3
/** Expired Tasks a retention sweep removes side by side. */
const RETENTION_REMOVERS = 8
/** How many files' text get() keeps to skip re-reading them, and the heap they may take: a sixteenth of the heap limit. */
const READ_CACHE_ENTRIES = 10_000
const READ_CACHE_HEAP_FRACTION = 1 / 16
/** A cached read's own objects (the record, its path key), besides the text. */
const CACHED_READ_HEAP_BYTES = 512

/** A file's text as read, and the stat that says it is still the same file. */
interface CachedRead {
  stamp: FileStamp
  text: string
  /** The id of the Task in the text. */
  id: string
}

function weighCachedRead(read: CachedRead): number {
  return CACHED_READ_HEAP_BYTES + textHeapBytes(read.text) + textHeapBytes(read.id)
}

/** Settles with what a node:fs callback function gives. */
function viaCallback<T = void>(call: (done: (err: NodeJS.ErrnoException | null, value?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => call((err, value) => (err ? reject(err) : resolve(value as T))))
}

/**
 * New files are opened with O_DSYNC where the platform has it: each write
 * is then durable when it returns, as after an fdatasync (the data and the
 * size needed to read it back), which saves a sync call per save.
 */
const { O_WRONLY, O_CREAT, O_EXCL, O_DSYNC } = fs.constants
const WRITE_NEW_SYNCED = O_DSYNC === undefined ? undefined : O_WRONLY | O_CREAT | O_EXCL | O_DSYNC

/** A file descriptor as a FileSystemHandle, through the callback API; `synced` when its writes are already durable. */
function handleOf(fd: number, synced: boolean): FileSystemHandle {
  return {
    writeFile: (data, encoding) => viaCallback((done) => fs.writeFile(fd, data, encoding, done)),
    sync: synced ? () => Promise.resolve() : () => viaCallback((done) => fs.fsync(fd, done)),
    close: () => viaCallback((done) => fs.close(fd, done)),
  }
}

function openFile(path: string, flags: "wx" | "r"): Promise<FileSystemHandle> {
  const synced = flags === "wx" && WRITE_NEW_SYNCED !== undefined
  return viaCallback<number>((done) => fs.open(path, synced ? WRITE_NEW_SYNCED : flags, 0o666, done)).then((fd) => handleOf(fd, synced))
}

/**
 * node:fs, through the callback API: on Node 20 it is markedly faster than
 * node:fs/promises (and its FileHandle) for the small files a store works on.
 */
const defaultFileSystem: FileSystem = {
  mkdir: (path, options) => fsp.mkdir(path, options),
  open: openFile,
  createUnsynced: (path, data, encoding) => viaCallback((done) => fs.writeFile(path, data, { encoding, flag: "wx" }, done)),
  rename: (from, to) => viaCallback((done) => fs.rename(from, to, done)),
  link: (from, to) => viaCallback((done) => fs.link(from, to, done)),
  appendFile: (path, data, encoding) => viaCallback((done) => fs.appendFile(path, data, encoding, done)),
  // A file is unlinked in one call (fsp.rm looks first); a directory goes through fsp.rm.
  rm: (path, options) =>
    options.recursive ? fsp.rm(path, options) : viaCallback((done) => fs.unlink(path, (err) => done(err?.code === "ENOENT" ? null : err))),
  readdir: (path) => viaCallback<string[]>((done) => fs.readdir(path, done)),
  readFile: (path, encoding) => viaCallback<string>((done) => fs.readFile(path, encoding, done)),
  stat: (path) => viaCallback<fs.Stats>((done) => fs.stat(path, done)),
  watchDirectory: (dir, onChange, onError) => {
    // Not persistent: a store that is never closed must not keep the process alive.
    const watcher = fs.watch(dir, { persistent: false }, (_event, name) => onChange(name ?? undefined))
    watcher.on("error", onError)
    return watcher
  },
}

let tmpCounter = 0

/**
 * One JSON file per Task id in one directory.
 *
 * A save writes a uniquely named tmp file, fsyncs it, renames it over the
 * Task's file and fsyncs the directory: a reader never sees a half-written
 * Task, and an acknowledged save survives a crash. Saves and deletes of one
 * id take effect in call order. A file that cannot be read or parsed is an
 * error, never "not found". Opening the directory (begun at construction,
 * tried again by the next call when it fails) creates it and removes the tmp
 * files of saves a crash cut short; tmp files are never read as Tasks.
 *
 * list() pages from an index of what it filters and orders by (see
 * FileIndex), and reads only the files of the page. With `opts.retention`,
 * finished Tasks older than its TTL are deleted in the background.
 * Push configs and notifications live in `<dir>/.push` (FilePushStore),
 * stream events in `<dir>/.events` (FileEventLog): dot-directories, which
 * no listing reads as Tasks.
 */
export class FileTaskStore implements TaskStore {
  readonly dir: string
  private readonly fs: FileSystem
  private readonly report: ReportError
  /** The directory, created and rid of abandoned tmp files; every operation waits for it. */
  private readonly directory: OpenOnce<void>
  private readonly writes = new WriteOrder()
  /**
   * Group commit: saves whose renames are done share one directory fsync,
   * as long as it began after their rename. A save arriving while an fsync
   * runs waits for the next one, which serves every save that arrived meanwhile.
   */
  private readonly directorySyncs = new NextRun(() => this.syncDirectory())
  /** Text of files read before, by path, the longest ago read first; a file bigger than the whole budget is read every time. */
  private readonly readCache: BoundedCache<string, CachedRead>
  /** What list() filters and orders by, for every Task file: built by the first listing. */
  private readonly index: FileIndex
  private readonly retention: RetentionSweeper | undefined
  private readonly pushFiles: FilePushStore
  private readonly eventFiles: FileEventLog

  constructor(dir: string, options: FileTaskStoreOptions = {}) {
    if (typeof dir !== "string" || dir.length === 0) {
      throw new TypeError("FileTaskStore needs a directory path, e.g. new FileTaskStore(\"./.toolnexus/tasks\")")
    }
    const custom = options.fs
    if (custom !== undefined && FILE_SYSTEM_METHODS.some((name) => typeof custom?.[name] !== "function")) {
      throw new TypeError(`FileTaskStore options.fs should be an object with ${FILE_SYSTEM_METHODS.join(", ")} methods, like node:fs/promises`)
    }
    const { readCacheBytes = heapShare(READ_CACHE_HEAP_FRACTION) } = options
    if (!(Number.isInteger(readCacheBytes) && readCacheBytes >= 0)) {
      throw new TypeError("FileTaskStore options.readCacheBytes should be a whole number of bytes >= 0 (0: no read cache)")
    }
    this.readCache = new BoundedCache({ maxEntries: READ_CACHE_ENTRIES, maxBytes: readCacheBytes }, weighCachedRead)
    this.dir = path.resolve(dir)
    this.fs = custom ?? defaultFileSystem
    if (custom?.watchDirectory !== undefined && typeof custom.watchDirectory !== "function") {
      throw new TypeError("FileTaskStore options.fs.watchDirectory, when given, should be a function (dir, onChange, onError) => { close() }")
    }
    this.report = errorReporter("FileTaskStore", options.onError)
    // `.push` made by another process (its first push config in the directory): read, and watched from now on.
    this.index = new FileIndex(this.fs, this.dir, this.report, (name) => {
      if (name === ".push") this.pushFiles.load().catch((err: unknown) => this.report(err, "push"))
    })
    this.retention = retentionSweeper("FileTaskStore", options.retention, (cutoff) => this.deleteFinishedBefore(cutoff), this.report)
    this.eventFiles = new FileEventLog({
      dir: this.dir,
      fs: this.fs,
      report: this.report,
      retentionMs: eventRetentionOf("FileTaskStore", options.eventRetentionMs),
      open: () => this.open(),
      removeAbandonedTmpFiles: (dir) => removeAbandonedTmpFiles(this.fs, dir),
    })
    this.pushFiles = new FilePushStore({
      dir: this.dir,
      fs: this.fs,
      report: this.report,
      open: () => this.open(),
      stored: (id) => this.get(id),
      storedText: async (id) => (this.canHold(id) ? (await this.readCurrent(this.fileFor(id), id))?.text : undefined),
      inOrder: (id, write) => this.writes.run(id, write),
      saveWithEvent: (task, events) => this.saveWithEvent(task, events),
    })
    // Never closed: close() only waits, and the store stays usable after it.
    this.directory = new OpenOnce(async () => {
      await openDirectory(this.fs, this.dir)
      await this.pushFiles.load()
      await this.pushFiles.recover()
      this.retention?.start()
      this.eventFiles.start()
    })
    // Begun now, so a neighbour's abandoned tmp files go early; a failure is forgotten and the next call tries again.
    void this.open().catch(() => {})
  }

  /**
   * Creates the directory if it is missing and removes the tmp files of
   * saves a crash cut short. Every other call waits for it, so calling it
   * is needed only to learn early that the directory cannot be used.
   */
  open(): Promise<void> {
    return this.directory.get()
  }

  /** Push configs and notifications, in `<dir>/.push` (see FilePushStore). */
  get push(): PushStore {
    return this.pushFiles
  }

  /** The events of the Tasks' streams, for resuming them, in `<dir>/.events` (see FileEventLog). */
  get events(): EventLog {
    return this.eventFiles
  }

  /** The file a Task id is stored in. */
  fileFor(id: string): string {
    if (!this.canHold(id)) throw new TypeError("A Task id must not contain NUL bytes")
    return path.join(this.dir, taskFileName(id))
  }

  /** False for an id save() refuses (one with NUL): no Task has it, so a lookup finds nothing. Throws for a non-id. */
  private canHold(id: string): boolean {
    assertTaskId(id)
    return !id.includes("\0")
  }

  async get(id: string): Promise<A2ATask | undefined> {
    if (!this.canHold(id)) return undefined
    const file = this.fileFor(id)
    await this.open()
    const read = await this.readCurrent(file, id)
    // A text from the cache is parsed anew: every caller gets a Task of its own.
    return read === undefined ? undefined : (read.task ?? this.parse(file, read.text))
  }

  async getText(id: string): Promise<string | undefined> {
    if (!this.canHold(id)) return undefined
    const file = this.fileFor(id)
    await this.open()
    return (await this.readCurrent(file, id))?.text
  }

  /**
   * Task `id`'s file as text (and, when it was read anew, parsed), reusing
   * the text read last time while a stat shows the same file: every save
   * renames a new file into place, so a change by any process shows as a
   * new inode, size or time.
   */
  private async readCurrent(file: string, id: string, known?: FileStat): Promise<{ text: string; task?: A2ATask } | undefined> {
    let stats: FileStat
    try {
      stats = known ?? (await this.fs.stat(file))
    } catch (err) {
      this.readCache.delete(file)
      if (isMissing(err)) return undefined
      throw new Error(`FileTaskStore could not read ${file}: ${(err as Error).message}`, { cause: err })
    }
    const cached = this.readCache.get(file)
    let read: { text: string; id: string; task?: A2ATask }
    if (cached && unchanged(cached.stamp, stats)) {
      // A save's stamp has no ctime (its rename changes it): the first stat after it gives it.
      cached.stamp.ctimeMs ??= stats.ctimeMs
      read = cached
    } else {
      const text = await readText(this.fs, file)
      if (text === undefined) return undefined
      const task = this.parse(file, text)
      read = { text, id: task.id, task }
      const stamp = stampOf(stats)
      if (stamp !== undefined && stamp.ctimeMs !== undefined) this.readCache.set(file, { stamp, text, id: task.id })
    }
    // A hashed file name could in theory be shared by two ids; the id inside decides.
    if (read.id !== id) throw new Error(`FileTaskStore found a file at ${file} that does not hold task ${JSON.stringify(id)}`)
    return read
  }

  private parse(file: string, text: string): A2ATask {
    return parseStoredTask(text, "FileTaskStore", `task file at ${file}`)
  }

  async save(task: A2ATask): Promise<void> {
    await this.saveWithEvent(task, [])
  }

  /**
   * save(), and for a Task with push configs the events' notifications,
   * written before the Task, which carries the last one's seq and the record
   * of what is pending (see FilePushStore).
   */
  private saveWithEvent(task: A2ATask, events: readonly PushEvent[]): Promise<number> {
    let file: string
    let text: string
    let notified: SavedEvent[]
    try {
      assertTask(task, "FileTaskStore")
      file = this.fileFor(task.id)
      // Serialize now, so a caller mutating the Task after save() cannot change what lands on disk.
      text = JSON.stringify(task)
      notified = savedEvents(events, task, "FileTaskStore")
    } catch (err) {
      return Promise.reject(err)
    }
    const key = listKeyOf(task)
    const { id } = task
    return this.writes.run(id, async () => {
      await this.open()
      const plan = await this.pushFiles.prepare(id, notified, text, Date.now())
      if (plan === undefined) {
        await this.writeDurably(file, text, key)
        return 0
      }
      try {
        // Kept in the read cache: the sender reads the Task's pushSeq soon after.
        await this.writeDurably(file, JSON.stringify(plan.task), key, true)
      } catch (err) {
        await plan.undo()
        throw err
      }
      plan.landed()
      return plan.written
    })
  }

  /**
   * One page, from the index, reading only the page's files. A file that
   * cannot be read or parsed is left out and reported to onError
   * (operation "list") rather than failing every listing and restart
   * recovery with it; `get` of its id still rejects with the error. A page
   * file found changed since it was indexed is indexed anew, and the page
   * made again.
   */
  async list(query: TaskQuery): Promise<TaskPage> {
    checkQuery(query)
    await this.open()
    await this.index.current()
    for (const [name, err] of this.index.unreadable()) this.reportUnlisted(name, err)
    for (let attempt = 1; ; attempt++) {
      const { items, ...page } = pageOf(this.index.listed(), keyOfListed, query)
      const reads = await mapLimited(items, PAGE_READERS, (item) => this.readListed(item))
      if (attempt < PAGE_ATTEMPTS && reads.some((read) => read.changed)) continue
      const tasks = reads.flatMap((read) => (read.task === undefined ? [] : [read.task]))
      return { ...page, tasks: query.includeArtifacts ? tasks : tasks.map(withoutArtifacts) }
    }
  }

  /** A listed file's Task, through the read cache; `changed` when the file no longer holds what the index said (the index is told). */
  private async readListed(item: Listed): Promise<{ task?: A2ATask; changed: boolean }> {
    const file = path.join(this.dir, item.name)
    try {
      const stats = await this.fs.stat(file)
      const read = await this.readCurrent(file, item.key.id, stats)
      if (read === undefined) {
        this.index.removed(item.name)
        return { changed: true }
      }
      const task = read.task ?? this.parse(file, read.text)
      if (unchanged(item.stamp, stats)) return { task, changed: false }
      const key = listKeyOf(task)
      this.index.found(item.name, { key, stamp: stampOf(stats) })
      return { task, changed: !sameKey(key, item.key) }
    } catch (err) {
      if (isMissing(err)) {
        this.index.removed(item.name)
        return { changed: true }
      }
      this.index.found(item.name, { error: err as Error })
      this.reportUnlisted(item.name, err as Error)
      return { changed: true }
    }
  }

  private reportUnlisted(name: string, err: Error): void {
    this.report(new Error(`FileTaskStore left an unreadable file out of a listing: ${err.message}`, { cause: err }), "list", idFromFileName(name))
  }

  /**
   * Deletes the Tasks `isExpired` at `cutoff` (finished, with an ISO 8601
   * status timestamp before it); resolves with how many. What a retention
   * sweep calls. Each goes through its id's write order,
   * so a save of it called meanwhile in this process lands; a save by
   * another process found in its place is put back (see removeExpired).
   */
  async deleteFinishedBefore(cutoff: string): Promise<number> {
    if (typeof cutoff !== "string") throw new TypeError("deleteFinishedBefore needs an ISO-8601 time, e.g. new Date(Date.now() - ttlMs).toISOString()")
    await this.open()
    await this.index.current()
    const expired = [...this.index.listed()].filter((item) => isExpired(item.key, cutoff))
    const removed = await mapLimited(expired, RETENTION_REMOVERS, (item) =>
      this.removeExpired(item, cutoff).catch((err) => {
        this.report(err, "retention", item.key.id)
        return false
      }),
    )
    return removed.filter(Boolean).length
  }

  /**
   * Removes an expired Task's file unless it changed into something that
   * is not. The file is renamed aside (to a tmp name, never read as a Task)
   * before it is removed: if what was moved is not the file just checked,
   * a save by another process landed in between, and it is renamed back.
   */
  private removeExpired(item: Listed, cutoff: string): Promise<boolean> {
    return this.writes.run(item.key.id, async () => {
      const file = path.join(this.dir, item.name)
      let stats: FileStat
      try {
        stats = await this.fs.stat(file)
      } catch (err) {
        if (!isMissing(err)) throw err
        this.index.removed(item.name)
        return false
      }
      if (!unchanged(item.stamp, stats)) {
        const text = await readText(this.fs, file)
        if (text === undefined) return false
        const key = listKeyOf(this.parse(file, text))
        this.index.found(item.name, { key, stamp: stampOf(stats) })
        if (!isExpired(key, cutoff)) return false
      }
      const aside = path.join(this.dir, tmpFileName(item.name, process.pid, ++tmpCounter))
      try {
        await this.fs.rename(file, aside)
      } catch (err) {
        if (!isMissing(err)) throw err
        this.index.removed(item.name)
        return false
      }
      const moved = await this.fs.stat(aside)
      if (stats.ino !== undefined && (moved.ino !== stats.ino || moved.size !== stats.size || moved.mtimeMs !== stats.mtimeMs)) {
        await this.putBack(aside, file)
        this.index.markDirty(item.name)
        return false
      }
      await this.fs.rm(aside, { force: true })
      this.index.removed(item.name)
      await this.pushFiles.removeTask(item.key.id)
      await this.eventFiles.removeTask(item.key.id)
      return true
    })
  }

  delete(id: string): Promise<void> {
    let file: string
    try {
      if (!this.canHold(id)) return Promise.resolve() // no Task has it: nothing to delete
      file = this.fileFor(id)
    } catch (err) {
      return Promise.reject(err)
    }
    return this.writes.run(id, async () => {
      await this.open()
      // Push files and events first: a crash between leaves a Task without them, never ones a new Task of that id would find.
      await this.pushFiles.removeTask(id)
      await this.eventFiles.removeTask(id)
      await this.fs.rm(file, { force: true })
      this.index.removed(path.basename(file))
    })
  }

  /**
   * Stops the retention sweeps (of Tasks and of ended stream events) and the
   * index's watcher, and resolves once the opening and every save, delete and
   * event append already called have landed (or failed), and the push
   * notifications they wrote are durable (see FilePushStore.settle). The
   * store stays usable; its listings then find other processes' changes by
   * the directory's times.
   */
  async close(): Promise<void> {
    this.index.stop()
    this.pushFiles.stop()
    await Promise.all([this.directory.current?.catch(() => {}), this.writes.idle(), this.retention?.stop(), this.eventFiles.stop()])
    await this.pushFiles.settle()
  }

  /** `cache`: keep the text in the read cache (it always is when the index needs the file's stamp anyway). */
  private async writeDurably(file: string, text: string, key: ListKey, cache = false): Promise<void> {
    const { tmp, handle } = await this.openTmpFile(file)
    let stamp
    // Cached only where the file system layer gives ctimes: the first stat after the rename then completes the stamp.
    let cacheable = false
    try {
      try {
        await handle.writeFile(text, "utf8")
        await handle.sync()
      } finally {
        await handle.close()
      }
      // Stamped before the rename, so the stamp is of this very file (after it, another process's may be in place).
      // Without its ctime: the rename changes that, and an unknown ctime is taken from the next stat.
      if (this.index.active || cache) {
        const stats = await this.fs.stat(tmp)
        stamp = withoutCtime(stampOf(stats))
        cacheable = stats.ctimeMs !== undefined
      }
      await this.fs.rename(tmp, file)
    } catch (err) {
      await this.fs.rm(tmp, { force: true }).catch(() => {})
      throw err
    }
    if (stamp !== undefined && cacheable) this.readCache.set(file, { stamp: { ...stamp }, text, id: key.id })
    this.index.saved(path.basename(file), key, stamp)
    await this.directorySyncs.request()
  }

  /**
   * Puts back a file another process saved while a sweep had it aside:
   * linked without replacing, so a save that landed in its place since (newer
   * still) is kept and the one put back is dropped; by a rename on a file
   * system layer without link.
   */
  private async putBack(aside: string, file: string): Promise<void> {
    if (this.fs.link === undefined) return this.fs.rename(aside, file)
    try {
      await this.fs.link(aside, file)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") return this.fs.rename(aside, file)
    }
    await this.fs.rm(aside, { force: true })
  }

  /** Creates a tmp file no one else writes: "wx" refuses a name that exists (a leftover, or another process with our pid). */
  private async openTmpFile(file: string): Promise<{ tmp: string; handle: FileSystemHandle }> {
    for (let attempt = 1; ; attempt++) {
      const tmp = path.join(this.dir, tmpFileName(path.basename(file), process.pid, ++tmpCounter))
      try {
        return { tmp, handle: await this.fs.open(tmp, "wx") }
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST" || attempt >= 10) throw err
      }
    }
  }
  /** Makes the renames in the directory durable. */
  private syncDirectory(): Promise<void> {
    return syncDirectory(this.fs, this.dir)
  }
}

const keyOfListed = (item: Listed): ListKey => item.key


/** Creates the directory (through the store's file system, like every other operation), then sweeps it. */
async function openDirectory(files: FileSystem, dir: string): Promise<void> {
  try {
    await files.mkdir(dir, { recursive: true })
  } catch (err) {
    throw new Error(`FileTaskStore could not create its directory ${dir}: ${(err as Error).message}`, { cause: err })
  }
  await removeAbandonedTmpFiles(files, dir)
}

/**
 * Removes the tmp files of saves a crash cut short: those of a pid that is no
 * live process on this host, and any older than a save can take. A fresh tmp
 * file of a live process is kept: two processes may share the directory, and
 * it may be mid-save. Best effort: a tmp file left behind costs only space.
 * A pid is only known in its own pid namespace: a store in another container
 * on the same volume may remove a fresh tmp file, and that save then rejects
 * (its rename finds no file); nothing acknowledged is lost or torn.
 */
async function removeAbandonedTmpFiles(files: FileSystem, dir: string): Promise<void> {
  let names: string[]
  try {
    names = await files.readdir(dir)
  } catch {
    return
  }
  for (const name of names) {
    const pid = pidFromTmpFileName(name)
    if (pid === undefined) continue
    const tmp = path.join(dir, name)
    try {
      if (isProcessAlive(pid) && Date.now() - (await files.stat(tmp)).mtimeMs < ABANDONED_TMP_AGE_MS) continue
      await files.rm(tmp, { force: true })
    } catch {
      // Gone already (its save renamed it), or not ours to remove: either way, leave it.
    }
  }
}

/** A stamp taken before a rename, which changes the file's ctime: the ctime is left to the next stat. */
function withoutCtime(stamp: FileStamp | undefined): FileStamp | undefined {
  return stamp === undefined ? undefined : { ...stamp, ctimeMs: undefined }
}
