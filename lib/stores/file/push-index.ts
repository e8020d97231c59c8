import { isMissing } from "./file-system.js"
import { STORE, type PushFiles } from "./push-files.js"
import { isTaskDir } from "./push-names.js"

/** How often a claim reads every Task directory, not only those known to hold notifications. */
export const FULL_SCAN_MS = 5000

/** When a Task directory is next worth a claim's look (ms since the epoch), and how many times it was marked due. */
export interface Due {
  at: number
  marks: number
  /** The highest pushSeq this process saw its Task saved with: notifications up to it are deliverable without reading the Task. */
  landed: number
  /** A notification waits behind a held one in its channel: settling that one makes the directory due. */
  waiting?: boolean
}

/**
 * Which Task directories under `.push` there are, and which may hold a
 * notification due, as far as this process knows.
 *
 * A Task without a push directory costs a save nothing: which Tasks have
 * one is known in memory (`known`: read at open, kept by this process's
 * changes, a watch of `.push` once it exists, one of the store's directory
 * telling when `.push` is made (FileIndex's, from the first listing on), and
 * every full scan's listing). Another process's first config for a Task is
 * seen by a watch at once; on a file system layer without one, by the next
 * full scan (FULL_SCAN_MS): saves of the Task in between enqueue nothing
 * for it.
 *
 * A claim reads only the Task directories that may hold a notification due
 * by then (`due`: marked by this process's saves and settlements, and by
 * what each claim saw); every FULL_SCAN_MS, and on its first, it reads them
 * all, for the notifications other processes wrote (theirs to send while
 * they live) and those a dead one left.
 */
export class PushIndex {
  /** The names of the Task directories under `.push`, as far as this process knows. */
  readonly known = new Set<string>()
  /** The Task directories that may hold notifications, as far as this process knows (in the order first marked). */
  readonly due = new Map<string, Due>()
  private lastFullScan = -Infinity
  private watcher: { close(): void } | undefined
  /** Whether `.push` was there when the store opened: only then may a recovery be due. */
  rooted = false

  constructor(private readonly files: PushFiles) {}

  /** Reads which Tasks have push directories, and watches for more; part of the store's opening. */
  async load(): Promise<void> {
    let names: string[]
    try {
      names = await this.files.fs.readdir(this.files.root)
    } catch (err) {
      if (isMissing(err)) return
      throw new Error(`${STORE} could not read ${this.files.root}: ${(err as Error).message}`, { cause: err })
    }
    this.rooted = true
    // Watched, then read again: a directory made after the first read is either reported or read.
    this.watch()
    for (const name of [...names, ...(await this.files.names(this.files.root))]) if (isTaskDir(name)) this.known.add(name)
  }

  watch(): void {
    const { fs, root } = this.files
    if (this.watcher !== undefined || fs.watchDirectory === undefined) return
    try {
      this.watcher = fs.watchDirectory(
        root,
        (name) => {
          if (name === undefined || !isTaskDir(name)) return
          this.known.add(name)
          this.markDue(name) // another process's new directory: its first notification need not wait for a full scan
        },
        () => {
          this.watcher = undefined // claims' listings keep `known` current meanwhile
        },
      )
    } catch {
      // Not watchable here: claims' listings keep `known` current.
    }
  }

  /** Stops the watch of `.push`. */
  stop(): void {
    const watcher = this.watcher
    this.watcher = undefined
    try {
      watcher?.close()
    } catch {
      // A watch that cannot be closed is gone all the same.
    }
  }

  /** A Task's directory was removed with its Task. */
  removed(dirName: string): void {
    this.known.delete(dirName)
    this.due.delete(dirName)
  }

  /**
   * The Task directories a claim at `now` reads: all of them (`full`) on
   * the first claim and every FULL_SCAN_MS; else those due by then.
   */
  async toLook(now: number): Promise<{ full: boolean; dirs: string[] }> {
    const full = now - this.lastFullScan >= FULL_SCAN_MS || now < this.lastFullScan
    if (full) this.lastFullScan = now
    const dirs = full ? await this.taskDirs() : [...this.due].flatMap(([dirName, due]) => (due.at <= now ? [dirName] : []))
    return { full, dirs }
  }

  /** How many times the directory was marked due: a look that began at another count is out of date. */
  marksOf(dirName: string): number {
    return this.due.get(dirName)?.marks ?? 0
  }

  /** The highest pushSeq this process saw the directory's Task saved with. */
  landedOf(dirName: string): number {
    return this.due.get(dirName)?.landed ?? 0
  }

  /** A look at the directory begun at `marks` found this; unless marked due since (then what it saw is out of date), it is next due then. */
  looked(dirName: string, marks: number, found: { nextLook?: number; landed: number; waiting?: boolean }): void {
    if (this.marksOf(dirName) !== marks) return
    if (found.nextLook === undefined) this.due.delete(dirName)
    else this.due.set(dirName, { at: found.nextLook, marks, landed: Math.max(found.landed, this.landedOf(dirName)), waiting: found.waiting })
  }

  /** The Task was seen saved with pushSeq `landed`: the next look need not read it for notifications up to there. */
  sawLanded(dirName: string, landed: number): void {
    const due = this.due.get(dirName)
    if (due !== undefined) due.landed = Math.max(due.landed, landed)
  }

  /**
   * A claim of the directory was settled: it is due again when the channel
   * had more when claimed, or a look since found one waiting behind a held
   * notification. Either way a look under way when it settled is out of date.
   */
  settled(dirName: string, more: boolean): void {
    const due = this.due.get(dirName)
    if (more || due?.waiting) this.markDue(dirName)
    else if (due !== undefined) due.marks++
  }

  /** The Task directory may hold a notification due now: the next claim reads it. `landed`: its Task was saved with this pushSeq. */
  markDue(dirName: string, landed = 0): void {
    const due = this.due.get(dirName)
    this.due.set(dirName, { at: 0, marks: (due?.marks ?? 0) + 1, landed: Math.max(landed, due?.landed ?? 0) })
  }

  /**
   * The Task directories under `.push`; what this process knows of them
   * gains any it did not. None is forgotten here: a listing begun before a
   * putConfig made its directory would drop it, and saves would then skip
   * its notifications. A name goes only when its directory is found gone
   * (prepare) or removed with its Task.
   */
  async taskDirs(): Promise<string[]> {
    const names = (await this.files.names(this.files.root)).filter(isTaskDir)
    for (const name of names) this.known.add(name)
    if (names.length > 0) this.watch()
    return names
  }
}
