import path from "node:path"
import { pushSeqOf } from "../../internals.js"
import { isProcessAlive } from "../../process.js"
import type { A2ATask } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { ABANDONED_PUSH_ITEM_MS } from "../push-records.js"
import type { PushClaim, PushOutboxItem } from "../push-store.js"
import { isMissing } from "./file-system.js"
import { taskFileName } from "./names.js"
import { STORE, type PushFiles } from "./push-files.js"
import { FULL_SCAN_MS, type PushIndex } from "./push-index.js"
import { doneLine, journalFileName, journalName, readJournal, takenJournalName, type JournalEntry, type JournalName } from "./push-journal.js"
import { itemFileName } from "./push-names.js"

/** A journal past this many bytes takes no more notifications (they get files of their own) until it is emptied and removed. */
const MAX_JOURNAL_BYTES = 256 * 1024
/** How long the done line of a sent journal notification may wait for its journal's next append before it is written alone. */
const SENT_FLUSH_MS = 200
/** A store whose claims ran this recently sends: its new notifications go to its journals; else to files of their own, for whichever store claims. */
const SENDING_MS = FULL_SCAN_MS
/** How a claim's token names a journal notification it holds: this, then the hold's number. */
const JOURNAL_HOLD = "j~"

/** A journal this store appends to, as its memory holds it: what it holds is this store's to send. */
export interface OwnJournal {
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

export interface OwnEntry extends JournalEntry {
  /** Held until then (a claim's lease, or Infinity while it is being written out or marked done); 0 when free. */
  heldUntil: number
  /** The claim that holds it (its token names it); 0 when none. */
  hold: number
}

/** A notification of a journal, as a listing of its Task directory sees it. */
export interface JournalItem {
  seq: number
  configFile: string
  key: string
  item: PushOutboxItem
  journal: JournalName
  /** This store's entry, when the journal is its own. */
  own?: OwnEntry
}

/** Where a claim of a journal notification is. `entry`: the notification, while the claim still holds it. */
export interface JournalClaim {
  dirName: string
  hold: number
  more: boolean
  journal?: OwnJournal
  entry?: OwnEntry
}

/** The writers of this process's stores: a journal named with this process's pid and another writer is a dead one's (its pid reused). */
const liveWriters = new Set<string>()

/**
 * A store's journals (see push-journal.ts for the file): what its journal
 * holds is that store's to send, held in its memory; it writes a
 * notification out as an `o-` file (synced, and marked done in the journal)
 * when its attempt fails (the retry's file), when its claim's lease runs out
 * unsettled, when no claim took it within SETTLE_MS (the store may no longer
 * send), and at close: any store's claims take it then. A journal's
 * notifications count in their channels' order for every store, and another
 * store's `o-` files wait behind them. The journal of a store that is gone
 * (its process died, or its file lay untouched past ABANDONED_PUSH_ITEM_MS)
 * is taken over by the next claim that lists it: its landed notifications
 * are written out, and it is removed. A journal follows the rules of the
 * notification files: unsynced, its lines recorded by the Task's save and
 * carried while not marked done, made durable by the settle that finds a
 * notification in it still held, and a recovery after a crash of the
 * machine writes again a recorded notification no journal holds or marked
 * done. An emptied journal is removed SETTLE_MS after its last line (at once
 * on close), one past MAX_JOURNAL_BYTES takes no new notification. A
 * notification costs a journal two appends, where an `o-` file is made,
 * renamed and removed.
 */
export class JournalWriter {
  /** This store's journals, by Task directory. */
  readonly journals = new Map<string, OwnJournal>()
  /** The claims holding journal notifications, by the number their token names. */
  private readonly holds = new Map<number, { dirName: string; key: string }>()
  private holdCount = 0
  /** When this store's claims last ran (ms since the epoch). */
  private lastClaim = -Infinity
  /** The timer that writes the done lines of sent journal notifications no append carried. */
  private sentFlush: NodeJS.Timeout | undefined

  constructor(
    private readonly files: PushFiles,
    private readonly index: PushIndex,
    /** The store's name, in its journals' names. */
    private readonly writer: string,
    /** The stored Task, or undefined. */
    private readonly stored: (id: string) => Promise<A2ATask | undefined>,
    private readonly report: ReportError,
  ) {
    liveWriters.add(writer)
  }

  /** This store's claims ran: for SENDING_MS, its new notifications go to its journals. */
  claiming(now: number): void {
    this.lastClaim = now
  }

  /**
   * The store's journal of the Task directory, for a save's new
   * notifications, reserved (its `appending` counted: the caller ends it):
   * undefined when they get files of their own (this store does not send,
   * the file system layer cannot append, or the journal is full).
   */
  async journalFor(dirName: string, now: number): Promise<OwnJournal | undefined> {
    if (this.files.fs.appendFile === undefined || now - this.lastClaim > SENDING_MS) return undefined
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
    return path.join(this.files.root, journal.dirName, journalFileName(process.pid, this.writer))
  }

  /** Appends `data` to the journal, after the done lines of the notifications sent since its last append. */
  async append(journal: OwnJournal, data: string): Promise<void> {
    const sent = journal.sent
    journal.sent = []
    const text = sent.map(doneLine).join("") + data
    try {
      await this.files.fs.appendFile!(this.journalFile(journal), text, "utf8")
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
  markSent(journal: OwnJournal, entry: OwnEntry): void {
    this.forget(journal, [entry])
    journal.sent.push(entry.item.key)
    this.sentFlush ??= setTimeout(() => void this.flushSent(), SENT_FLUSH_MS).unref()
  }

  /** Writes the done lines of sent notifications no append carried; `all` (close): now, the timer stopped. */
  async flushSent(all = false): Promise<void> {
    if (all) clearTimeout(this.sentFlush)
    this.sentFlush = undefined
    for (const journal of this.journals.values()) {
      if (journal.sent.length === 0 || journal.removing !== undefined) continue
      journal.appending++
      try {
        await this.append(journal, "")
      } catch (err) {
        // Its Task deleted: nothing to mark. Else the next append tries again.
        if (isMissing(err)) journal.sent = []
        else this.report(err, "push")
      } finally {
        journal.appending--
      }
    }
  }

  /** Marks the journal's notifications of `keys` done (one append), then forgets them; no claim takes them meanwhile. */
  async finish(journal: OwnJournal, keys: readonly string[]): Promise<void> {
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
      if (entry.hold !== 0) this.holds.delete(entry.hold)
      journal.entries.delete(entry.item.key)
    }
  }

  /** Marks done the notifications this store's journal of the directory holds for a config that is gone. */
  async dropJournaled(dirName: string, configFile: string): Promise<void> {
    const own = this.journals.get(dirName)
    if (own !== undefined) await this.finish(own, [...own.entries.values()].flatMap((entry) => (entry.configFile === configFile ? [entry.item.key] : [])))
  }

  /** Forgets the journal of a deleted Task's directory. */
  removeTask(dirName: string): void {
    this.journals.delete(dirName)
    for (const [hold, place] of this.holds) if (place.dirName === dirName) this.holds.delete(hold)
  }

  /** The journal notifications of a Task directory not yet done: this store's from its memory, other stores' read from their files. */
  async journalItems(dirName: string, dir: string, names: readonly string[]): Promise<JournalItem[]> {
    const found: JournalItem[] = []
    const own = this.journals.get(dirName)
    if (own !== undefined) {
      const journal = { name: journalFileName(process.pid, this.writer), pid: process.pid, writer: this.writer }
      for (const entry of own.entries.values()) found.push({ seq: entry.item.seq, configFile: entry.configFile, key: entry.item.key, item: entry.item, journal, own: entry })
    }
    for (const journal of names.flatMap(journalName)) {
      if (this.isOwn(journal)) continue
      const text = await this.files.readText(path.join(dir, journal.name))
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
  async goneJournals(dir: string, others: readonly JournalName[]): Promise<JournalName[]> {
    const gone: JournalName[] = []
    for (const journal of others) {
      const alive = journal.taker === undefined ? writerAlive(journal) : journal.taker !== process.pid && isProcessAlive(journal.taker)
      if (!alive || Date.now() - (await this.files.mtime(path.join(dir, journal.name))) > ABANDONED_PUSH_ITEM_MS) gone.push(journal)
    }
    return gone
  }

  /** Whether the journal is this store's own (not one taken over). */
  isOwn(journal: JournalName): boolean {
    return journal.writer === this.writer && journal.pid === process.pid && journal.taker === undefined
  }

  /**
   * Takes over the journal of a store that is gone: its notifications whose
   * saves landed are written out as files of their own, durably, any store's
   * to claim; then it is removed. The taker renames it to
   * `j-<pid>-<writer>~<taker pid>` first (of two takers only one finds the
   * name); another store that took it first has it.
   */
  async takeOver(dir: string, taskId: string, journal: JournalName): Promise<void> {
    const taken = takenJournalName(journal, process.pid)
    if (taken !== journal.name && !(await this.files.renamed(dir, journal.name, taken))) return
    const text = await this.files.readText(path.join(dir, taken))
    if (text !== undefined) {
      const seq = pushSeqOf(await this.stored(taskId))
      // Above the stored seq: its save never landed (its writer is gone), nothing to send.
      for (const { item, configFile } of readJournal(text).open.values()) {
        if (item.seq <= seq) await this.writeOut(dir, itemFileName(item.seq, journal.pid, 0, configFile), item)
      }
      await this.files.syncDir(dir)
    }
    await this.files.remove(path.join(dir, taken))
    this.index.markDue(path.basename(dir))
  }

  /** Writes a journal's notification as a file of its own, durably (its directory is the caller's to sync); a copy of it already there is replaced. */
  private async writeOut(dir: string, name: string, item: PushOutboxItem): Promise<void> {
    const text = JSON.stringify(item)
    await this.files.writeReplacing(dir, name, text)
    this.files.remember(path.join(dir, name), item, text)
  }

  /**
   * A claimed journal notification leaves the journal for the file `name`
   * of its Task directory (its retry, its dead letter), written durably
   * first, then marked done; the channel's next claim may be due.
   */
  async moveOutOfJournal(dirName: string, journal: OwnJournal, entry: OwnEntry, name: string, text: string): Promise<void> {
    const dir = path.join(this.files.root, dirName)
    await this.files.writeReplacing(dir, name, text)
    await this.files.syncDir(dir)
    await this.finish(journal, [entry.item.key])
    this.index.markDue(dirName)
  }

  /** A claim takes the journal notification until `until`: the token naming the hold. */
  hold(dirName: string, own: OwnEntry, until: number, more: boolean): string {
    own.heldUntil = until
    own.hold = ++this.holdCount
    this.holds.set(own.hold, { dirName, key: own.item.key })
    return `${dirName}/${JOURNAL_HOLD}${own.hold}/${more ? 1 : 0}`
  }

  /** Ends a claim's hold (unless the notification left the journal since). */
  release(claim: JournalClaim): void {
    if (claim.entry !== undefined) {
      claim.entry.heldUntil = 0
      claim.entry.hold = 0
    }
    this.holds.delete(claim.hold)
  }

  /** Where a claim of a journal notification is; undefined for a claim of a file. `entry`: the notification, while the claim still holds it. */
  journalClaim(claim: PushClaim): JournalClaim | undefined {
    const [dirName, heldName, more, ...rest] = String(claim?.token).split("/")
    if (heldName === undefined || !heldName.startsWith(JOURNAL_HOLD)) return undefined
    const hold = Number(heldName.slice(JOURNAL_HOLD.length))
    if (rest.length > 0 || !Number.isSafeInteger(hold) || hold <= 0 || (more !== "0" && more !== "1") || dirName !== taskFileName(claim.item.taskId)) {
      throw new TypeError(`${STORE}.push: the claim's token is not one this store gave`)
    }
    const place = this.holds.get(hold)
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
  async settleJournals(upTo: number): Promise<void> {
    for (const journal of [...this.journals.values()]) {
      const dir = path.join(this.files.root, journal.dirName)
      try {
        const now = Date.now()
        const out = [...journal.entries.values()].filter((entry) => (entry.heldUntil === 0 && entry.item.enqueuedAt < upTo) || leaseEnded(entry, now))
        if (out.length > 0) await this.writeOutEntries(journal, out)
        if (journal.unsynced && [...journal.entries.values()].some((entry) => entry.item.enqueuedAt < upTo)) {
          journal.unsynced = false
          try {
            await this.files.syncFile(this.journalFile(journal))
            if (journal.fresh) await this.files.syncDir(dir)
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
  async writeOutEntries(journal: OwnJournal, entries: readonly OwnEntry[]): Promise<void> {
    const dir = path.join(this.files.root, journal.dirName)
    await heldWhile(entries, async () => {
      for (const entry of entries) await this.writeOut(dir, itemFileName(entry.item.seq, process.pid, 0, entry.configFile), entry.item)
      await this.files.syncDir(dir)
    })
    // Written out: a done mark that fails to land only lets a take-over write them out again.
    await this.finish(journal, entries.map((entry) => entry.item.key)).catch(() => this.forget(journal, entries))
    this.index.markDue(journal.dirName)
  }

  /** Removes the store's journals that hold nothing and were last appended to before `before`. */
  async compactJournals(before: number): Promise<void> {
    for (const journal of [...this.journals.values()]) {
      if (journal.entries.size > 0 || journal.appending > 0 || journal.removing !== undefined || journal.lastAppend >= before) continue
      // Everything in it is done: the done lines not written yet go with it.
      journal.sent = []
      journal.removing = this.files.remove(this.journalFile(journal)).finally(() => {
        if (this.journals.get(journal.dirName) === journal) this.journals.delete(journal.dirName)
      })
      await journal.removing.catch((err: unknown) => this.report(err, "push"))
    }
  }
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
export function leaseEnded(entry: OwnEntry, now: number): boolean {
  return entry.hold !== 0 && entry.heldUntil <= now
}

/** Whether the store that writes a journal still runs. */
function writerAlive(journal: JournalName): boolean {
  return journal.pid === process.pid ? liveWriters.has(journal.writer) : isProcessAlive(journal.pid)
}
