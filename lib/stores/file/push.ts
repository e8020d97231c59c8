import { createHash, randomBytes } from "node:crypto"
import { readFile } from "node:fs/promises"
import { uptime } from "node:os"
import path from "node:path"
import { BoundedCache } from "../../bounded-cache.js"
import { heapShare, textHeapBytes } from "../../heap-budget.js"
import { pushPendingOf, pushSeqOf, withoutPushPending, withPushRecord, type PendingPush } from "../../internals.js"
import { isProcessAlive } from "../../process.js"
import type { A2ATask } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { idFromFileName, TASK_FILE_SUFFIX, taskFileName, tmpFileName } from "./names.js"
import { mapLimited } from "./list-index.js"
import { doneLine, entryLine, journalFileName, journalName, readJournal, takenJournalName, type JournalEntry, type JournalName } from "./push-journal.js"
import { isMissing, readText, syncDirectory, syncFile, writeNew, type FileSystem } from "./file-system.js"
import { NextRun } from "../next-run.js"
import { ABANDONED_PUSH_ITEM_MS, assertClaimArgs, assertPushConfig, deadLetterOf, newOutboxItem, padded, retried, type SavedEvent } from "../push-records.js"
import type { PushClaim, PushConfigRecord, PushDeadLetter, PushEvent, PushOutboxItem, PushStore } from "../push-store.js"
import { assertTaskId, parseStoredTask } from "../task-checks.js"

/**
 * FileTaskStore's push capability, in `<dir>/.push/<taskfile>/`, one
 * directory per Task that has (or had) configs, made on the first config:
 *
 * - `c-<version>-<random>-<configfile>`: a config; a put writes the next
 *   version and removes the one before (the newest counts, the name
 *   breaking a tie);
 * - `o-<seq>-<pid>-<attempts>-<configfile>`: a notification to that config,
 *   written by process `pid` before the Task save it reports; a failed
 *   attempt writes it anew under the next name, so a name always holds the
 *   same notification (and a claim reads it once); while held (claimed, or
 *   waiting for its retry) its name ends in `~<until>~<token>`;
 * - `j-<pid>-<writer>`: the journal of a store that sends (its claims ran
 *   in the last SENDING_MS): it appends its new notifications there instead
 *   of writing each as an `o-` file, and sends them itself (see
 *   file-push-journal.ts);
 * - `d-<deadAt>-<key>.json`: a dead letter.
 *
 * Configs, dead letters and a failed attempt's rewrite are written whole
 * and fsynced before they count (a rename of a synced tmp file), and their
 * directory is fsynced after; a hold's rename is not (lost in a crash of the
 * machine, it only lets its notification be sent again, or its retry come
 * early). The Task's save is the commit marker: the notifications of a save
 * are written first, then the Task is saved carrying `pushSeq` (its
 * internals) = their seq. A notification is deliverable only once the stored
 * Task's pushSeq reached it; one above it whose writer died (or is older than
 * a save can take) is from a save that never landed, and is removed by the
 * next save of the Task or by a claim.
 *
 * A new notification's file is not synced (no O_DSYNC, no fsync of it or of
 * its directory): the Task's save, which is, records it (`pushPending`, its
 * internals) with what is needed to write it again: its key, config, seq and
 * time, and the Task it reports (left out when it is the Task saved). A save
 * records its own notifications and carries those the stored Task recorded
 * whose files are still there unsynced (an ack or a dead letter removes the
 * file; a failed attempt's rewrite is synced). A kill of the process loses
 * nothing (the page cache keeps the files); after a crash of the machine
 * (`.push/.boot/id` names another boot), the store's opening, before any
 * save or claim, writes again, synced, every recorded notification whose
 * file is missing or unreadable: sent again at worst, under its key. To keep
 * that to the notifications of the last seconds before the crash (a Task
 * that is not saved again keeps its list), each store makes durable, every
 * SETTLE_MS, the files it wrote that are still there SETTLE_MS after (and on
 * close all of them), with their directories, then records how far that goes
 * in `.push/.boot/w-<store>`: a recovery passes over a record older than its
 * writer's mark whose file is gone (sent). A save carries at most
 * MAX_CARRIED earlier records, and none when the Task's file is past
 * MAX_CARRIED_BYTES; past that, their files are synced there and then and
 * no longer recorded. Two processes saving one Task at once each write their
 * notification, and the Task's last save records only its own: the other's
 * is durable once its writer's mark covers it (within twice SETTLE_MS), and
 * a crash of the machine before that may lose it.
 *
 * Leases: a claim renames the channel's first notification to a name that
 * holds it until the lease's end (a rename is atomic: of two processes only
 * one finds the name it renames), and a settlement goes by that name; a hold
 * past its end may be renamed again by any claim. Any number of
 * FileTaskStores, in any processes, may share the directory.
 *
 * Journals: what a store's journal holds is that store's to send, held in
 * its memory; it writes a notification out as an `o-` file (synced, and
 * marked done in the journal) when its attempt fails (the retry's file),
 * when its claim's lease runs out unsettled, when no claim took it within
 * SETTLE_MS (the store may no longer send), and at close: any store's claims
 * take it then. A journal's notifications count in their channels' order
 * for every store, and another store's `o-` files wait behind them. The
 * journal of a store that is gone (its process died, or its file lay
 * untouched past ABANDONED_PUSH_ITEM_MS) is taken over by the next claim
 * that lists it: its landed notifications are written out, and it is
 * removed. A journal follows the rules of the files above: unsynced, its
 * lines recorded by the Task's save and carried while not marked done, made
 * durable by the settle that finds a notification in it still held, and a
 * recovery after a crash of the machine writes again a recorded
 * notification no journal holds or marked done. An emptied journal is
 * removed SETTLE_MS after its last line (at once on close), one past
 * MAX_JOURNAL_BYTES takes no new notification. A notification costs a
 * journal two appends, where an `o-` file is made, renamed and removed.
 *
 * A Task without a push directory costs a save nothing: which Tasks have
 * one is known in memory (read at open, kept by this process's changes, a
 * watch of `.push` once it exists, one of the store's directory telling
 * when `.push` is made (FileIndex's, from the first listing on), and every
 * full scan's listing). Another process's first config for a Task is seen
 * by a watch at once; on a file system layer without one, by the next full
 * scan (FULL_SCAN_MS): saves of the Task in between enqueue nothing for it.
 *
 * A claim reads only the Task directories that may hold a notification due
 * by then (`due`: marked by this process's saves and settlements, and by
 * what each claim saw); every FULL_SCAN_MS, and on its first, it reads them
 * all, for the notifications other processes wrote (theirs to send while
 * they live) and those a dead one left.
 */

const CONFIG = "c-"
const ITEM = "o-"
const DEAD = "d-"
/** seq, pid, attempts, config file, and while held: until, token. */
const ITEM_NAME = /^o-(\d{16})-(\d{1,15})-(\d{1,9})-(.+\.json)(?:~(\d{16})~([\w-]{1,16}))?$/
/** The latest time a name holds: 16 digits. */
const MAX_NAMED_TIME = Number.MAX_SAFE_INTEGER
/** A hold's token is its store's name and a count, in at most 16 characters: the count in 8 base-36 digits. */
const HOLD_COUNT_WRAP = 36 ** 8
/** The token of a hold that waits for a retry's time (no claim holds it). */
const WAITING = "wait"
/** How a claim's token names a journal notification it holds: this, then the hold's number. */
const JOURNAL_HOLD = "j~"
/** version, a random part (two processes putting one config in the same millisecond name theirs apart), config file. */
const CONFIG_NAME = /^c-(\d{16})-[\w-]{8}-(.+\.json)$/
/** Config ids past this many characters of file name are named by their hash (the id inside tells them apart). */
const MAX_CONFIG_NAME = 160
/** Task directories a claim or dead-letter listing reads side by side. */
const READERS = 8
/** Task directories oldestPendingAt reads at most (of those due, the ones due longest), so a scrape costs the same at any backlog. */
const OLDEST_DIRS = 32
/** How many configs and notifications (and how much heap of them) saves and claims keep, so each file is read once. */
const RECORD_CACHE_ENTRIES = 10_000
const RECORD_CACHE_HEAP_FRACTION = 1 / 64
/** A cached record's own objects (the record, the path key), besides its text. */
const CACHED_RECORD_HEAP_BYTES = 1024
/** How often a claim reads every Task directory, not only those known to hold notifications. */
const FULL_SCAN_MS = 5000
/** When to look again at a notification whose save another process has under way. */
const UNLANDED_RECHECK_MS = 1000
/** Where the boot a store last ran under is recorded (`id`), and each store's mark (`w-<store>`): not a Task directory (no `.json`). */
const BOOT_DIR = ".boot"
const BOOT_FILE = "id"
const MARK = "w-"
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
/** A journal past this many bytes takes no more notifications (they get files of their own) until it is emptied and removed. */
const MAX_JOURNAL_BYTES = 256 * 1024
/** How long the done line of a sent journal notification may wait for its journal's next append before it is written alone. */
const SENT_FLUSH_MS = 200
/** A store whose claims ran this recently sends: its new notifications go to its journals (see file-push-journal.ts); else to files of their own, for whichever store claims. */
const SENDING_MS = FULL_SCAN_MS
/** A boot time reckoned from the clock (no boot id) moves when the clock is set: this close, it is the same boot. */
const BOOT_TIME_SLACK_S = 5

/** What the push files need of their FileTaskStore. */
export interface FilePushHost {
  readonly dir: string
  readonly fs: FileSystem
  readonly report: ReportError
  open(): Promise<void>
  /** The stored Task, or undefined. */
  stored(id: string): Promise<A2ATask | undefined>
  /** The stored Task's text, or undefined; without waiting for the store's opening (recovery is part of it). */
  storedText(id: string): Promise<string | undefined>
  /** Runs `write` in the Task's write order (after its saves and deletes called before). */
  inOrder<T>(id: string, write: () => Promise<T>): Promise<T>
  /** The store's save, with the events' notifications (it calls `prepare` inside the write order); resolves with how many it enqueued. */
  saveWithEvent(task: A2ATask, events: readonly PushEvent[]): Promise<number>
}

/** What a save does about push: the Task to save (with its pushSeq and the record of its pending notifications), how many notifications it wrote, how to take them back if the save fails, and what to do once it landed. */
export interface PushPlan {
  task: A2ATask
  written: number
  undo(): Promise<void>
  landed(): void
}

/** When a Task directory is next worth a claim's look (ms since the epoch), and how many times it was marked due. */
interface Due {
  at: number
  marks: number
  /** The highest pushSeq this process saw its Task saved with: notifications up to it are deliverable without reading the Task. */
  landed: number
  /** A notification waits behind a held one in its channel: settling that one makes the directory due. */
  waiting?: boolean
}


/** A notification file this store wrote unsynced, not yet made durable (see settle). */
interface Unsettled {
  dirName: string
  /** Its name as last known here (a hold renames it). */
  name: string
  /** Its record's `at`. */
  at: number
}

/** A record (config, notification) as read or written. */
interface Cached {
  record: unknown
  bytes: number
}

/** A notification's file name, read. */
interface ItemName {
  /** As listed. */
  name: string
  /** Without the hold: the name it was written under, which its record is cached by. */
  base: string
  seq: number
  pid: number
  /** Failed attempts when it was written. */
  attempts: number
  configFile: string
  /** Held until then (ms since the epoch); 0 when free. */
  until: number
}

/** A journal this store appends to (see file-push-journal.ts), as its memory holds it: what it holds is this store's to send. */
interface OwnJournal {
  dirName: string
  /** Its notifications not yet done, by key, in the order written. */
  entries: Map<string, OwnEntry>
  /** The keys of notifications sent (acked) whose done lines are not written yet: the next append carries them. */
  sent: string[]
  /** Bytes appended so far. */
  bytes: number
  /** When it was last appended to (ms since the epoch). */
  lastAppend: number
  /** Appended to since its last fsync; `fresh`: the file may be new since its directory's last fsync. */
  unsynced: boolean
  fresh: boolean
  /** Appends of new notifications under way: it is not removed meanwhile. */
  appending: number
  /** Its removal (emptied, unused for SETTLE_MS), under way: the next notification waits for it, and starts a new one. */
  removing?: Promise<void>
}

interface OwnEntry extends JournalEntry {
  /** Held until then (a claim's lease, or Infinity while it is being written out or marked done); 0 when free. */
  heldUntil: number
  /** The claim that holds it (its token names it); 0 when none. */
  hold: number
}

/** A notification of a journal, as a listing of its Task directory sees it. */
interface JournalItem {
  seq: number
  configFile: string
  key: string
  item: PushOutboxItem
  journal: JournalName
  /** This store's entry, when the journal is its own. */
  own?: OwnEntry
}

/** A notification as a claim lists it: a file of its own, or a journal's. */
type ListedItem = ItemName | JournalItem

let tmpCounter = 0

const STORE = "FileTaskStore"

/** The writers of this process's stores: a journal named with this process's pid and another writer is a dead one's (its pid reused). */
const liveWriters = new Set<string>()

export class FilePushStore implements PushStore {
  readonly root: string
  /** The names of the Task directories under `.push`, as far as this process knows. */
  private readonly known = new Set<string>()
  /** The Task directories that may hold notifications, as far as this process knows. */
  private readonly due = new Map<string, Due>()
  private lastFullScan = -Infinity
  /** Configs and notifications by file, each read once: no file's content changes (a put or a failed attempt writes a new name). */
  private readonly records = new BoundedCache<string, Cached>({ maxEntries: RECORD_CACHE_ENTRIES, maxBytes: heapShare(RECORD_CACHE_HEAP_FRACTION) }, (cached) => cached.bytes)
  private watcher: { close(): void } | undefined
  /** This store's name in the records of the notifications it writes, and in its mark (`.push/.boot/w-<writer>`). */
  private readonly writer = randomBytes(6).toString("base64url")
  /** Holds this store made: with `writer` (8 characters), a hold's token names it alone (a settlement goes by the held name), without random bytes drawn per claim. */
  private holdCount = 0
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
  /** Whether `.push` was there when the store opened: only then may a recovery be due. */
  private rooted = false
  /** This store's journals, by Task directory. */
  private readonly journals = new Map<string, OwnJournal>()
  /** The claims holding journal notifications, by the number their token names. */
  private readonly journalHolds = new Map<number, { dirName: string; key: string }>()
  private journalHoldCount = 0
  /** When this store's claims last ran (ms since the epoch). */
  private lastClaim = -Infinity
  /** The timer that writes the done lines of sent journal notifications no append carried. */
  private sentFlush: NodeJS.Timeout | undefined

  constructor(private readonly host: FilePushHost) {
    this.root = path.join(host.dir, ".push")
    liveWriters.add(this.writer)
  }

  /** Reads which Tasks have push directories, and watches for more; part of the store's opening. */
  async load(): Promise<void> {
    let names: string[]
    try {
      names = await this.host.fs.readdir(this.root)
    } catch (err) {
      if (isMissing(err)) return
      throw new Error(`${STORE} could not read ${this.root}: ${(err as Error).message}`, { cause: err })
    }
    this.rooted = true
    // Watched, then read again: a directory made after the first read is either reported or read.
    this.watch()
    for (const name of [...names, ...(await this.names(this.root))]) if (isTaskDir(name)) this.known.add(name)
  }

  /**
   * Part of the store's opening, after load and before its first save or
   * claim: when `.push/.boot/id` names another boot of the machine (or
   * none), writes again, synced, every notification a Task records as
   * pending whose file is missing or unreadable, but for one whose file is
   * gone and that its writer's mark (or the last recovery) says was durable
   * (it was sent); then records this boot. Errors are reported, and the next
   * opening tries again.
   */
  async recover(): Promise<void> {
    if (!this.rooted) return
    try {
      const bootDir = path.join(this.root, BOOT_DIR)
      const boot = await bootOfMachine()
      const read = Date.now()
      const recorded = parseJson<{ boot?: unknown; since?: unknown }>((await readText(this.host.fs, path.join(bootDir, BOOT_FILE))) ?? "")
      if (typeof recorded?.boot === "string" && sameBoot(recorded.boot, boot)) return
      // A recovery leaves every record before it durable (its file read back, or written again, or sent): `since`.
      const since = typeof recorded?.since === "number" ? recorded.since : -Infinity
      const marks = new Map<string, number>()
      const markNames = (await this.names(bootDir)).filter((name) => name.startsWith(MARK))
      for (const name of markNames) {
        const at = Number(await readText(this.host.fs, path.join(bootDir, name)))
        if (Number.isFinite(at)) marks.set(name.slice(MARK.length), at)
      }
      const durable = (record: PendingPush) => record.at < since || record.at < (marks.get(record.by) ?? -Infinity)
      let failed = false
      await mapLimited([...this.known], READERS, (dirName) =>
        this.recreateIn(dirName, durable).catch((err: unknown) => {
          failed = true
          this.host.report(err, "push")
        }),
      )
      if (failed) return
      await this.recordBoot(boot, read)
      // The new `since` covers what they did.
      for (const name of markNames) await this.remove(path.join(bootDir, name))
    } catch (err) {
      this.host.report(err, "push")
    }
  }

  /** Writes again, synced, the notifications this directory's Task records whose files a crash of the machine lost or left unreadable (see recover). */
  private async recreateIn(dirName: string, durable: (record: PendingPush) => boolean): Promise<void> {
    const dir = path.join(this.root, dirName)
    const names = await this.names(dir)
    const configs = currentConfigs(names)
    if (configs.size === 0) return
    const taskId = idFromFileName(dirName) ?? (await this.taskIdIn(dir, names))
    if (taskId === undefined || taskFileName(taskId) !== dirName) return
    let task: A2ATask | undefined
    try {
      const text = await this.host.storedText(taskId)
      task = text === undefined ? undefined : parseStoredTask(text, STORE, `task file of ${JSON.stringify(taskId.slice(0, 128))}`)
    } catch (err) {
      // A file that could not be read is tried again by the next opening; one that is not a Task never will be.
      if ((err as { cause?: { code?: unknown } }).cause?.code !== undefined) throw err
      this.host.report(err, "push", taskId)
      return
    }
    if (task === undefined) return
    const records = pushPendingOf(task)
    if (records.length === 0) return
    const items = names.flatMap(itemName)
    const dead = new Set(names.flatMap(deadLetterKey))
    // In a journal, whole, or marked done there (sent, given up on, written out as a file of its own).
    const journaled = new Set<string>()
    for (const journal of names.flatMap(journalName)) {
      const { open, done } = readJournal((await readText(this.host.fs, path.join(dir, journal.name))) ?? "")
      for (const key of [...open.keys(), ...done]) journaled.add(key)
    }
    let snapshot: A2ATask | undefined
    let wrote = false
    for (const record of records) {
      const configFile = configFileName(record.configId)
      // Its config deleted (its notifications go with it), or given up on (a dead letter is synced): nothing to send.
      if (!configs.has(configFile) || dead.has(record.key) || journaled.has(record.key)) continue
      const copies = items.filter((item) => item.seq === record.seq && item.pid === record.pid && item.configFile === configFile)
      // Written anew after a failed attempt (synced), or gone after it was durable (sent).
      if (copies.some((copy) => copy.attempts > 0) || (copies.length === 0 && durable(record))) continue
      let whole = false
      for (const copy of copies) {
        const file = path.join(dir, copy.name)
        if ((await this.readJson<PushOutboxItem>(file)) !== undefined) whole = true
        else await this.remove(file)
      }
      if (whole) continue
      const event = { ...record.event, task: record.event.task ?? (snapshot ??= withoutPushPending(task)) }
      const item = newOutboxItem(taskId, record.configId, record.seq, event, record.at, record.key)
      const name = itemFileName(record.seq, record.pid, 0, configFile)
      const itemText = JSON.stringify(item)
      await this.writeReplacing(dir, name, itemText)
      this.remember(path.join(dir, name), item, itemText)
      wrote = true
    }
    if (wrote) {
      await this.syncDir(dir)
      this.markDue(dirName)
    }
  }

  /** Records the boot of the machine the store runs under, and that every record before `since` is durable without it. */
  private async recordBoot(boot: string, since: number): Promise<void> {
    const dir = path.join(this.root, BOOT_DIR)
    const made = await this.host.fs.mkdir(dir, { recursive: true })
    await this.writeReplacing(dir, BOOT_FILE, JSON.stringify({ boot, since }))
    await this.syncDir(dir)
    if (made !== undefined) await this.syncDir(this.root)
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

  private async settleOnce(): Promise<void> {
    clearTimeout(this.settleTimer)
    this.settleTimer = undefined
    const all = this.settleAll
    this.settleAll = false
    if (this.lastWritten === undefined || (this.lastWritten < this.settledBefore && this.unsettled.size === 0 && this.journals.size === 0)) return
    let upTo = all ? Date.now() : Date.now() - SETTLE_MS
    for (const { now } of this.preparing) upTo = Math.min(upTo, now)
    const files = [...this.unsettled].filter(([, entry]) => entry.at < upTo)
    for (const [file] of files) this.unsettled.delete(file)
    const left: Array<[string, Unsettled]> = []
    try {
      const dirs = new Set<string>()
      await mapLimited(files, READERS, async ([file, entry]) => {
        const synced = await this.syncItem(path.join(this.root, entry.dirName), entry.name, path.basename(file))
        if (synced === "synced") dirs.add(entry.dirName)
        else if (synced === "moving") left.push([file, entry])
      })
      await mapLimited([...dirs], READERS, (dirName) => this.syncDir(path.join(this.root, dirName)))
      await this.settleJournals(upTo)
      for (const [, entry] of left) upTo = Math.min(upTo, entry.at)
      const bootDir = path.join(this.root, BOOT_DIR)
      await this.writeReplacing(bootDir, MARK + this.writer, String(upTo))
      await this.syncDir(bootDir)
      this.settledBefore = upTo
    } catch (err) {
      left.push(...files)
      // A Task deleted meanwhile, or the store's directory: tried again, and gone then.
      if (!isMissing(err)) this.host.report(err, "push")
    }
    for (const [file, entry] of left) if (!this.unsettled.has(file)) this.unsettled.set(file, entry)
    if (all) {
      // Nothing is left to write after close: the done lines waiting for an append are written now.
      clearTimeout(this.sentFlush)
      await this.flushSent()
    }
    await this.compactJournals(all ? Infinity : upTo)
    if (this.unsettled.size > 0 || this.lastWritten >= upTo || this.journals.size > 0) this.scheduleSettle()
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
      if (await syncFile(this.host.fs, path.join(dir, name))) return "synced"
      const found = (await this.names(dir)).flatMap(itemName).find((item) => item.base === base)
      if (found === undefined) return "gone"
      name = found.name
    }
    return "moving"
  }

  /** Stops the watch of `.push`, and the timer of settle (close() settles). */
  stop(): void {
    clearTimeout(this.settleTimer)
    this.settleTimer = undefined
    const watcher = this.watcher
    this.watcher = undefined
    try {
      watcher?.close()
    } catch {
      // A watch that cannot be closed is gone all the same.
    }
  }

  private watch(): void {
    if (this.watcher !== undefined || this.host.fs.watchDirectory === undefined) return
    try {
      this.watcher = this.host.fs.watchDirectory(
        this.root,
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

  private taskDir(taskId: string): string {
    return path.join(this.root, taskFileName(taskId))
  }

  async putConfig(config: PushConfigRecord): Promise<void> {
    assertPushConfig(config, STORE)
    const text = JSON.stringify(config)
    await this.host.inOrder(config.taskId, async () => {
      await this.host.open()
      const dir = this.taskDir(config.taskId)
      const created = await this.host.fs.mkdir(dir, { recursive: true })
      // A new directory (and .push itself) is durable once its parent is synced.
      if (created !== undefined) {
        if (typeof created === "string" && path.resolve(created) === this.root) {
          await this.syncDir(this.host.dir)
          // A new `.push` holds no notification: nothing before now needs recovering.
          await this.recordBoot(await bootOfMachine(), Date.now())
        }
        await this.syncDir(this.root)
      }
      this.known.add(path.basename(dir))
      this.watch()
      const configFile = configFileName(config.id)
      const before = (await this.names(dir)).flatMap(configName).filter((old) => old.configFile === configFile)
      const version = Math.max(Date.now() * 1000, ...before.map((old) => old.version + 1))
      const name = `${CONFIG}${padded(version)}-${randomBytes(6).toString("base64url")}-${configFile}`
      // The new version first: a crash between leaves both, and the newest counts.
      await this.writeReplacing(dir, name, text)
      this.remember(path.join(dir, name), config, text)
      for (const old of before) if (old.name !== name) await this.remove(path.join(dir, old.name))
      await this.syncDir(dir)
    })
  }

  async getConfig(taskId: string, id: string): Promise<PushConfigRecord | undefined> {
    assertTaskId(taskId)
    await this.host.open()
    const dir = this.taskDir(taskId)
    const name = currentConfigs(await this.names(dir)).get(configFileName(String(id)))
    const config = name === undefined ? undefined : await this.readJson<PushConfigRecord>(path.join(dir, name))
    return config?.id === id && config.taskId === taskId ? config : undefined
  }

  async listConfigs(taskId: string): Promise<PushConfigRecord[]> {
    assertTaskId(taskId)
    await this.host.open()
    const dir = this.taskDir(taskId)
    const configs: PushConfigRecord[] = []
    for (const name of currentConfigs(await this.names(dir)).values()) {
      const config = await this.readJson<PushConfigRecord>(path.join(dir, name))
      if (config?.taskId === taskId) configs.push(config)
    }
    return configs.sort(byId)
  }

  async deleteConfig(taskId: string, id: string): Promise<void> {
    assertTaskId(taskId)
    const configFile = configFileName(String(id))
    await this.host.inOrder(taskId, async () => {
      await this.host.open()
      const dir = this.taskDir(taskId)
      const names = await this.names(dir)
      // The config first: a crash midway leaves notifications of no config, which are never sent.
      for (const config of names.flatMap(configName)) if (config.configFile === configFile) await this.remove(path.join(dir, config.name))
      for (const item of names.flatMap(itemName)) if (item.configFile === configFile) await this.remove(path.join(dir, item.name))
      await this.dropJournaled(path.basename(dir), configFile)
    })
  }

  /** Marks done the notifications this store's journal of the directory holds for a config that is gone. */
  private async dropJournaled(dirName: string, configFile: string): Promise<void> {
    const own = this.journals.get(dirName)
    if (own !== undefined) await this.finish(own, [...own.entries.values()].flatMap((entry) => (entry.configFile === configFile ? [entry.item.key] : [])))
  }

  saveWithEvent(task: A2ATask, ...events: PushEvent[]): Promise<number> {
    return this.host.saveWithEvent(task, events)
  }

  /**
   * For a save of Task `taskId` whose text is `text` (called in its write
   * order, the store open): undefined when the Task has no push directory
   * (the save goes on as it would without push); else the Task to save, with
   * the pushSeq of its last event and the record of its pending
   * notifications, the events' notifications written (unsynced, see the
   * header), one seq each in order (none without configs or events), and the
   * notifications of saves that never landed removed.
   */
  async prepare(taskId: string, events: readonly SavedEvent[], text: string, now: number): Promise<PushPlan | undefined> {
    const dirName = taskFileName(taskId)
    if (!this.known.has(dirName)) return undefined
    // From the first await on: a mark taken meanwhile does not pass `now`, this save's notifications' `at`.
    const writing = { now }
    this.preparing.add(writing)
    try {
      return await this.prepareIn(dirName, taskId, events, text, now)
    } finally {
      this.preparing.delete(writing)
    }
  }

  private async prepareIn(dirName: string, taskId: string, events: readonly SavedEvent[], text: string, now: number): Promise<PushPlan | undefined> {
    const dir = path.join(this.root, dirName)
    let names: string[]
    try {
      names = await this.host.fs.readdir(dir)
    } catch (err) {
      if (!isMissing(err)) throw err
      this.known.delete(dirName)
      return undefined
    }
    const storedText = await this.host.storedText(taskId)
    const stored = storedText === undefined ? undefined : parseStoredTask(storedText, STORE, `task file of ${JSON.stringify(taskId.slice(0, 128))}`)
    const storedSeq = pushSeqOf(stored)
    const items = names.flatMap(itemName)
    const journaled = await this.journalItems(dirName, dir, names)
    // In this write order no other save of ours is under way: above the stored seq, ours are from saves that failed.
    const orphans = items.filter((item) => item.seq > storedSeq && (item.pid === process.pid || !isProcessAlive(item.pid)))
    for (const orphan of orphans) await this.remove(path.join(dir, orphan.name))
    const own = this.journals.get(dirName)
    if (own !== undefined) await this.finish(own, journaled.flatMap((item) => (item.own !== undefined && item.seq > storedSeq ? [item.key] : [])))
    const task = withoutPushPending(JSON.parse(text) as A2ATask)
    const earlier = await this.stillPending(dir, items, journaled, stored, storedText?.length ?? 0)
    const configs = events.length === 0 ? [] : await this.configsIn(dir, names)
    if (configs.length === 0) return { task: withPushRecord(task, storedSeq, earlier), written: 0, undo: async () => {}, landed: () => {} }
    const first = Math.max(storedSeq, ...items.map((item) => item.seq), ...journaled.map((item) => item.seq)) + 1
    const journal = await this.journalFor(dirName, now)
    const written: string[] = []
    const entries: OwnEntry[] = []
    const undo = async () => {
      for (const file of written) {
        this.unsettled.delete(file)
        await this.remove(file).catch(() => {})
      }
      if (journal !== undefined) await this.finish(journal, entries.map((entry) => entry.item.key)).catch(() => {})
    }
    const pending = [...earlier]
    try {
      for (const [i, event] of events.entries()) {
        const { text: eventText, ...kind } = event
        const reported: PushEvent = eventText === undefined ? { ...kind, task } : reportedEvent(eventText)
        for (const config of configs) {
          const item = newOutboxItem(taskId, config.id, first + i, reported, now)
          const configFile = configFileName(config.id)
          if (journal !== undefined) entries.push({ item, configFile, heldUntil: 0, hold: 0 })
          else {
            const name = itemFileName(item.seq, process.pid, 0, configFile)
            const file = path.join(dir, name)
            const itemText = JSON.stringify(item)
            await this.writeUnsynced(file, itemText)
            written.push(file)
            this.remember(file, item, itemText)
            this.unsettled.set(file, { dirName, name, at: now })
          }
          // The Task saved is left out of the record: it is the record's own.
          pending.push({ pid: process.pid, by: this.writer, key: item.key, configId: config.id, seq: item.seq, at: now, event: eventText === undefined ? kind : reported })
        }
      }
      if (journal !== undefined) {
        // One append for the save's notifications; a claim finds them once it is done (and their save landed).
        await this.append(journal, entries.map(entryLine).join(""))
        for (const entry of entries) journal.entries.set(entry.item.key, entry)
      }
    } catch (err) {
      entries.length = 0
      await undo()
      throw err
    } finally {
      if (journal !== undefined) journal.appending--
    }
    this.lastWritten = now
    this.scheduleSettle()
    const seq = first + events.length - 1
    return { task: withPushRecord(task, seq, pending), written: written.length + entries.length, undo, landed: () => this.markDue(dirName, seq) }
  }

  /**
   * What a save carries of the stored Task's record: the notifications whose
   * files are still there unsynced (not written anew after a failed attempt,
   * not made durable by this store since), each with the Task it reports.
   * Past MAX_CARRIED of them, or when the stored Task's file is past
   * MAX_CARRIED_BYTES, their files are made durable here instead, and only
   * those that kept moving are carried.
   */
  private async stillPending(dir: string, items: readonly ItemName[], journaled: readonly JournalItem[], stored: A2ATask | undefined, storedBytes: number): Promise<PendingPush[]> {
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
      for (const [name, records] of journals) if (!(await syncFile(this.host.fs, path.join(dir, name)))) moving.push(...records)
      await this.syncDir(dir)
      carried = moving
    }
    let snapshot: A2ATask | undefined
    return carried.map((record) => (record.event.task !== undefined ? record : { ...record, event: { ...record.event, task: (snapshot ??= withoutPushPending(stored!)) } }))
  }

  /** Removes a deleted Task's push directory (configs, notifications, dead letters). */
  async removeTask(taskId: string): Promise<void> {
    const dirName = taskFileName(taskId)
    this.known.delete(dirName)
    this.due.delete(dirName)
    this.journals.delete(dirName)
    for (const [hold, place] of this.journalHolds) if (place.dirName === dirName) this.journalHolds.delete(hold)
    await this.host.fs.rm(path.join(this.root, dirName), { force: true, recursive: true })
  }

  async claim(instance: string, limit: number, leaseMs: number, now: number): Promise<PushClaim[]> {
    assertClaimArgs(STORE, instance, limit, leaseMs, now)
    await this.host.open()
    this.lastClaim = Date.now()
    const full = now - this.lastFullScan >= FULL_SCAN_MS || now < this.lastFullScan
    if (full) this.lastFullScan = now
    const dirs = full ? await this.taskDirs() : [...this.due].flatMap(([dirName, due]) => (due.at <= now ? [dirName] : []))
    const claims: PushClaim[] = []
    const look = async (dirName: string): Promise<void> => {
      const marks = this.due.get(dirName)?.marks ?? 0
      try {
        const found = await this.claimIn(dirName, limit, leaseMs, now, () => claims.length < limit)
        // Marked due meanwhile (a save landed, a claim settled): what this look saw is out of date.
        if ((this.due.get(dirName)?.marks ?? 0) === marks) {
          if (found.nextLook === undefined) this.due.delete(dirName)
          else this.due.set(dirName, { at: found.nextLook, marks, landed: Math.max(found.landed, this.due.get(dirName)?.landed ?? 0), waiting: found.waiting })
        }
        for (const claim of found.claims) {
          if (claims.length < limit) claims.push(claim)
          else await this.release(claim)
        }
      } catch (err) {
        this.markDue(dirName)
        this.host.report(err, "push")
      }
    }
    // A due directory's look under way may take a claim: none starts past the room left (it would read a directory to
    // hand out nothing, and leave it due again); looks that took none leave room for the next ones. A full scan's
    // directories mostly hold nothing: read side by side.
    const reserved = full ? 0 : 1
    let next = 0
    let looking = 0
    const reader = async (): Promise<void> => {
      while (next < dirs.length && claims.length + reserved * looking < limit) {
        looking++
        try {
          await look(dirs[next++])
        } finally {
          looking--
        }
      }
    }
    while (next < dirs.length && claims.length < limit) await Promise.all(Array.from({ length: full ? READERS : Math.min(READERS, limit - claims.length) }, reader))
    // Not looked at this time: the next claim does, not the next full scan.
    if (full) for (const dirName of dirs.slice(next)) this.markDue(dirName)
    return claims.sort((a, b) => a.item.seq - b.item.seq)
  }

  /**
   * A claim of the directory was settled: it is due again when the channel
   * had more when claimed, or a look since found one waiting behind a held
   * notification. Either way a look under way when it settled is out of date.
   */
  private settled(dirName: string, more: boolean): void {
    const due = this.due.get(dirName)
    if (more || due?.waiting) this.markDue(dirName)
    else if (due !== undefined) due.marks++
  }

  /** The Task directory may hold a notification due now: the next claim reads it. `landed`: its Task was saved with this pushSeq. */
  private markDue(dirName: string, landed = 0): void {
    const due = this.due.get(dirName)
    this.due.set(dirName, { at: 0, marks: (due?.marks ?? 0) + 1, landed: Math.max(landed, due?.landed ?? 0) })
  }

  /**
   * The heads of the channels of one Task's directory that are deliverable,
   * due and not held, each now held for the lease; and when the directory
   * is next worth a look (undefined: it holds no notification).
   */
  private async claimIn(
    dirName: string,
    limit: number,
    leaseMs: number,
    now: number,
    room: () => boolean,
  ): Promise<{ claims: PushClaim[]; nextLook?: number; landed: number; waiting?: boolean }> {
    const dir = path.join(this.root, dirName)
    let names = await this.names(dir)
    let journaled = await this.journalItems(dirName, dir, names)
    let landed = this.due.get(dirName)?.landed ?? 0
    const others = names.flatMap(journalName).filter((journal) => !this.isOwn(journal))
    if (journaled.length === 0 && others.length === 0 && !names.some((name) => name.startsWith(ITEM))) return { claims: [], landed }
    const taskId = idFromFileName(dirName) ?? (await this.taskIdIn(dir, names))
    if (taskId === undefined || taskFileName(taskId) !== dirName) return { claims: [], landed }
    // The journals of stores that are gone are taken over first: their notifications are files of their own then.
    const gone = await this.goneJournals(dir, others)
    if (gone.length > 0) {
      for (const journal of gone) await this.takeOver(dir, taskId, journal)
      names = await this.names(dir)
      journaled = await this.journalItems(dirName, dir, names)
    }
    // A notification written anew (a failed attempt) whose old name a crash left: the newer one counts.
    const items: ListedItem[] = [...names.flatMap(itemName), ...journaled].sort((a, b) => a.seq - b.seq || attemptsOf(b) - attemptsOf(a))
    if (items.length === 0) return { claims: [], landed }
    // The Task is read only for a notification above what this process saw saved.
    if (items.some((item) => item.seq > landed)) landed = Math.max(landed, pushSeqOf(await this.host.stored(taskId)))
    const heads = new Map<string, ListedItem>()
    for (const item of items) if (!heads.has(item.configFile)) heads.set(item.configFile, item)
    const configNames = currentConfigs(names)
    const claims: PushClaim[] = []
    let nextLook = Infinity
    let waiting = false
    const lookAt = (at: number) => (nextLook = Math.min(nextLook, at))
    const behind = (head: ListedItem) => items.some((other) => other !== head && other.configFile === head.configFile)
    const dropChannel = async (configFile: string) => {
      for (const orphan of items) if (orphan.configFile === configFile && !isJournaled(orphan)) await this.remove(path.join(dir, orphan.name))
      await this.dropJournaled(dirName, configFile)
    }
    for (const head of heads.values()) {
      if (!room() || claims.length >= limit) {
        lookAt(now)
        break
      }
      if (isJournaled(head)) {
        const { own } = head
        if (own === undefined) {
          // Another store's, to send while it lives. With a notification behind it, a look now and then sees when the
          // channel moves on; else the next full scan does.
          if (behind(head)) {
            waiting = true
            lookAt(now + UNLANDED_RECHECK_MS)
          }
          continue
        }
        if (head.seq > landed) {
          // Its save is under way: landing marks the directory; one that fails takes it back.
          lookAt(now + ABANDONED_PUSH_ITEM_MS)
          continue
        }
        if (own.heldUntil > now) {
          waiting ||= behind(head)
          lookAt(own.heldUntil)
          continue
        }
        if (leaseEnded(own, now)) {
          // Its claim's lease ran out unsettled (the instance that held it stopped): out of the journal, any store's
          // claims take it over, as they take over a file whose hold ran out.
          await this.writeOutEntries(this.journals.get(dirName)!, [own])
          lookAt(now)
          continue
        }
        const config = await this.currentConfig(dir, configNames, head.configFile)
        if (config === undefined) {
          await dropChannel(head.configFile)
          continue
        }
        own.heldUntil = now + leaseMs
        own.hold = ++this.journalHoldCount
        this.journalHolds.set(own.hold, { dirName, key: head.key })
        lookAt(now + leaseMs)
        claims.push({ item: own.item, config, token: `${dirName}/${JOURNAL_HOLD}${own.hold}/${behind(head) ? 1 : 0}` })
        continue
      }
      if (head.seq > landed) {
        // Its save has not landed: under way (this process's marks the directory when it lands), or never to land
        // (its writer died, or it is older than any save takes).
        const file = path.join(dir, head.name)
        if (!isProcessAlive(head.pid) || now - (await this.mtime(file)) > ABANDONED_PUSH_ITEM_MS) {
          await this.remove(file)
          lookAt(now)
        } else lookAt(head.pid === process.pid ? now + ABANDONED_PUSH_ITEM_MS : now + UNLANDED_RECHECK_MS)
        continue
      }
      if (head.until > now) {
        waiting ||= behind(head)
        lookAt(head.until)
        continue
      }
      if (!configNames.has(head.configFile) && !(await this.configName(dir, head.configFile))) {
        // Its config was deleted (a delete removes the config first, then its notifications): they go with it.
        await dropChannel(head.configFile)
        continue
      }
      const held = `${head.base}~${timeInName(now + leaseMs)}~${this.writer}${(++this.holdCount % HOLD_COUNT_WRAP).toString(36)}`
      if (!(await this.renamed(dir, head.name, held))) {
        lookAt(now) // another process claimed or settled it since the listing
        continue
      }
      this.moved(dir, head.base, held)
      // An older copy of this very notification (its retry's rewrite was cut short). Not one of the same seq by another
      // process: two processes saving the Task at once each wrote their own, and both are sent.
      for (const older of items) {
        if (isJournaled(older)) continue
        if (older.configFile === head.configFile && older.seq === head.seq && older.pid === head.pid && older.attempts < head.attempts) {
          await this.remove(path.join(dir, older.name))
        }
      }
      const item = await this.record<PushOutboxItem>(path.join(dir, head.base), path.join(dir, held))
      const config = await this.currentConfig(dir, configNames, head.configFile)
      // Whether the channel had more: then settling this one makes the directory due again.
      const more = behind(head)
      if (item === undefined || config === undefined) {
        // Removed since the rename (its config's delete), or its config deleted since the listing (it goes with it), or
        // a file a crash of the machine left unreadable (reported, and removed: it would hold its channel for ever).
        if (item === undefined && (await this.mtime(path.join(dir, held))) > 0) {
          this.host.report(new Error(`${STORE} removed an unreadable push notification file ${path.join(dir, held)}`), "push")
        }
        await this.remove(path.join(dir, held))
        lookAt(now)
      } else if (item.notBefore > now) {
        // Due later (its wait was lost): held until then.
        const waits = `${head.base}~${timeInName(item.notBefore)}~${WAITING}`
        if (await this.renamed(dir, held, waits)) this.moved(dir, head.base, waits)
        lookAt(item.notBefore)
      } else {
        // Settling it marks the directory; a lease that runs out unsettled ends then.
        lookAt(now + leaseMs)
        claims.push({ item, config, token: `${dirName}/${held}/${more ? 1 : 0}` })
      }
    }
    return { claims, nextLook, landed, waiting }
  }

  /** A config as a listing named it; replaced since (a put writes the next version, then removes the one before): the current one. */
  private async currentConfig(dir: string, configNames: Map<string, string>, configFile: string): Promise<PushConfigRecord | undefined> {
    const listed = configNames.get(configFile)
    const config = listed === undefined ? undefined : await this.record<PushConfigRecord>(path.join(dir, listed))
    if (config !== undefined) return config
    const current = await this.configName(dir, configFile)
    return current === undefined ? undefined : await this.record<PushConfigRecord>(path.join(dir, current))
  }

  async ack(claim: PushClaim): Promise<void> {
    const journaled = this.journalClaim(claim)
    if (journaled !== undefined) {
      if (journaled.entry !== undefined) this.markSent(journaled.journal!, journaled.entry)
      this.settled(journaled.dirName, journaled.more)
      return
    }
    const { dir, held, more } = this.placeOf(claim)
    // Held by another claim since this one's lease ran out, it is left to that claim: sent again, at least once.
    await this.remove(path.join(dir, held.name))
    this.records.delete(path.join(dir, held.base))
    this.unsettled.delete(path.join(dir, held.base))
    this.settled(path.basename(dir), more)
  }

  async retryLater(claim: PushClaim, notBefore: number, error: string): Promise<void> {
    const next = retried(claim.item, notBefore, String(error))
    const text = JSON.stringify(next)
    const journaled = this.journalClaim(claim)
    if (journaled !== undefined) {
      const { entry, journal, dirName } = journaled
      if (entry === undefined) return
      // A crash before its done line leaves both: a take-over's copy has fewer attempts.
      const base = itemFileName(entry.item.seq, process.pid, 1, entry.configFile)
      await this.moveOutOfJournal(dirName, journal!, entry, `${base}~${timeInName(notBefore)}~${WAITING}`, text)
      this.remember(path.join(this.root, dirName, base), next, text)
      return
    }
    const { dir, held } = this.placeOf(claim)
    if (!(await this.holds(claim))) return
    const base = itemFileName(held.seq, held.pid, held.attempts + 1, held.configFile)
    // The new name first, durably (the old file may not be: see the header): a crash between leaves both, and a claim
    // takes the one with more attempts.
    await this.writeReplacing(dir, `${base}~${timeInName(notBefore)}~${WAITING}`, text)
    await this.syncDir(dir)
    this.remember(path.join(dir, base), next, text)
    await this.remove(path.join(dir, held.name))
    this.records.delete(path.join(dir, held.base))
    this.unsettled.delete(path.join(dir, held.base))
    this.markDue(path.basename(dir))
  }

  async deadLetter(claim: PushClaim, reason: string, attempts?: number): Promise<void> {
    const dead = deadLetterOf(claim.item, String(reason), Date.now(), attempts)
    const journaled = this.journalClaim(claim)
    if (journaled !== undefined) {
      const { entry, journal, dirName } = journaled
      if (entry !== undefined) await this.moveOutOfJournal(dirName, journal!, entry, `${DEAD}${padded(dead.deadAt)}-${dead.key}.json`, JSON.stringify(dead))
      return
    }
    const { dir, held } = this.placeOf(claim)
    if (!(await this.holds(claim))) return
    await this.writeReplacing(dir, `${DEAD}${padded(dead.deadAt)}-${dead.key}.json`, JSON.stringify(dead))
    await this.syncDir(dir)
    await this.remove(path.join(dir, held.name))
    this.records.delete(path.join(dir, held.base))
    this.unsettled.delete(path.join(dir, held.base))
    this.markDue(path.basename(dir))
  }

  async listDeadLetters(limit: number): Promise<PushDeadLetter[]> {
    if (!(Number.isInteger(limit) && limit >= 0)) throw new RangeError(`${STORE}.push.listDeadLetters: limit should be a whole number >= 0`)
    await this.host.open()
    const found: Array<{ dir: string; name: string }> = []
    await mapLimited(await this.taskDirs(), READERS, async (dirName) => {
      const dir = path.join(this.root, dirName)
      for (const name of await this.names(dir)) if (name.startsWith(DEAD) && name.endsWith(".json")) found.push({ dir, name })
    })
    found.sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0))
    const letters: PushDeadLetter[] = []
    for (const { dir, name } of found) {
      if (letters.length >= limit) break
      const letter = await this.readJson<PushDeadLetter>(path.join(dir, name))
      if (letter !== undefined) letters.push(letter)
    }
    return letters
  }

  /**
   * When the oldest notification still in the outbox was enqueued, as far
   * as this store knows, without a full scan: it reads the Task directories
   * marked due (the ones claims read: this process's saves and settlements,
   * and what claims and their full scans found), at most OLDEST_DIRS of them,
   * those in the due set longest first, and in each the head of every
   * channel whose save landed, held or not (a channel's notifications are
   * enqueued in seq order). Its limits: another process's notifications
   * count only once a full scan of this store's claims found them (within
   * FULL_SCAN_MS while it sends, none before its first claim after it
   * opened); past OLDEST_DIRS due directories the rest are not read, so
   * right after a burst the answer can be later (the age lower) than the
   * oldest notification's; a directory that cannot be read is reported and
   * passed over. Records are read through the cache: a directory's listing
   * each, and a file only for a notification this store neither wrote nor
   * read.
   */
  async oldestPendingAt(): Promise<number | undefined> {
    await this.host.open()
    const dirs: string[] = []
    for (const dirName of this.due.keys()) {
      if (dirs.length >= OLDEST_DIRS) break
      dirs.push(dirName)
    }
    let oldest: number | undefined
    await mapLimited(dirs, READERS, async (dirName) => {
      // As a claim does: one directory that cannot be read is reported, and does not take the other metrics' scrape with it.
      const at = await this.oldestIn(dirName).catch((err: unknown) => void this.host.report(err, "push"))
      if (at !== undefined && (oldest === undefined || at < oldest)) oldest = at
    })
    return oldest
  }

  /** The enqueue time of the oldest notification of the directory a claim would hand out or that waits under a hold (the head of a channel whose save landed and whose config is there); undefined when none is. */
  private async oldestIn(dirName: string): Promise<number | undefined> {
    const dir = path.join(this.root, dirName)
    for (let listing = 1; ; listing++) {
      const names = await this.names(dir)
      // A notification written anew (a failed attempt) whose old name a crash left: the newer one counts, as in a claim.
      const items = names.flatMap(itemName).sort((a, b) => a.seq - b.seq || b.attempts - a.attempts)
      const configs = currentConfigs(names)
      // A journal's notifications are all at hand: the oldest of them is its channels' heads'.
      const journaled = (await this.journalItems(dirName, dir, names)).filter((item) => configs.has(item.configFile))
      if (items.length === 0 && journaled.length === 0) return undefined
      const heads = new Map<string, ItemName>()
      for (const item of items) if (configs.has(item.configFile) && !heads.has(item.configFile)) heads.set(item.configFile, item)
      let landed = this.due.get(dirName)?.landed ?? 0
      if ([...heads.values(), ...journaled].some((head) => head.seq > landed)) {
        const taskId = idFromFileName(dirName) ?? (await this.taskIdIn(dir, names))
        if (taskId === undefined || taskFileName(taskId) !== dirName) return undefined
        landed = Math.max(landed, pushSeqOf(await this.host.stored(taskId)))
        // Seen saved: the next scrape (and claim) need not read the Task for these.
        const due = this.due.get(dirName)
        if (due !== undefined) due.landed = Math.max(due.landed, landed)
      }
      let oldest: number | undefined
      for (const { seq, item } of journaled) if (seq <= landed && (oldest === undefined || item.enqueuedAt < oldest)) oldest = item.enqueuedAt
      let moved = false
      for (const head of heads.values()) {
        if (head.seq > landed) continue
        const item = await this.record<PushOutboxItem>(path.join(dir, head.base), path.join(dir, head.name))
        // Renamed since the listing (held, released, settled): the directory is listed once more.
        if (item === undefined) moved = true
        else if (oldest === undefined || item.enqueuedAt < oldest) oldest = item.enqueuedAt
      }
      if (!moved || listing >= 2) return oldest
    }
  }

  /** The current file name of a config, read afresh (a listing taken while a put replaced it may show no version of it). */
  private async configName(dir: string, configFile: string): Promise<string | undefined> {
    return currentConfigs(await this.names(dir)).get(configFile)
  }

  /** Where a claim's notification is: its token names it. */
  private placeOf(claim: PushClaim): { dir: string; held: ItemName; more: boolean } {
    const [dirName, heldName, more, ...rest] = String(claim?.token).split("/")
    const held = heldName === undefined ? undefined : itemName(heldName)[0]
    if (rest.length > 0 || held === undefined || held.until === 0 || (more !== "0" && more !== "1") || dirName !== taskFileName(claim.item.taskId)) {
      throw new TypeError(`${STORE}.push: the claim's token is not one this store gave`)
    }
    return { dir: path.join(this.root, dirName), held, more: more === "1" }
  }

  /** Whether the claim still holds its notification (no claim after its lease took it over). */
  private async holds(claim: PushClaim): Promise<boolean> {
    const { dir, held } = this.placeOf(claim)
    try {
      await this.host.fs.stat(path.join(dir, held.name))
      return true
    } catch (err) {
      if (isMissing(err)) return false
      throw err
    }
  }

  /** Ends the claim's hold (unless another claim took it over since); the channel's next claim may be due. */
  private async release(claim: PushClaim): Promise<void> {
    const journaled = this.journalClaim(claim)
    if (journaled !== undefined) {
      if (journaled.entry !== undefined) {
        journaled.entry.heldUntil = 0
        journaled.entry.hold = 0
      }
      this.journalHolds.delete(journaled.hold)
      this.markDue(journaled.dirName)
      return
    }
    const { dir, held } = this.placeOf(claim)
    if (await this.renamed(dir, held.name, held.base)) this.moved(dir, held.base, held.base)
    this.markDue(path.basename(dir))
  }

  /**
   * The store's journal of the Task directory, for a save's new
   * notifications, reserved (its `appending` counted: the caller ends it):
   * undefined when they get files of their own (this store does not send,
   * the file system layer cannot append, or the journal is full).
   */
  private async journalFor(dirName: string, now: number): Promise<OwnJournal | undefined> {
    if (this.host.fs.appendFile === undefined || now - this.lastClaim > SENDING_MS) return undefined
    let journal = this.journals.get(dirName)
    while (journal?.removing !== undefined) {
      await journal.removing.catch(() => {})
      journal = this.journals.get(dirName)
    }
    if (journal === undefined) {
      journal = { dirName, entries: new Map(), sent: [], bytes: 0, lastAppend: 0, unsynced: false, fresh: true, appending: 0 }
      this.journals.set(dirName, journal)
    }
    if (journal.bytes >= MAX_JOURNAL_BYTES) return undefined
    journal.appending++
    return journal
  }

  private journalFile(journal: OwnJournal): string {
    return path.join(this.root, journal.dirName, journalFileName(process.pid, this.writer))
  }

  /** Appends `data` to the journal, after the done lines of the notifications sent since its last append. */
  private async append(journal: OwnJournal, data: string): Promise<void> {
    const sent = journal.sent
    journal.sent = []
    const text = sent.map(doneLine).join("") + data
    try {
      await this.host.fs.appendFile!(this.journalFile(journal), text, "utf8")
    } catch (err) {
      journal.sent = [...sent, ...journal.sent]
      throw err
    }
    journal.bytes += Buffer.byteLength(text)
    journal.lastAppend = Date.now()
    journal.unsynced = true
  }

  /**
   * A journal notification was sent: forgotten at once, its done line left
   * to the journal's next append (within SENT_FLUSH_MS). Until it is
   * written, other stores see the notification pending (their claims wait
   * behind it), and a take-over after this process died sends it again,
   * under its key.
   */
  private markSent(journal: OwnJournal, entry: OwnEntry): void {
    this.forget(journal, [entry])
    journal.sent.push(entry.item.key)
    this.sentFlush ??= setTimeout(() => void this.flushSent(), SENT_FLUSH_MS).unref()
  }

  private async flushSent(): Promise<void> {
    this.sentFlush = undefined
    for (const journal of this.journals.values()) {
      if (journal.sent.length === 0 || journal.removing !== undefined) continue
      journal.appending++
      try {
        await this.append(journal, "")
      } catch (err) {
        // Its Task deleted: nothing to mark. Else the next append tries again.
        if (isMissing(err)) journal.sent = []
        else this.host.report(err, "push")
      } finally {
        journal.appending--
      }
    }
  }

  /** Marks the journal's notifications of `keys` done (one append), then forgets them; no claim takes them meanwhile. */
  private async finish(journal: OwnJournal, keys: readonly string[]): Promise<void> {
    const entries = keys.flatMap((key) => journal.entries.get(key) ?? [])
    if (entries.length === 0) return
    await heldWhile(entries, () =>
      this.append(journal, entries.map((entry) => doneLine(entry.item.key)).join("")).catch((err: unknown) => {
        // Its directory gone (its Task deleted): nothing is left to mark.
        if (!isMissing(err)) throw err
      }),
    )
    this.forget(journal, entries)
  }

  private forget(journal: OwnJournal, entries: readonly OwnEntry[]): void {
    for (const entry of entries) {
      if (entry.hold !== 0) this.journalHolds.delete(entry.hold)
      journal.entries.delete(entry.item.key)
    }
  }

  /** The journal notifications of a Task directory not yet done: this store's from its memory, other stores' read from their files. */
  private async journalItems(dirName: string, dir: string, names: readonly string[]): Promise<JournalItem[]> {
    const found: JournalItem[] = []
    const own = this.journals.get(dirName)
    if (own !== undefined) {
      const journal = { name: journalFileName(process.pid, this.writer), pid: process.pid, writer: this.writer }
      for (const entry of own.entries.values()) found.push({ seq: entry.item.seq, configFile: entry.configFile, key: entry.item.key, item: entry.item, journal, own: entry })
    }
    for (const journal of names.flatMap(journalName)) {
      if (this.isOwn(journal)) continue
      const text = await readText(this.host.fs, path.join(dir, journal.name))
      if (text === undefined) continue
      for (const { item, configFile } of readJournal(text).open.values()) found.push({ seq: item.seq, configFile, key: item.key, item, journal })
    }
    return found
  }

  /**
   * Of other stores' journals, those whose stores are gone: the process
   * died, or (a pid used again) the journal lay untouched longer than any
   * save or send takes; and those whose take-over a process began and did
   * not end (it died, or it is this one: a take-over done twice writes the
   * same files).
   */
  private async goneJournals(dir: string, others: readonly JournalName[]): Promise<JournalName[]> {
    const gone: JournalName[] = []
    for (const journal of others) {
      const alive = journal.taker === undefined ? writerAlive(journal) : journal.taker !== process.pid && isProcessAlive(journal.taker)
      if (!alive || Date.now() - (await this.mtime(path.join(dir, journal.name))) > ABANDONED_PUSH_ITEM_MS) gone.push(journal)
    }
    return gone
  }

  /** Whether the journal is this store's own (not one taken over). */
  private isOwn(journal: JournalName): boolean {
    return journal.writer === this.writer && journal.pid === process.pid && journal.taker === undefined
  }

  /**
   * Takes over the journal of a store that is gone (see
   * file-push-journal.ts): its notifications whose saves landed are written
   * out as files of their own, durably, any store's to claim; then it is
   * removed. Another store that took it first has it.
   */
  private async takeOver(dir: string, taskId: string, journal: JournalName): Promise<void> {
    const taken = takenJournalName(journal, process.pid)
    if (taken !== journal.name && !(await this.renamed(dir, journal.name, taken))) return
    const text = await readText(this.host.fs, path.join(dir, taken))
    if (text !== undefined) {
      const seq = pushSeqOf(await this.host.stored(taskId))
      // Above the stored seq: its save never landed (its writer is gone), nothing to send.
      for (const { item, configFile } of readJournal(text).open.values()) {
        if (item.seq <= seq) await this.writeOut(dir, itemFileName(item.seq, journal.pid, 0, configFile), item)
      }
      await this.syncDir(dir)
    }
    await this.remove(path.join(dir, taken))
    this.markDue(path.basename(dir))
  }

  /** Writes a journal's notification as a file of its own, durably (its directory is the caller's to sync); a copy of it already there is replaced. */
  private async writeOut(dir: string, name: string, item: PushOutboxItem): Promise<void> {
    const text = JSON.stringify(item)
    await this.writeReplacing(dir, name, text)
    this.remember(path.join(dir, name), item, text)
  }

  /**
   * A claimed journal notification leaves the journal for the file `name`
   * of its Task directory (its retry, its dead letter), written durably
   * first, then marked done; the channel's next claim may be due.
   */
  private async moveOutOfJournal(dirName: string, journal: OwnJournal, entry: OwnEntry, name: string, text: string): Promise<void> {
    const dir = path.join(this.root, dirName)
    await this.writeReplacing(dir, name, text)
    await this.syncDir(dir)
    await this.finish(journal, [entry.item.key])
    this.markDue(dirName)
  }

  /** Where a claim of a journal notification is; undefined for a claim of a file. `entry`: the notification, while the claim still holds it. */
  private journalClaim(claim: PushClaim): { dirName: string; hold: number; more: boolean; journal?: OwnJournal; entry?: OwnEntry } | undefined {
    const [dirName, heldName, more, ...rest] = String(claim?.token).split("/")
    if (heldName === undefined || !heldName.startsWith(JOURNAL_HOLD)) return undefined
    const hold = Number(heldName.slice(JOURNAL_HOLD.length))
    if (rest.length > 0 || !Number.isSafeInteger(hold) || hold <= 0 || (more !== "0" && more !== "1") || dirName !== taskFileName(claim.item.taskId)) {
      throw new TypeError(`${STORE}.push: the claim's token is not one this store gave`)
    }
    const place = this.journalHolds.get(hold)
    const journal = place === undefined ? undefined : this.journals.get(place.dirName)
    const entry = place === undefined ? undefined : journal?.entries.get(place.key)
    return { dirName, hold, more: more === "1", journal, entry: entry?.hold === hold ? entry : undefined }
  }

  /**
   * Part of a settle: writes out, durably, the journal notifications older
   * than `upTo` no claim holds (this store may no longer send: any store's
   * claims find them then), and makes durable the journals that still hold
   * notifications older than that (held by claims).
   */
  private async settleJournals(upTo: number): Promise<void> {
    for (const journal of [...this.journals.values()]) {
      const dir = path.join(this.root, journal.dirName)
      try {
        const now = Date.now()
        const out = [...journal.entries.values()].filter((entry) => (entry.heldUntil === 0 && entry.item.enqueuedAt < upTo) || leaseEnded(entry, now))
        if (out.length > 0) await this.writeOutEntries(journal, out)
        if (journal.unsynced && [...journal.entries.values()].some((entry) => entry.item.enqueuedAt < upTo)) {
          journal.unsynced = false
          try {
            await syncFile(this.host.fs, this.journalFile(journal))
            if (journal.fresh) await this.syncDir(dir)
            journal.fresh = false
          } catch (err) {
            journal.unsynced = true
            throw err
          }
        }
      } catch (err) {
        if (!isMissing(err)) throw err
        // Its Task deleted (by another process): nothing of it is left to send.
        if (this.journals.get(journal.dirName) === journal) this.journals.delete(journal.dirName)
      }
    }
  }

  /**
   * Writes the journal's `entries` out as files of their own, durably, any
   * store's to claim, and marks them done in the journal.
   */
  private async writeOutEntries(journal: OwnJournal, entries: readonly OwnEntry[]): Promise<void> {
    const dir = path.join(this.root, journal.dirName)
    await heldWhile(entries, async () => {
      for (const entry of entries) await this.writeOut(dir, itemFileName(entry.item.seq, process.pid, 0, entry.configFile), entry.item)
      await this.syncDir(dir)
    })
    // Written out: a done mark that fails to land only lets a take-over write them out again.
    await this.finish(journal, entries.map((entry) => entry.item.key)).catch(() => this.forget(journal, entries))
    this.markDue(journal.dirName)
  }

  /** Removes the store's journals that hold nothing and were last appended to before `before`. */
  private async compactJournals(before: number): Promise<void> {
    for (const journal of [...this.journals.values()]) {
      if (journal.entries.size > 0 || journal.appending > 0 || journal.removing !== undefined || journal.lastAppend >= before) continue
      // Everything in it is done: the done lines not written yet go with it.
      journal.sent = []
      journal.removing = this.remove(this.journalFile(journal)).finally(() => {
        if (this.journals.get(journal.dirName) === journal) this.journals.delete(journal.dirName)
      })
      await journal.removing.catch((err: unknown) => this.host.report(err, "push"))
    }
  }

  /** A notification this store holds or released under a new name: where settle finds it. */
  private moved(dir: string, base: string, name: string): void {
    const entry = this.unsettled.get(path.join(dir, base))
    if (entry !== undefined) entry.name = name
  }

  /** Renames `from` to `to` in `dir`; false when `from` is gone (another process renamed or removed it first). */
  private async renamed(dir: string, from: string, to: string): Promise<boolean> {
    try {
      await this.host.fs.rename(path.join(dir, from), path.join(dir, to))
      return true
    } catch (err) {
      if (isMissing(err)) return false
      throw err
    }
  }

  /** The Task id of a directory whose name is a hash: from any whole file in it. */
  private async taskIdIn(dir: string, names: string[]): Promise<string | undefined> {
    for (const name of names) {
      if (!name.endsWith(".json")) continue
      const record = await this.readJson<{ taskId?: unknown }>(path.join(dir, name))
      if (typeof record?.taskId === "string") return record.taskId
    }
    return undefined
  }

  /**
   * The Task directories under `.push`; what this process knows of them
   * gains any it did not. None is forgotten here: a listing begun before a
   * putConfig made its directory would drop it, and saves would then skip
   * its notifications. A name goes only when its directory is found gone
   * (prepare) or removed with its Task.
   */
  private async taskDirs(): Promise<string[]> {
    const names = (await this.names(this.root)).filter(isTaskDir)
    for (const name of names) this.known.add(name)
    if (names.length > 0) this.watch()
    return names
  }

  /** The current configs among `names`, in id order, through the cache (for the store's own use: the records are shared). */
  private async configsIn(dir: string, names: string[]): Promise<PushConfigRecord[]> {
    const configs: PushConfigRecord[] = []
    for (const name of currentConfigs(names).values()) {
      const config = await this.record<PushConfigRecord>(path.join(dir, name))
      if (config !== undefined) configs.push(config)
    }
    return configs.sort(byId)
  }

  /**
   * A config or a notification, read once: neither file changes (a put or a
   * failed attempt writes a new name); a held notification is read from its
   * held name `readFrom`, and cached by the one it was written under. Shared between callers: for the
   * store's own use (the sender does not change a claim), never handed to a
   * peer.
   */
  private async record<T>(file: string, readFrom = file): Promise<T | undefined> {
    const cached = this.records.get(file)
    if (cached !== undefined) return cached.record as T
    const text = await readText(this.host.fs, readFrom)
    const record = text === undefined ? undefined : parseJson<T>(text)
    this.remember(file, record, text)
    return record
  }

  /** Keeps what `file` holds in the cache. */
  private remember(file: string, record: unknown, text: string | undefined): void {
    if (record === undefined || text === undefined) this.records.delete(file)
    else this.records.set(file, { record, bytes: CACHED_RECORD_HEAP_BYTES + textHeapBytes(text) })
  }

  private async names(dir: string): Promise<string[]> {
    try {
      return await this.host.fs.readdir(dir)
    } catch (err) {
      if (isMissing(err)) return []
      throw new Error(`${STORE} could not read ${dir}: ${(err as Error).message}`, { cause: err })
    }
  }

  /** The file's JSON; undefined when it is missing or not whole (a file being written is not read as anything). */
  private async readJson<T>(file: string): Promise<T | undefined> {
    const text = await readText(this.host.fs, file)
    return text === undefined ? undefined : parseJson<T>(text)
  }

  private async mtime(file: string): Promise<number> {
    try {
      return (await this.host.fs.stat(file)).mtimeMs
    } catch {
      return 0
    }
  }

  /** Creates `file` with `text`, not synced (its Task's save records it, see the header); EEXIST when it exists. Synced on a file system layer that cannot. */
  private async writeUnsynced(file: string, text: string): Promise<void> {
    const { fs } = this.host
    if (fs.createUnsynced === undefined) return writeNew(fs, file, text, { durable: true })
    await fs.createUnsynced(file, text, "utf8")
  }

  /** Replaces `name` in `dir` with `text` whole: a synced tmp file renamed over it (the directory is synced by the caller when it matters). */
  private async writeReplacing(dir: string, name: string, text: string): Promise<void> {
    const tmp = path.join(dir, tmpFileName(name, process.pid, ++tmpCounter))
    try {
      await writeNew(this.host.fs, tmp, text, { durable: true })
      await this.host.fs.rename(tmp, path.join(dir, name))
    } catch (err) {
      await this.host.fs.rm(tmp, { force: true }).catch(() => {})
      throw err
    }
  }

  private async remove(file: string): Promise<void> {
    await this.host.fs.rm(file, { force: true })
  }

  private syncDir(dir: string): Promise<void> {
    return syncDirectory(this.host.fs, dir)
  }
}

function isJournaled(item: ListedItem): item is JournalItem {
  return "journal" in item
}

/** Runs `work` with the journal notifications held (no claim takes them meanwhile); when it fails, they are as they were. */
async function heldWhile(entries: readonly OwnEntry[], work: () => Promise<void>): Promise<void> {
  const before = entries.map((entry) => entry.heldUntil)
  for (const entry of entries) entry.heldUntil = Infinity
  try {
    await work()
  } catch (err) {
    entries.forEach((entry, i) => (entry.heldUntil = before[i]))
    throw err
  }
}

/** Whether a claim held the journal notification and its lease ran out unsettled. */
function leaseEnded(entry: OwnEntry, now: number): boolean {
  return entry.hold !== 0 && entry.heldUntil <= now
}

function attemptsOf(item: ListedItem): number {
  return isJournaled(item) ? item.item.attempts : item.attempts
}

/** Whether the store that writes a journal still runs. */
function writerAlive(journal: JournalName): boolean {
  return journal.pid === process.pid ? liveWriters.has(journal.writer) : isProcessAlive(journal.pid)
}

/** A Task's directory under `.push`, not the boot record's (nor a tmp file). */
function isTaskDir(name: string): boolean {
  return name.endsWith(TASK_FILE_SUFFIX)
}

/** The key of a dead letter's file name (`d-<deadAt>-<key>.json`). */
function deadLetterKey(name: string): string[] {
  const match = /^d-\d{16}-(.+)\.json$/.exec(name)
  return match ? [match[1]] : []
}

/** An event of another Task object than the one saved, from its text: without the list of pending notifications it may carry. */
function reportedEvent(text: string): PushEvent {
  const event = JSON.parse(text) as PushEvent
  return { ...event, task: withoutPushPending(event.task) }
}

let machineBoot: Promise<string> | undefined

/** This boot of the machine: Linux's boot id, else the time it booted, to the second. */
function bootOfMachine(): Promise<string> {
  machineBoot ??= readFile("/proc/sys/kernel/random/boot_id", "utf8").then(
    (id) => `id ${id.trim()}`,
    () => `at ${Math.round(Date.now() / 1000 - uptime())}`,
  )
  return machineBoot
}

function sameBoot(recorded: string, boot: string): boolean {
  if (recorded === boot) return true
  const [a, b] = [recorded, boot].map((text) => /^at (\d+)$/.exec(text)?.[1])
  return a !== undefined && b !== undefined && Math.abs(Number(a) - Number(b)) <= BOOT_TIME_SLACK_S
}

function configName(name: string): Array<{ name: string; version: number; configFile: string }> {
  const match = CONFIG_NAME.exec(name)
  return match ? [{ name, version: Number(match[1]), configFile: match[2] }] : []
}

/** Each config's newest file name, by config file. */
function currentConfigs(names: readonly string[]): Map<string, string> {
  const newest = new Map<string, { name: string; version: number }>()
  for (const config of names.flatMap(configName)) {
    const held = newest.get(config.configFile)
    if (held === undefined || held.version < config.version || (held.version === config.version && held.name < config.name)) newest.set(config.configFile, config)
  }
  return new Map([...newest].map(([configFile, { name }]) => [configFile, name]))
}

const byId = (a: PushConfigRecord, b: PushConfigRecord) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** A time (ms since the epoch) as a name holds it: whole, 16 digits, rounded up (a hold never ends before its time). */
function timeInName(ms: number): string {
  return padded(Math.min(MAX_NAMED_TIME, Math.max(0, Math.ceil(ms))))
}

function itemFileName(seq: number, pid: number, attempts: number, configFile: string): string {
  return `${ITEM}${padded(seq)}-${pid}-${attempts}-${configFile}`
}

function itemName(name: string): ItemName[] {
  const match = ITEM_NAME.exec(name)
  if (!match) return []
  const [, seq, pid, attempts, configFile, until] = match
  // A held name is its base, "~", 16 digits, "~" and the token.
  const base = until === undefined ? name : name.slice(0, name.length - until.length - match[6].length - 2)
  return [{ name, base, seq: Number(seq), pid: Number(pid), attempts: Number(attempts), configFile, until: until === undefined ? 0 : Number(until) }]
}

/** A config id's file name: the Task-file encoding, or its hash when that would be long. */
function configFileName(id: string): string {
  const name = taskFileName(id)
  return name.length <= MAX_CONFIG_NAME ? name : "~~" + createHash("sha256").update(id, "utf8").digest("hex") + ".json"
}

/** The JSON in `text`; undefined when it is not whole. */
function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T
  } catch {
    return undefined
  }
}
