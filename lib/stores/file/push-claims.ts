import path from "node:path"
import { pushSeqOf } from "../../internals.js"
import { isProcessAlive } from "../../process.js"
import type { A2ATask } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { ABANDONED_PUSH_ITEM_MS, assertClaimArgs, deadLetterOf, retried } from "../push-records.js"
import type { PushClaim, PushOutboxItem } from "../push-store.js"
import { mapLimited } from "./list-index.js"
import { idFromFileName, taskFileName } from "./names.js"
import { READERS, STORE, type PushFiles } from "./push-files.js"
import type { PushDurability } from "./push-durability.js"
import type { PushIndex } from "./push-index.js"
import { journalName } from "./push-journal.js"
import { leaseEnded, type JournalItem, type JournalWriter } from "./push-journal-writer.js"
import { currentConfigs, deadLetterFileName, heldName, ITEM, itemFileName, itemName, WAITING, type ItemName } from "./push-names.js"

/** A hold's token is its store's name and a count, in at most 16 characters: the count in 8 base-36 digits. */
const HOLD_COUNT_WRAP = 36 ** 8
/** When to look again at a notification whose save another process has under way. */
const UNLANDED_RECHECK_MS = 1000
/** Task directories oldestPendingAt reads at most (of those due, the ones due longest), so a scrape costs the same at any backlog. */
const OLDEST_DIRS = 32

/** A notification as a claim lists it: a file of its own, or a journal's. */
type ListedItem = ItemName | JournalItem

/** What claims need of their FileTaskStore. */
export interface ClaimsHost {
  open(): Promise<void>
  /** The stored Task, or undefined. */
  stored(id: string): Promise<A2ATask | undefined>
  report: ReportError
}

/**
 * Claims and their settlement. A claim renames the channel's first
 * notification to a name that holds it until the lease's end (a rename is
 * atomic: of two processes only one finds the name it renames), and a
 * settlement goes by that name; a hold past its end may be renamed again by
 * any claim. Any number of FileTaskStores, in any processes, may share the
 * directory. A notification of this store's own journal is held in memory
 * instead (see push-journal-writer.ts), and another store's journal is that
 * store's to send while it lives.
 */
export class PushClaims {
  /** Holds this store made: with `writer` (8 characters), a hold's token names it alone (a settlement goes by the held name), without random bytes drawn per claim. */
  private holdCount = 0

  constructor(
    private readonly files: PushFiles,
    private readonly index: PushIndex,
    private readonly journals: JournalWriter,
    private readonly durability: PushDurability,
    /** The store's name, in its holds' tokens. */
    private readonly writer: string,
    private readonly host: ClaimsHost,
  ) {}

  async claim(instance: string, limit: number, leaseMs: number, now: number): Promise<PushClaim[]> {
    assertClaimArgs(STORE, instance, limit, leaseMs, now)
    await this.host.open()
    this.journals.claiming(Date.now())
    const { full, dirs } = await this.index.toLook(now)
    const claims: PushClaim[] = []
    const look = async (dirName: string): Promise<void> => {
      const marks = this.index.marksOf(dirName)
      try {
        const found = await this.claimIn(dirName, limit, leaseMs, now, () => claims.length < limit)
        // Marked due meanwhile (a save landed, a claim settled): what this look saw is out of date.
        this.index.looked(dirName, marks, found)
        for (const claim of found.claims) {
          if (claims.length < limit) claims.push(claim)
          else await this.release(claim)
        }
      } catch (err) {
        this.index.markDue(dirName)
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
    if (full) for (const dirName of dirs.slice(next)) this.index.markDue(dirName)
    return claims.sort((a, b) => a.item.seq - b.item.seq)
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
    const { files, journals } = this
    const dir = path.join(files.root, dirName)
    let names = await files.names(dir)
    let journaled = await journals.journalItems(dirName, dir, names)
    let landed = this.index.landedOf(dirName)
    const others = names.flatMap(journalName).filter((journal) => !journals.isOwn(journal))
    if (journaled.length === 0 && others.length === 0 && !names.some((name) => name.startsWith(ITEM))) return { claims: [], landed }
    const taskId = idFromFileName(dirName) ?? (await files.taskIdIn(dir, names))
    if (taskId === undefined || taskFileName(taskId) !== dirName) return { claims: [], landed }
    // The journals of stores that are gone are taken over first: their notifications are files of their own then.
    const gone = await journals.goneJournals(dir, others)
    if (gone.length > 0) {
      for (const journal of gone) await journals.takeOver(dir, taskId, journal)
      names = await files.names(dir)
      journaled = await journals.journalItems(dirName, dir, names)
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
      for (const orphan of items) if (orphan.configFile === configFile && !isJournaled(orphan)) await files.remove(path.join(dir, orphan.name))
      await journals.dropJournaled(dirName, configFile)
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
          await journals.writeOutEntries(journals.journals.get(dirName)!, [own])
          lookAt(now)
          continue
        }
        const config = await files.currentConfig(dir, configNames, head.configFile)
        if (config === undefined) {
          await dropChannel(head.configFile)
          continue
        }
        lookAt(now + leaseMs)
        claims.push({ item: own.item, config, token: journals.hold(dirName, own, now + leaseMs, behind(head)) })
        continue
      }
      if (head.seq > landed) {
        // Its save has not landed: under way (this process's marks the directory when it lands), or never to land
        // (its writer died, or it is older than any save takes).
        const file = path.join(dir, head.name)
        if (!isProcessAlive(head.pid) || now - (await files.mtime(file)) > ABANDONED_PUSH_ITEM_MS) {
          await files.remove(file)
          lookAt(now)
        } else lookAt(head.pid === process.pid ? now + ABANDONED_PUSH_ITEM_MS : now + UNLANDED_RECHECK_MS)
        continue
      }
      if (head.until > now) {
        waiting ||= behind(head)
        lookAt(head.until)
        continue
      }
      if (!configNames.has(head.configFile) && !(await files.configName(dir, head.configFile))) {
        // Its config was deleted (a delete removes the config first, then its notifications): they go with it.
        await dropChannel(head.configFile)
        continue
      }
      const held = heldName(head.base, now + leaseMs, `${this.writer}${(++this.holdCount % HOLD_COUNT_WRAP).toString(36)}`)
      if (!(await files.renamed(dir, head.name, held))) {
        lookAt(now) // another process claimed or settled it since the listing
        continue
      }
      this.durability.moved(dir, head.base, held)
      // An older copy of this very notification (its retry's rewrite was cut short). Not one of the same seq by another
      // process: two processes saving the Task at once each wrote their own, and both are sent.
      for (const older of items) {
        if (isJournaled(older)) continue
        if (older.configFile === head.configFile && older.seq === head.seq && older.pid === head.pid && older.attempts < head.attempts) {
          await files.remove(path.join(dir, older.name))
        }
      }
      const item = await files.record<PushOutboxItem>(path.join(dir, head.base), path.join(dir, held))
      const config = await files.currentConfig(dir, configNames, head.configFile)
      // Whether the channel had more: then settling this one makes the directory due again.
      const more = behind(head)
      if (item === undefined || config === undefined) {
        // Removed since the rename (its config's delete), or its config deleted since the listing (it goes with it), or
        // a file a crash of the machine left unreadable (reported, and removed: it would hold its channel for ever).
        if (item === undefined && (await files.mtime(path.join(dir, held))) > 0) {
          this.host.report(new Error(`${STORE} removed an unreadable push notification file ${path.join(dir, held)}`), "push")
        }
        await files.remove(path.join(dir, held))
        lookAt(now)
      } else if (item.notBefore > now) {
        // Due later (its wait was lost): held until then.
        const waits = heldName(head.base, item.notBefore, WAITING)
        if (await files.renamed(dir, held, waits)) this.durability.moved(dir, head.base, waits)
        lookAt(item.notBefore)
      } else {
        // Settling it marks the directory; a lease that runs out unsettled ends then.
        lookAt(now + leaseMs)
        claims.push({ item, config, token: `${dirName}/${held}/${more ? 1 : 0}` })
      }
    }
    return { claims, nextLook, landed, waiting }
  }

  async ack(claim: PushClaim): Promise<void> {
    const journaled = this.journals.journalClaim(claim)
    if (journaled !== undefined) {
      if (journaled.entry !== undefined) this.journals.markSent(journaled.journal!, journaled.entry)
      this.index.settled(journaled.dirName, journaled.more)
      return
    }
    const { dir, held, more } = this.placeOf(claim)
    // Held by another claim since this one's lease ran out, it is left to that claim: sent again, at least once.
    await this.files.remove(path.join(dir, held.name))
    this.forget(dir, held)
    this.index.settled(path.basename(dir), more)
  }

  async retryLater(claim: PushClaim, notBefore: number, error: string): Promise<void> {
    const next = retried(claim.item, notBefore, String(error))
    const text = JSON.stringify(next)
    const journaled = this.journals.journalClaim(claim)
    if (journaled !== undefined) {
      const { entry, journal, dirName } = journaled
      if (entry === undefined) return
      // A crash before its done line leaves both: a take-over's copy has fewer attempts.
      const base = itemFileName(entry.item.seq, process.pid, 1, entry.configFile)
      await this.journals.moveOutOfJournal(dirName, journal!, entry, heldName(base, notBefore, WAITING), text)
      this.files.remember(path.join(this.files.root, dirName, base), next, text)
      return
    }
    const { dir, held } = this.placeOf(claim)
    if (!(await this.holds(claim))) return
    const base = itemFileName(held.seq, held.pid, held.attempts + 1, held.configFile)
    // The new name first, durably (the old file may not be: see push-durability.ts): a crash between leaves both, and
    // a claim takes the one with more attempts.
    await this.files.writeReplacing(dir, heldName(base, notBefore, WAITING), text)
    await this.files.syncDir(dir)
    this.files.remember(path.join(dir, base), next, text)
    await this.files.remove(path.join(dir, held.name))
    this.forget(dir, held)
    this.index.markDue(path.basename(dir))
  }

  /** Gives the claim's notification up: a dead letter (`d-<deadAt>-<key>.json`), written durably before the notification goes. */
  async deadLetter(claim: PushClaim, reason: string, attempts?: number): Promise<void> {
    const dead = deadLetterOf(claim.item, String(reason), Date.now(), attempts)
    const name = deadLetterFileName(dead.deadAt, dead.key)
    const journaled = this.journals.journalClaim(claim)
    if (journaled !== undefined) {
      const { entry, journal, dirName } = journaled
      if (entry !== undefined) await this.journals.moveOutOfJournal(dirName, journal!, entry, name, JSON.stringify(dead))
      return
    }
    const { dir, held } = this.placeOf(claim)
    if (!(await this.holds(claim))) return
    await this.files.writeReplacing(dir, name, JSON.stringify(dead))
    await this.files.syncDir(dir)
    await this.files.remove(path.join(dir, held.name))
    this.forget(dir, held)
    this.index.markDue(path.basename(dir))
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
    for (const dirName of this.index.due.keys()) {
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
    const { files } = this
    const dir = path.join(files.root, dirName)
    for (let listing = 1; ; listing++) {
      const names = await files.names(dir)
      // A notification written anew (a failed attempt) whose old name a crash left: the newer one counts, as in a claim.
      const items = names.flatMap(itemName).sort((a, b) => a.seq - b.seq || b.attempts - a.attempts)
      const configs = currentConfigs(names)
      // A journal's notifications are all at hand: the oldest of them is its channels' heads'.
      const journaled = (await this.journals.journalItems(dirName, dir, names)).filter((item) => configs.has(item.configFile))
      if (items.length === 0 && journaled.length === 0) return undefined
      const heads = new Map<string, ItemName>()
      for (const item of items) if (configs.has(item.configFile) && !heads.has(item.configFile)) heads.set(item.configFile, item)
      let landed = this.index.landedOf(dirName)
      if ([...heads.values(), ...journaled].some((head) => head.seq > landed)) {
        const taskId = idFromFileName(dirName) ?? (await files.taskIdIn(dir, names))
        if (taskId === undefined || taskFileName(taskId) !== dirName) return undefined
        landed = Math.max(landed, pushSeqOf(await this.host.stored(taskId)))
        // Seen saved: the next scrape (and claim) need not read the Task for these.
        this.index.sawLanded(dirName, landed)
      }
      let oldest: number | undefined
      for (const { seq, item } of journaled) if (seq <= landed && (oldest === undefined || item.enqueuedAt < oldest)) oldest = item.enqueuedAt
      let moved = false
      for (const head of heads.values()) {
        if (head.seq > landed) continue
        const item = await files.record<PushOutboxItem>(path.join(dir, head.base), path.join(dir, head.name))
        // Renamed since the listing (held, released, settled): the directory is listed once more.
        if (item === undefined) moved = true
        else if (oldest === undefined || item.enqueuedAt < oldest) oldest = item.enqueuedAt
      }
      if (!moved || listing >= 2) return oldest
    }
  }

  /** A settled notification's file is gone: neither cached nor to be made durable. */
  private forget(dir: string, held: ItemName): void {
    this.files.forget(path.join(dir, held.base))
    this.durability.gone(path.join(dir, held.base))
  }

  /** Where a claim's notification is: its token names it. */
  private placeOf(claim: PushClaim): { dir: string; held: ItemName; more: boolean } {
    const [dirName, heldName, more, ...rest] = String(claim?.token).split("/")
    const held = heldName === undefined ? undefined : itemName(heldName)[0]
    if (rest.length > 0 || held === undefined || held.until === 0 || (more !== "0" && more !== "1") || dirName !== taskFileName(claim.item.taskId)) {
      throw new TypeError(`${STORE}.push: the claim's token is not one this store gave`)
    }
    return { dir: path.join(this.files.root, dirName), held, more: more === "1" }
  }

  /** Whether the claim still holds its notification (no claim after its lease took it over). */
  private async holds(claim: PushClaim): Promise<boolean> {
    const { dir, held } = this.placeOf(claim)
    return this.files.exists(path.join(dir, held.name))
  }

  /** Ends the claim's hold (unless another claim took it over since); the channel's next claim may be due. */
  private async release(claim: PushClaim): Promise<void> {
    const journaled = this.journals.journalClaim(claim)
    if (journaled !== undefined) {
      this.journals.release(journaled)
      this.index.markDue(journaled.dirName)
      return
    }
    const { dir, held } = this.placeOf(claim)
    if (await this.files.renamed(dir, held.name, held.base)) this.durability.moved(dir, held.base, held.base)
    this.index.markDue(path.basename(dir))
  }
}

function isJournaled(item: ListedItem): item is JournalItem {
  return "journal" in item
}

function attemptsOf(item: ListedItem): number {
  return isJournaled(item) ? item.item.attempts : item.attempts
}
