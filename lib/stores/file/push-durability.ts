import path from "node:path"
import { pushPendingOf, withoutPushPending, type PendingPush } from "../../internals.js"
import type { A2ATask } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { NextRun } from "../next-run.js"
import { isMissing } from "./file-system.js"
import { mapLimited } from "./list-index.js"
import { READERS, type PushFiles } from "./push-files.js"
import type { JournalItem, JournalWriter } from "./push-journal-writer.js"
import { configFileName, itemFileName, itemName, type ItemName } from "./push-names.js"
import { writeMark } from "./push-recovery.js"

/**
 * How often a store makes durable the notification files it wrote that are
 * still there this long after (most are sent by then, and cost no fsync),
 * and marks how far that goes: a recovery after a crash of the machine sends
 * again at most the notifications of the last two of these.
 */
const SETTLE_MS = 5000
/** Earlier notifications a save carries in its record at most, and the size of the stored Task file (its record included) past which it carries none: their files are synced instead. */
const MAX_CARRIED = 16
const MAX_CARRIED_BYTES = 64 * 1024

/** A notification file this store wrote unsynced, not yet made durable (see settle). */
interface Unsettled {
  dirName: string
  /** Its name as last known here (a hold renames it). */
  name: string
  /** Its record's `at`. */
  at: number
}

/**
 * Durability of the notifications, cheaply. The Task's save is the commit
 * marker: the notifications of a save are written first, then the Task is
 * saved carrying `pushSeq` (its internals) = their seq. A notification is
 * deliverable only once the stored Task's pushSeq reached it; one above it
 * whose writer died (or is older than a save can take) is from a save that
 * never landed, and is removed by the next save of the Task or by a claim.
 *
 * A new notification's file is not synced (no O_DSYNC, no fsync of it or of
 * its directory): the Task's save, which is, records it (`pushPending`, its
 * internals) with what is needed to write it again: its key, config, seq and
 * time, and the Task it reports (left out when it is the Task saved). A save
 * records its own notifications and carries those the stored Task recorded
 * whose files are still there unsynced (an ack or a dead letter removes the
 * file; a failed attempt's rewrite is synced). A kill of the process loses
 * nothing (the page cache keeps the files); after a crash of the machine,
 * push-recovery.ts writes them again. To keep that to the notifications of
 * the last seconds before the crash (a Task that is not saved again keeps
 * its list), each store makes durable, every SETTLE_MS, the files it wrote
 * that are still there SETTLE_MS after (and on close all of them), with their
 * directories, then records how far that goes in its mark: a recovery passes
 * over a record older than its writer's mark whose file is gone (sent). A
 * save carries at most MAX_CARRIED earlier records, and none when the Task's
 * file is past MAX_CARRIED_BYTES; past that, their files are synced there
 * and then and no longer recorded. Two processes saving one Task at once
 * each write their notification, and the Task's last save records only its
 * own: the other's is durable once its writer's mark covers it (within twice
 * SETTLE_MS), and a crash of the machine before that may lose it.
 *
 * A hold's rename is not synced (lost in a crash of the machine, it only
 * lets its notification be sent again, or its retry come early).
 */
export class PushDurability {
  /** The notification files this store wrote unsynced and has not made durable, as far as it knows still there, by the path they were written under. */
  private readonly unsettled = new Map<string, Unsettled>()
  /** The `now` of each prepare under way: a mark never passes one (its files may not be written yet). */
  private readonly preparing = new Set<{ now: number }>()
  /** The `at` of the last notification this store wrote; undefined before the first. */
  private lastWritten: number | undefined
  /** This store's records older than this need not be carried: their files were made durable, and its mark says so. */
  private settledBefore = -Infinity
  private readonly settles = new NextRun(() => this.settleOnce())
  private settleTimer: NodeJS.Timeout | undefined
  /** The next settle covers every file written (close), not only those older than SETTLE_MS (the timer). */
  private settleAll = false

  constructor(
    private readonly files: PushFiles,
    private readonly journals: JournalWriter,
    /** The store's name, in its records and its mark. */
    private readonly writer: string,
    private readonly report: ReportError,
  ) {}

  /** Runs a save's prepare at `now`: from its first await on, a mark taken meanwhile does not pass `now`, its notifications' `at`. */
  async preparingAt<T>(now: number, prepare: () => Promise<T>): Promise<T> {
    const writing = { now }
    this.preparing.add(writing)
    try {
      return await prepare()
    } finally {
      this.preparing.delete(writing)
    }
  }

  /** The notification file `file` (named `name` in Task directory `dirName`) was written unsynced at `at`. */
  wroteUnsynced(file: string, dirName: string, name: string, at: number): void {
    this.unsettled.set(file, { dirName, name, at })
  }

  /** A save's notifications were written at `now` (to files or a journal): the next settle makes them durable. */
  wrote(now: number): void {
    this.lastWritten = now
    this.scheduleSettle()
  }

  /** The file written under `file` is gone (sent, dead, written anew, taken back): nothing to make durable. */
  gone(file: string): void {
    this.unsettled.delete(file)
  }

  /** A notification this store holds or released under a new name: where settle finds it. */
  moved(dir: string, base: string, name: string): void {
    const entry = this.unsettled.get(path.join(dir, base))
    if (entry !== undefined) entry.name = name
  }

  /**
   * Makes durable the notification files this store wrote that are still
   * there (then their directories), and marks how far that goes: a recovery
   * does not write again a notification that was durable before it went.
   * What close() calls; a timer does the same every SETTLE_MS for the files
   * older than that. Never rejects.
   */
  settle(): Promise<void> {
    this.settleAll = true
    return this.settles.request()
  }

  /** Stops the timer of settle (close() settles). */
  stop(): void {
    clearTimeout(this.settleTimer)
    this.settleTimer = undefined
  }

  private async settleOnce(): Promise<void> {
    clearTimeout(this.settleTimer)
    this.settleTimer = undefined
    const all = this.settleAll
    this.settleAll = false
    const { journals } = this.journals
    if (this.lastWritten === undefined || (this.lastWritten < this.settledBefore && this.unsettled.size === 0 && journals.size === 0)) return
    let upTo = all ? Date.now() : Date.now() - SETTLE_MS
    for (const { now } of this.preparing) upTo = Math.min(upTo, now)
    const files = [...this.unsettled].filter(([, entry]) => entry.at < upTo)
    for (const [file] of files) this.unsettled.delete(file)
    const left: Array<[string, Unsettled]> = []
    try {
      const dirs = new Set<string>()
      await mapLimited(files, READERS, async ([file, entry]) => {
        const synced = await this.syncItem(path.join(this.files.root, entry.dirName), entry.name, path.basename(file))
        if (synced === "synced") dirs.add(entry.dirName)
        else if (synced === "moving") left.push([file, entry])
      })
      await mapLimited([...dirs], READERS, (dirName) => this.files.syncDir(path.join(this.files.root, dirName)))
      await this.journals.settleJournals(upTo)
      for (const [, entry] of left) upTo = Math.min(upTo, entry.at)
      await writeMark(this.files, this.writer, upTo)
      this.settledBefore = upTo
    } catch (err) {
      left.push(...files)
      // A Task deleted meanwhile, or the store's directory: tried again, and gone then.
      if (!isMissing(err)) this.report(err, "push")
    }
    for (const [file, entry] of left) if (!this.unsettled.has(file)) this.unsettled.set(file, entry)
    // Nothing is left to write after close: the done lines waiting for an append are written now.
    if (all) await this.journals.flushSent(true)
    await this.journals.compactJournals(all ? Infinity : upTo)
    if (this.unsettled.size > 0 || this.lastWritten >= upTo || journals.size > 0) this.scheduleSettle()
  }

  private scheduleSettle(): void {
    if (this.settleTimer !== undefined) return
    this.settleTimer = setTimeout(() => void this.settles.request(), SETTLE_MS)
    this.settleTimer.unref()
  }

  /**
   * Makes a notification's file durable (its directory is the caller's to
   * sync), looking for it again when a hold moved it: "gone" when it is no
   * longer there (sent, dead, written anew: synced), "moving" when it moved
   * each time.
   */
  private async syncItem(dir: string, name: string, base: string): Promise<"synced" | "gone" | "moving"> {
    for (let attempt = 0; attempt < 3; attempt++) {
      if (await this.files.syncFile(path.join(dir, name))) return "synced"
      const found = (await this.files.names(dir)).flatMap(itemName).find((item) => item.base === base)
      if (found === undefined) return "gone"
      name = found.name
    }
    return "moving"
  }

  /**
   * What a save carries of the stored Task's record: the notifications whose
   * files are still there unsynced (not written anew after a failed attempt,
   * not made durable by this store since), each with the Task it reports.
   * Past MAX_CARRIED of them, or when the stored Task's file is past
   * MAX_CARRIED_BYTES, their files are made durable here instead, and only
   * those that kept moving are carried.
   */
  async carried(dir: string, items: readonly ItemName[], journaled: readonly JournalItem[], stored: A2ATask | undefined, storedBytes: number): Promise<PendingPush[]> {
    const recorded = pushPendingOf(stored)
    if (recorded.length === 0) return []
    const unsynced = new Map<string, ItemName>()
    for (const item of items) if (item.attempts === 0) unsynced.set(item.base, item)
    const inJournal = new Map(journaled.map((item) => [item.key, item]))
    const nameOf = (record: PendingPush) => itemFileName(record.seq, record.pid, 0, configFileName(record.configId))
    let carried = recorded.filter(
      (record) => (unsynced.has(nameOf(record)) || inJournal.has(record.key)) && !(record.by === this.writer && record.at < this.settledBefore),
    )
    if (carried.length > 0 && (carried.length > MAX_CARRIED || storedBytes > MAX_CARRIED_BYTES)) {
      const moving: PendingPush[] = []
      const journals = new Map<string, PendingPush[]>()
      for (const record of carried) {
        const item = unsynced.get(nameOf(record))
        if (item === undefined) {
          const name = inJournal.get(record.key)!.journal.name
          journals.set(name, [...(journals.get(name) ?? []), record])
        } else if ((await this.syncItem(dir, item.name, item.base)) === "moving") moving.push(record)
      }
      // A journal taken over meanwhile: its notifications are written out as files of their own, and carried until then.
      for (const [name, records] of journals) if (!(await this.files.syncFile(path.join(dir, name)))) moving.push(...records)
      await this.files.syncDir(dir)
      carried = moving
    }
    let snapshot: A2ATask | undefined
    return carried.map((record) => (record.event.task !== undefined ? record : { ...record, event: { ...record.event, task: (snapshot ??= withoutPushPending(stored!)) } }))
  }
}
