import { randomBytes } from "node:crypto"
import path from "node:path"
import { pushSeqOf, withoutPushPending, withPushRecord } from "../../internals.js"
import { isProcessAlive } from "../../process.js"
import type { A2ATask } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { assertPushConfig, newOutboxItem, padded, type SavedEvent } from "../push-records.js"
import type { PushClaim, PushConfigRecord, PushDeadLetter, PushEvent, PushStore } from "../push-store.js"
import { assertTaskId, parseStoredTask } from "../task-checks.js"
import { isMissing, type FileSystem } from "./file-system.js"
import { mapLimited } from "./list-index.js"
import { taskFileName } from "./names.js"
import { PushClaims } from "./push-claims.js"
import { PushDurability } from "./push-durability.js"
import { byId, PushFiles, READERS, STORE } from "./push-files.js"
import { PushIndex } from "./push-index.js"
import { entryLine } from "./push-journal.js"
import { JournalWriter, type OwnEntry } from "./push-journal-writer.js"
import { CONFIG, configFileName, configName, currentConfigs, DEAD, itemFileName, itemName } from "./push-names.js"
import { recover, recordNewRoot } from "./push-recovery.js"

/**
 * FileTaskStore's push capability, in `<dir>/.push/<taskfile>/`, one
 * directory per Task that has (or had) configs, made on the first config.
 * This module keeps the configs and writes a save's notifications; the rest
 * is in its parts (lib/stores/file/README.md maps them):
 *
 * - push-names.ts: the names of the files in a Task's push directory;
 * - push-files.ts: their reads and writes, and the cache of records read;
 * - push-index.ts: which Task directories there are, and which are due;
 * - push-durability.ts: how a notification is made durable cheaply (the
 *   Task's save records it), and the settle that makes its file durable;
 * - push-recovery.ts: the writing again, after a crash of the machine, of
 *   what it lost;
 * - push-journal.ts, push-journal-writer.ts: the journals a sending store
 *   appends its notifications to instead of writing a file for each;
 * - push-claims.ts: claims by rename, so that any number of stores, in any
 *   processes, share the directory; their settlement and dead letters.
 */

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

export class FilePushStore implements PushStore {
  readonly root: string
  /** This store's name in the records of the notifications it writes, in its journals' names and holds' tokens, and in its mark. */
  private readonly writer = randomBytes(6).toString("base64url")
  private readonly files: PushFiles
  private readonly index: PushIndex
  private readonly journals: JournalWriter
  private readonly durability: PushDurability
  private readonly claims: PushClaims

  constructor(private readonly host: FilePushHost) {
    this.files = new PushFiles(host.dir, host.fs)
    this.root = this.files.root
    this.index = new PushIndex(this.files)
    this.journals = new JournalWriter(this.files, this.index, this.writer, (id) => host.stored(id), host.report)
    this.durability = new PushDurability(this.files, this.journals, this.writer, host.report)
    this.claims = new PushClaims(this.files, this.index, this.journals, this.durability, this.writer, host)
  }

  /** Reads which Tasks have push directories, and watches for more; part of the store's opening. */
  load(): Promise<void> {
    return this.index.load()
  }

  /** Part of the store's opening, after load and before its first save or claim: see push-recovery.ts. */
  recover(): Promise<void> {
    return recover(this.files, this.index, this.host)
  }

  /** Makes durable the notifications this store wrote (see push-durability.ts); what close() calls. Never rejects. */
  settle(): Promise<void> {
    return this.durability.settle()
  }

  /** Stops the watch of `.push`, and the timer of settle (close() settles). */
  stop(): void {
    this.durability.stop()
    this.index.stop()
  }

  private taskDir(taskId: string): string {
    return path.join(this.root, taskFileName(taskId))
  }

  async putConfig(config: PushConfigRecord): Promise<void> {
    assertPushConfig(config, STORE)
    const text = JSON.stringify(config)
    const { files } = this
    await this.host.inOrder(config.taskId, async () => {
      await this.host.open()
      const dir = this.taskDir(config.taskId)
      const created = await files.fs.mkdir(dir, { recursive: true })
      // A new directory (and .push itself) is durable once its parent is synced.
      if (created !== undefined) {
        if (typeof created === "string" && path.resolve(created) === this.root) {
          await files.syncDir(this.host.dir)
          await recordNewRoot(files)
        }
        await files.syncDir(this.root)
      }
      this.index.known.add(path.basename(dir))
      this.index.watch()
      const configFile = configFileName(config.id)
      const before = (await files.names(dir)).flatMap(configName).filter((old) => old.configFile === configFile)
      const version = Math.max(Date.now() * 1000, ...before.map((old) => old.version + 1))
      const name = `${CONFIG}${padded(version)}-${randomBytes(6).toString("base64url")}-${configFile}`
      // The new version first: a crash between leaves both, and the newest counts.
      await files.writeReplacing(dir, name, text)
      files.remember(path.join(dir, name), config, text)
      for (const old of before) if (old.name !== name) await files.remove(path.join(dir, old.name))
      await files.syncDir(dir)
    })
  }

  async getConfig(taskId: string, id: string): Promise<PushConfigRecord | undefined> {
    assertTaskId(taskId)
    await this.host.open()
    const dir = this.taskDir(taskId)
    const name = currentConfigs(await this.files.names(dir)).get(configFileName(String(id)))
    const config = name === undefined ? undefined : await this.files.readJson<PushConfigRecord>(path.join(dir, name))
    return config?.id === id && config.taskId === taskId ? config : undefined
  }

  async listConfigs(taskId: string): Promise<PushConfigRecord[]> {
    assertTaskId(taskId)
    await this.host.open()
    const dir = this.taskDir(taskId)
    const configs: PushConfigRecord[] = []
    for (const name of currentConfigs(await this.files.names(dir)).values()) {
      const config = await this.files.readJson<PushConfigRecord>(path.join(dir, name))
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
      const names = await this.files.names(dir)
      // The config first: a crash midway leaves notifications of no config, which are never sent.
      for (const config of names.flatMap(configName)) if (config.configFile === configFile) await this.files.remove(path.join(dir, config.name))
      for (const item of names.flatMap(itemName)) if (item.configFile === configFile) await this.files.remove(path.join(dir, item.name))
      await this.journals.dropJournaled(path.basename(dir), configFile)
    })
  }

  saveWithEvent(task: A2ATask, ...events: PushEvent[]): Promise<number> {
    return this.host.saveWithEvent(task, events)
  }

  /**
   * For a save of Task `taskId` whose text is `text` (called in its write
   * order, the store open): undefined when the Task has no push directory
   * (the save goes on as it would without push); else the Task to save, with
   * the pushSeq of its last event and the record of its pending
   * notifications, the events' notifications written (unsynced, see
   * push-durability.ts), one seq each in order (none without configs or
   * events), and the notifications of saves that never landed removed.
   */
  async prepare(taskId: string, events: readonly SavedEvent[], text: string, now: number): Promise<PushPlan | undefined> {
    const dirName = taskFileName(taskId)
    if (!this.index.known.has(dirName)) return undefined
    return this.durability.preparingAt(now, () => this.prepareIn(dirName, taskId, events, text, now))
  }

  private async prepareIn(dirName: string, taskId: string, events: readonly SavedEvent[], text: string, now: number): Promise<PushPlan | undefined> {
    const { files, journals, durability } = this
    const dir = path.join(this.root, dirName)
    let names: string[]
    try {
      names = await files.fs.readdir(dir)
    } catch (err) {
      if (!isMissing(err)) throw err
      this.index.known.delete(dirName)
      return undefined
    }
    const storedText = await this.host.storedText(taskId)
    const stored = storedText === undefined ? undefined : parseStoredTask(storedText, STORE, `task file of ${JSON.stringify(taskId.slice(0, 128))}`)
    const storedSeq = pushSeqOf(stored)
    const items = names.flatMap(itemName)
    const journaled = await journals.journalItems(dirName, dir, names)
    // In this write order no other save of ours is under way: above the stored seq, ours are from saves that failed.
    const orphans = items.filter((item) => item.seq > storedSeq && (item.pid === process.pid || !isProcessAlive(item.pid)))
    for (const orphan of orphans) await files.remove(path.join(dir, orphan.name))
    const own = journals.journals.get(dirName)
    if (own !== undefined) await journals.finish(own, journaled.flatMap((item) => (item.own !== undefined && item.seq > storedSeq ? [item.key] : [])))
    const task = withoutPushPending(JSON.parse(text) as A2ATask)
    const earlier = await durability.carried(dir, items, journaled, stored, storedText?.length ?? 0)
    const configs = events.length === 0 ? [] : await files.configsIn(dir, names)
    if (configs.length === 0) return { task: withPushRecord(task, storedSeq, earlier), written: 0, undo: async () => {}, landed: () => {} }
    const first = Math.max(storedSeq, ...items.map((item) => item.seq), ...journaled.map((item) => item.seq)) + 1
    const journal = await journals.journalFor(dirName, now)
    const written: string[] = []
    const entries: OwnEntry[] = []
    const undo = async () => {
      for (const file of written) {
        durability.gone(file)
        await files.remove(file).catch(() => {})
      }
      if (journal !== undefined) await journals.finish(journal, entries.map((entry) => entry.item.key)).catch(() => {})
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
            await files.writeUnsynced(file, itemText)
            written.push(file)
            files.remember(file, item, itemText)
            durability.wroteUnsynced(file, dirName, name, now)
          }
          // The Task saved is left out of the record: it is the record's own.
          pending.push({ pid: process.pid, by: this.writer, key: item.key, configId: config.id, seq: item.seq, at: now, event: eventText === undefined ? kind : reported })
        }
      }
      if (journal !== undefined) {
        // One append for the save's notifications; a claim finds them once it is done (and their save landed).
        await journals.append(journal, entries.map(entryLine).join(""))
        for (const entry of entries) journal.entries.set(entry.item.key, entry)
      }
    } catch (err) {
      entries.length = 0
      await undo()
      throw err
    } finally {
      if (journal !== undefined) journal.appending--
    }
    durability.wrote(now)
    const seq = first + events.length - 1
    return { task: withPushRecord(task, seq, pending), written: written.length + entries.length, undo, landed: () => this.index.markDue(dirName, seq) }
  }

  /** Removes a deleted Task's push directory (configs, notifications, dead letters). */
  async removeTask(taskId: string): Promise<void> {
    const dirName = taskFileName(taskId)
    this.index.removed(dirName)
    this.journals.removeTask(dirName)
    await this.files.fs.rm(path.join(this.root, dirName), { force: true, recursive: true })
  }

  claim(instance: string, limit: number, leaseMs: number, now: number): Promise<PushClaim[]> {
    return this.claims.claim(instance, limit, leaseMs, now)
  }

  ack(claim: PushClaim): Promise<void> {
    return this.claims.ack(claim)
  }

  retryLater(claim: PushClaim, notBefore: number, error: string): Promise<void> {
    return this.claims.retryLater(claim, notBefore, error)
  }

  deadLetter(claim: PushClaim, reason: string, attempts?: number): Promise<void> {
    return this.claims.deadLetter(claim, reason, attempts)
  }

  /** The dead letters of every Task directory, newest first. */
  async listDeadLetters(limit: number): Promise<PushDeadLetter[]> {
    if (!(Number.isInteger(limit) && limit >= 0)) throw new RangeError(`${STORE}.push.listDeadLetters: limit should be a whole number >= 0`)
    await this.host.open()
    const found: Array<{ dir: string; name: string }> = []
    await mapLimited(await this.index.taskDirs(), READERS, async (dirName) => {
      const dir = path.join(this.root, dirName)
      for (const name of await this.files.names(dir)) if (name.startsWith(DEAD) && name.endsWith(".json")) found.push({ dir, name })
    })
    found.sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0))
    const letters: PushDeadLetter[] = []
    for (const { dir, name } of found) {
      if (letters.length >= limit) break
      const letter = await this.files.readJson<PushDeadLetter>(path.join(dir, name))
      if (letter !== undefined) letters.push(letter)
    }
    return letters
  }

  /** When the oldest notification still in the outbox was enqueued, as far as this store knows (see PushClaims.oldestPendingAt). */
  oldestPendingAt(): Promise<number | undefined> {
    return this.claims.oldestPendingAt()
  }
}

/** An event of another Task object than the one saved, from its text: without the list of pending notifications it may carry. */
function reportedEvent(text: string): PushEvent {
  const event = JSON.parse(text) as PushEvent
  return { ...event, task: withoutPushPending(event.task) }
}
