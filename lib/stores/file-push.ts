import { createHash, randomUUID } from "node:crypto"
import path from "node:path"
import { pushSeqOf } from "../internals.js"
import { isProcessAlive } from "../process.js"
import type { A2ATask } from "../types.js"
import type { ReportError } from "./background-errors.js"
import { idFromFileName, taskFileName, tmpFileName } from "./file-names.js"
import type { FileSystem } from "./file-system.js"
import { ABANDONED_PUSH_ITEM_MS, assertClaimArgs, assertPushConfig, deadLetterOf, newOutboxItem, padded, retried } from "./push-records.js"
import type { PushClaim, PushConfigRecord, PushDeadLetter, PushEvent, PushOutboxItem, PushStore } from "./push-store.js"
import { assertTaskId } from "./task-checks.js"

/**
 * FileTaskStore's push capability, in `<dir>/.push/<taskfile>/`, one
 * directory per Task that has (or had) configs, made on the first config:
 *
 * - `c-<configfile>`: a config;
 * - `o-<seq>-<pid>-<configfile>`: a notification to that config, written
 *   by process `pid` before the Task save it reports;
 * - `l-<generation>-<configfile>`: the lease on that config's channel;
 * - `d-<deadAt>-<key>.json`: a dead letter.
 *
 * Every file is written whole and fsynced before it counts (a rename of a
 * synced tmp file, or "wx" with O_DSYNC for the notifications), and the
 * directory is fsynced after. The Task's save is the commit marker: the
 * notifications of a save are written and fsynced first, then the Task is
 * saved carrying `pushSeq` (its internals) = their seq. A notification is
 * deliverable only once the stored Task's pushSeq reached it; one above it
 * whose writer died (or is older than a save can take) is from a save that
 * never landed, and is removed by the next save of the Task or by a claim.
 *
 * Leases: a claim creates the next generation's lock file of the channel
 * with "wx" (so of two processes only one gets it), holding the instance,
 * a token and the lease's end; a lock past its end may be superseded by the
 * next generation. Any number of FileTaskStores, in any processes, may share
 * the directory.
 *
 * A Task without a push directory costs a save nothing: which Tasks have
 * one is known in memory (read at open, kept by this process's changes, a
 * watch of `.push` and every claim's listing).
 */

const CONFIG = "c-"
const ITEM = "o-"
const LOCK = "l-"
const DEAD = "d-"
const ITEM_NAME = /^o-(\d{16})-(\d{1,15})-(.+\.json)$/
const LOCK_NAME = /^l-(\d{16})-(.+\.json)$/
/** Config ids past this many characters of file name are named by their hash (the id inside tells them apart). */
const MAX_CONFIG_NAME = 160
/** Task directories a claim or dead-letter listing reads side by side. */
const READERS = 8

/** What the push files need of their FileTaskStore. */
export interface FilePushHost {
  readonly dir: string
  readonly fs: FileSystem
  readonly report: ReportError
  open(): Promise<void>
  /** The stored Task, or undefined. */
  stored(id: string): Promise<A2ATask | undefined>
  /** Runs `write` in the Task's write order (after its saves and deletes called before). */
  inOrder<T>(id: string, write: () => Promise<T>): Promise<T>
  /** The store's save, with the events' notifications (it calls `prepare` inside the write order). */
  saveWithEvent(task: A2ATask, events: readonly PushEvent[]): Promise<void>
}

/** What a save does about push: the pushSeq the Task carries, and how to take its notifications back if the save fails. */
export interface PushPlan {
  seq: number
  undo(): Promise<void>
}

interface Lock {
  instance: string
  token: string
  until: number
}

interface ItemName {
  name: string
  seq: number
  pid: number
  configFile: string
}

let tmpCounter = 0

const STORE = "FileTaskStore"

export class FilePushStore implements PushStore {
  readonly root: string
  /** The names of the Task directories under `.push`, as far as this process knows. */
  private readonly known = new Set<string>()
  private watcher: { close(): void } | undefined

  constructor(private readonly host: FilePushHost) {
    this.root = path.join(host.dir, ".push")
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
    for (const name of names) this.known.add(name)
    this.watch()
  }

  /** Stops the watch of `.push`. */
  stop(): void {
    this.watcher?.close()
    this.watcher = undefined
  }

  private watch(): void {
    if (this.watcher !== undefined || this.host.fs.watchDirectory === undefined) return
    try {
      this.watcher = this.host.fs.watchDirectory(
        this.root,
        (name) => {
          if (name !== undefined) this.known.add(name)
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
        if (typeof created === "string" && path.resolve(created) === this.root) await this.syncDir(this.host.dir)
        await this.syncDir(this.root)
      }
      this.known.add(path.basename(dir))
      this.watch()
      await this.writeReplacing(dir, CONFIG + configFileName(config.id), text)
      await this.syncDir(dir)
    })
  }

  async getConfig(taskId: string, id: string): Promise<PushConfigRecord | undefined> {
    assertTaskId(taskId)
    await this.host.open()
    const config = await this.readJson<PushConfigRecord>(path.join(this.taskDir(taskId), CONFIG + configFileName(String(id))))
    return config?.id === id && config.taskId === taskId ? config : undefined
  }

  async listConfigs(taskId: string): Promise<PushConfigRecord[]> {
    assertTaskId(taskId)
    await this.host.open()
    return (await this.configsIn(this.taskDir(taskId), await this.names(this.taskDir(taskId)))).filter((config) => config.taskId === taskId)
  }

  async deleteConfig(taskId: string, id: string): Promise<void> {
    assertTaskId(taskId)
    const configFile = configFileName(String(id))
    await this.host.inOrder(taskId, async () => {
      await this.host.open()
      const dir = this.taskDir(taskId)
      const names = await this.names(dir)
      // The config first: a crash midway leaves notifications of no config, which are never sent.
      await this.remove(path.join(dir, CONFIG + configFile))
      for (const name of names) {
        const item = ITEM_NAME.exec(name)
        const lock = LOCK_NAME.exec(name)
        if (item?.[3] === configFile || lock?.[2] === configFile) await this.remove(path.join(dir, name))
      }
    })
  }

  saveWithEvent(task: A2ATask, ...events: PushEvent[]): Promise<void> {
    return this.host.saveWithEvent(task, events)
  }

  /**
   * For a save of Task `taskId` (called in its write order, the store open):
   * undefined when the Task has no push directory (the save goes on as it
   * would without push); else the pushSeq to save the Task with (its last
   * event's), the events' notifications written and synced, one seq each in
   * order (none without configs or events), and
   * the notifications of saves that never landed removed.
   */
  async prepare(taskId: string, events: readonly string[], now: number): Promise<PushPlan | undefined> {
    const dirName = taskFileName(taskId)
    if (!this.known.has(dirName)) return undefined
    const dir = path.join(this.root, dirName)
    let names: string[]
    try {
      names = await this.host.fs.readdir(dir)
    } catch (err) {
      if (!isMissing(err)) throw err
      this.known.delete(dirName)
      return undefined
    }
    const stored = pushSeqOf((await this.host.stored(taskId)) ?? EMPTY)
    const items = names.flatMap(itemName)
    // In this write order no other save of ours is under way: above the stored seq, ours are from saves that failed.
    const orphans = items.filter((item) => item.seq > stored && (item.pid === process.pid || !isProcessAlive(item.pid)))
    for (const orphan of orphans) await this.remove(path.join(dir, orphan.name))
    const configs = events.length === 0 ? [] : await this.configsIn(dir, names)
    if (configs.length === 0) return { seq: stored, undo: async () => {} }
    const first = Math.max(stored, ...items.map((item) => item.seq)) + 1
    const written: string[] = []
    const undo = async () => {
      for (const file of written) await this.remove(file).catch(() => {})
    }
    try {
      for (const [i, event] of events.entries()) {
        for (const config of configs) {
          const item = newOutboxItem(taskId, config.id, first + i, JSON.parse(event) as PushEvent, now)
          const file = path.join(dir, `${ITEM}${padded(first + i)}-${process.pid}-${configFileName(config.id)}`)
          await this.writeNew(file, JSON.stringify(item))
          written.push(file)
        }
      }
      await this.syncDir(dir)
    } catch (err) {
      await undo()
      throw err
    }
    return { seq: first + events.length - 1, undo }
  }

  /** Removes a deleted Task's push directory (configs, notifications, dead letters). */
  async removeTask(taskId: string): Promise<void> {
    const dirName = taskFileName(taskId)
    this.known.delete(dirName)
    await this.host.fs.rm(path.join(this.root, dirName), { force: true, recursive: true })
  }

  async claim(instance: string, limit: number, leaseMs: number, now: number): Promise<PushClaim[]> {
    assertClaimArgs(STORE, instance, limit, leaseMs, now)
    await this.host.open()
    const dirs = await this.taskDirs()
    const claims: PushClaim[] = []
    await forEachLimited(dirs, READERS, async (dirName) => {
      if (claims.length >= limit) return
      try {
        for (const claim of await this.claimIn(dirName, instance, limit, leaseMs, now, () => claims.length < limit)) {
          if (claims.length < limit) claims.push(claim)
          else await this.release(claim)
        }
      } catch (err) {
        this.host.report(err, "push")
      }
    })
    return claims.sort((a, b) => a.item.seq - b.item.seq)
  }

  /** The heads of the channels of one Task's directory that are deliverable, due and not held, each now held by `instance`. */
  private async claimIn(dirName: string, instance: string, limit: number, leaseMs: number, now: number, room: () => boolean): Promise<PushClaim[]> {
    const dir = path.join(this.root, dirName)
    const names = await this.names(dir)
    const items = names.flatMap(itemName).sort((a, b) => a.seq - b.seq)
    if (items.length === 0) return []
    const taskId = idFromFileName(dirName) ?? (await this.taskIdIn(dir, names))
    if (taskId === undefined || taskFileName(taskId) !== dirName) return []
    const committed = pushSeqOf((await this.host.stored(taskId)) ?? EMPTY)
    const heads = new Map<string, ItemName>()
    for (const item of items) if (!heads.has(item.configFile)) heads.set(item.configFile, item)
    const claims: PushClaim[] = []
    for (const head of heads.values()) {
      if (!room() || claims.length >= limit) break
      const file = path.join(dir, head.name)
      if (head.seq > committed) {
        // Its save has not landed: under way, or never to land (its writer died, or it is older than any save takes).
        if (!isProcessAlive(head.pid) || now - (await this.mtime(file)) > ABANDONED_PUSH_ITEM_MS) await this.remove(file)
        continue
      }
      const item = await this.readJson<PushOutboxItem>(file)
      if (item === undefined || item.notBefore > now) continue
      const lock = await this.takeLock(dir, names, head.configFile, instance, leaseMs, now)
      if (lock === undefined) continue
      // Read again under the lock: the holder before may have settled it meanwhile.
      const current = await this.readJson<PushOutboxItem>(file)
      const config = await this.readJson<PushConfigRecord>(path.join(dir, CONFIG + head.configFile))
      const claim = { item: current ?? item, config: config!, token: `${dirName}/${head.name}/${lock.name}/${lock.token}` }
      if (current === undefined || current.notBefore > now || config === undefined) {
        await this.release(claim)
        continue
      }
      claims.push(claim)
    }
    return claims
  }

  /** Creates the channel's next lock if the current one (if any) has ended; undefined when it is held, or another process got there first. */
  private async takeLock(dir: string, names: string[], configFile: string, instance: string, leaseMs: number, now: number): Promise<{ name: string; token: string } | undefined> {
    const locks = names.flatMap((name) => {
      const match = LOCK_NAME.exec(name)
      return match?.[2] === configFile ? [{ name, generation: Number(match[1]) }] : []
    })
    const current = locks.sort((a, b) => b.generation - a.generation)[0]
    if (current !== undefined) {
      const lock = await this.readJson<Lock>(path.join(dir, current.name))
      // A lock not yet written (or unreadable) is held, unless it is older than any claim takes.
      if (lock === undefined ? now - (await this.mtime(path.join(dir, current.name))) < ABANDONED_PUSH_ITEM_MS : lock.until > now) return undefined
    }
    const name = `${LOCK}${padded((current?.generation ?? 0) + 1)}-${configFile}`
    const token = randomUUID()
    if (!(await this.createWhole(dir, name, JSON.stringify({ instance, token, until: now + leaseMs } satisfies Lock)))) return undefined
    for (const old of locks) await this.remove(path.join(dir, old.name))
    return { name, token }
  }

  async ack(claim: PushClaim): Promise<void> {
    const { dir, item } = this.placeOf(claim)
    // Delivered is delivered, whoever holds the lease now.
    await this.remove(path.join(dir, item))
    await this.release(claim)
  }

  async retryLater(claim: PushClaim, notBefore: number, error: string): Promise<void> {
    const { dir, item } = this.placeOf(claim)
    if (!(await this.holds(claim))) return
    await this.writeReplacing(dir, item, JSON.stringify(retried(claim.item, notBefore, String(error))))
    await this.release(claim)
  }

  async deadLetter(claim: PushClaim, reason: string): Promise<void> {
    const { dir, item } = this.placeOf(claim)
    if (!(await this.holds(claim))) return
    const dead = deadLetterOf(claim.item, String(reason), Date.now())
    await this.writeReplacing(dir, `${DEAD}${padded(dead.deadAt)}-${dead.key}.json`, JSON.stringify(dead))
    await this.syncDir(dir)
    await this.remove(path.join(dir, item))
    await this.release(claim)
  }

  async listDeadLetters(limit: number): Promise<PushDeadLetter[]> {
    if (!(Number.isInteger(limit) && limit >= 0)) throw new RangeError(`${STORE}.push.listDeadLetters: limit should be a whole number >= 0`)
    await this.host.open()
    const found: Array<{ dir: string; name: string }> = []
    await forEachLimited(await this.taskDirs(), READERS, async (dirName) => {
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

  /** Where a claim's files are: its token names them. */
  private placeOf(claim: PushClaim): { dir: string; item: string; lock: string; token: string } {
    const [dirName, item, lock, token, ...rest] = String(claim?.token).split("/")
    if (rest.length > 0 || token === undefined || dirName !== taskFileName(claim.item.taskId) || !ITEM_NAME.test(item) || !LOCK_NAME.test(lock)) {
      throw new TypeError(`${STORE}.push: the claim's token is not one this store gave`)
    }
    return { dir: path.join(this.root, dirName), item, lock, token }
  }

  /** Whether the claim's lock is still the channel's, with its token. */
  private async holds(claim: PushClaim): Promise<boolean> {
    const { dir, lock, token } = this.placeOf(claim)
    return (await this.readJson<Lock>(path.join(dir, lock)))?.token === token
  }

  /** Ends the claim's lease, unless another instance holds the channel by now. */
  private async release(claim: PushClaim): Promise<void> {
    const { dir, lock } = this.placeOf(claim)
    if (await this.holds(claim)) await this.remove(path.join(dir, lock))
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
    const names = await this.names(this.root)
    for (const name of names) this.known.add(name)
    if (names.length > 0) this.watch()
    return names
  }

  private async configsIn(dir: string, names: string[]): Promise<PushConfigRecord[]> {
    const configs: PushConfigRecord[] = []
    for (const name of names) {
      if (!name.startsWith(CONFIG) || !name.endsWith(".json")) continue
      const config = await this.readJson<PushConfigRecord>(path.join(dir, name))
      if (config !== undefined) configs.push(config)
    }
    return configs.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
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
    let text: string
    try {
      text = await this.host.fs.readFile(file, "utf8")
    } catch (err) {
      if (isMissing(err)) return undefined
      throw new Error(`${STORE} could not read ${file}: ${(err as Error).message}`, { cause: err })
    }
    try {
      return JSON.parse(text) as T
    } catch {
      return undefined
    }
  }

  private async mtime(file: string): Promise<number> {
    try {
      return (await this.host.fs.stat(file)).mtimeMs
    } catch {
      return 0
    }
  }

  /** Creates `file` with `text`, durably (O_DSYNC); EEXIST when it exists. */
  private async writeNew(file: string, text: string): Promise<void> {
    const handle = await this.host.fs.open(file, "wx")
    try {
      await handle.writeFile(text, "utf8")
      await handle.sync()
    } finally {
      await handle.close()
    }
  }

  /**
   * Creates `name` in `dir` holding `text`, whole or not at all: false when
   * it exists. Written to a tmp file and linked into place (a link never
   * replaces), so a process killed mid-way never leaves an empty lock that
   * others would take as held; a file system layer without link creates it
   * with "wx" and writes it.
   */
  private async createWhole(dir: string, name: string, text: string): Promise<boolean> {
    const file = path.join(dir, name)
    const files = this.host.fs
    try {
      if (files.link === undefined) {
        await this.writeNew(file, text)
        return true
      }
      const tmp = path.join(dir, tmpFileName(name, process.pid, ++tmpCounter))
      await this.writeNew(tmp, text)
      try {
        await files.link(tmp, file)
      } finally {
        await this.remove(tmp)
      }
      return true
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") return false
      throw err
    }
  }

  /** Replaces `name` in `dir` with `text` whole: a synced tmp file renamed over it (the directory is synced by the caller when it matters). */
  private async writeReplacing(dir: string, name: string, text: string): Promise<void> {
    const tmp = path.join(dir, tmpFileName(name, process.pid, ++tmpCounter))
    try {
      await this.writeNew(tmp, text)
      await this.host.fs.rename(tmp, path.join(dir, name))
    } catch (err) {
      await this.host.fs.rm(tmp, { force: true }).catch(() => {})
      throw err
    }
  }

  private async remove(file: string): Promise<void> {
    await this.host.fs.rm(file, { force: true })
  }

  private async syncDir(dir: string): Promise<void> {
    const handle = await this.host.fs.open(dir, "r")
    try {
      await handle.sync()
    } finally {
      await handle.close()
    }
  }
}

const EMPTY = { id: "", status: { state: "submitted" } } as unknown as A2ATask

function itemName(name: string): ItemName[] {
  const match = ITEM_NAME.exec(name)
  return match ? [{ name, seq: Number(match[1]), pid: Number(match[2]), configFile: match[3] }] : []
}

/** A config id's file name: the Task-file encoding, or its hash when that would be long. */
function configFileName(id: string): string {
  const name = taskFileName(id)
  return name.length <= MAX_CONFIG_NAME ? name : "~~" + createHash("sha256").update(id, "utf8").digest("hex") + ".json"
}

function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code === "ENOENT"
}

async function forEachLimited<T>(items: T[], limit: number, each: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async () => {
    while (next < items.length) await each(items[next++])
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
}
