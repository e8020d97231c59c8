import { readFile } from "node:fs/promises"
import { uptime } from "node:os"
import path from "node:path"
import { pushPendingOf, withoutPushPending, type PendingPush } from "../../internals.js"
import type { A2ATask } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { newOutboxItem } from "../push-records.js"
import type { PushOutboxItem } from "../push-store.js"
import { parseStoredTask } from "../task-checks.js"
import { mapLimited } from "./list-index.js"
import { idFromFileName, taskFileName } from "./names.js"
import { parseJson, READERS, STORE, type PushFiles } from "./push-files.js"
import type { PushIndex } from "./push-index.js"
import { readJournal, journalName } from "./push-journal.js"
import { configFileName, currentConfigs, deadLetterKey, itemFileName, itemName } from "./push-names.js"

/**
 * Recovery after a crash of the machine. New notifications are not synced
 * when written (see push-durability.ts): the Task's save, which is, records
 * them. When `.push/.boot/id` names another boot of the machine than the
 * one the store opens under, the store's opening, before any save or claim,
 * writes again, synced, every recorded notification whose file is missing
 * or unreadable: sent again at worst, under its key. It passes over a
 * record older than its writer's mark (`.push/.boot/w-<store>`, how far
 * that store made its files durable) or than the last recovery (`since` in
 * the boot record) whose file is gone: it was sent.
 *
 * `.boot` is not a Task directory (no `.json`).
 */

const BOOT_DIR = ".boot"
const BOOT_FILE = "id"
const MARK = "w-"
/** A boot time reckoned from the clock (no boot id) moves when the clock is set: this close, it is the same boot. */
const BOOT_TIME_SLACK_S = 5

/** What a recovery needs of the store. */
export interface RecoveryHost {
  /** The stored Task's text, or undefined; without waiting for the store's opening (recovery is part of it). */
  storedText(id: string): Promise<string | undefined>
  report: ReportError
}

/**
 * Part of the store's opening, after the index's load and before its first
 * save or claim: when `.push/.boot/id` names another boot of the machine
 * (or none), writes again, synced, every notification a Task records as
 * pending whose file is missing or unreadable, but for one whose file is
 * gone and that its writer's mark (or the last recovery) says was durable
 * (it was sent); then records this boot. Errors are reported, and the next
 * opening tries again.
 */
export async function recover(files: PushFiles, index: PushIndex, host: RecoveryHost): Promise<void> {
  if (!index.rooted) return
  try {
    const bootDir = path.join(files.root, BOOT_DIR)
    const boot = await bootOfMachine()
    const read = Date.now()
    const recorded = parseJson<{ boot?: unknown; since?: unknown }>((await files.readText(path.join(bootDir, BOOT_FILE))) ?? "")
    if (typeof recorded?.boot === "string" && sameBoot(recorded.boot, boot)) return
    // A recovery leaves every record before it durable (its file read back, or written again, or sent): `since`.
    const since = typeof recorded?.since === "number" ? recorded.since : -Infinity
    const marks = new Map<string, number>()
    const markNames = (await files.names(bootDir)).filter((name) => name.startsWith(MARK))
    for (const name of markNames) {
      const at = Number(await files.readText(path.join(bootDir, name)))
      if (Number.isFinite(at)) marks.set(name.slice(MARK.length), at)
    }
    const durable = (record: PendingPush) => record.at < since || record.at < (marks.get(record.by) ?? -Infinity)
    let failed = false
    await mapLimited([...index.known], READERS, (dirName) =>
      recreateIn(files, index, host, dirName, durable).catch((err: unknown) => {
        failed = true
        host.report(err, "push")
      }),
    )
    if (failed) return
    await recordBoot(files, boot, read)
    // The new `since` covers what they did.
    for (const name of markNames) await files.remove(path.join(bootDir, name))
  } catch (err) {
    host.report(err, "push")
  }
}

/** Writes again, synced, the notifications this directory's Task records whose files a crash of the machine lost or left unreadable (see recover). */
async function recreateIn(files: PushFiles, index: PushIndex, host: RecoveryHost, dirName: string, durable: (record: PendingPush) => boolean): Promise<void> {
  const dir = path.join(files.root, dirName)
  const names = await files.names(dir)
  const configs = currentConfigs(names)
  if (configs.size === 0) return
  const taskId = idFromFileName(dirName) ?? (await files.taskIdIn(dir, names))
  if (taskId === undefined || taskFileName(taskId) !== dirName) return
  let task: A2ATask | undefined
  try {
    const text = await host.storedText(taskId)
    task = text === undefined ? undefined : parseStoredTask(text, STORE, `task file of ${JSON.stringify(taskId.slice(0, 128))}`)
  } catch (err) {
    // A file that could not be read is tried again by the next opening; one that is not a Task never will be.
    if ((err as { cause?: { code?: unknown } }).cause?.code !== undefined) throw err
    host.report(err, "push", taskId)
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
    const { open, done } = readJournal((await files.readText(path.join(dir, journal.name))) ?? "")
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
      if ((await files.readJson<PushOutboxItem>(file)) !== undefined) whole = true
      else await files.remove(file)
    }
    if (whole) continue
    const event = { ...record.event, task: record.event.task ?? (snapshot ??= withoutPushPending(task)) }
    const item = newOutboxItem(taskId, record.configId, record.seq, event, record.at, record.key)
    const name = itemFileName(record.seq, record.pid, 0, configFile)
    const itemText = JSON.stringify(item)
    await files.writeReplacing(dir, name, itemText)
    files.remember(path.join(dir, name), item, itemText)
    wrote = true
  }
  if (wrote) {
    await files.syncDir(dir)
    index.markDue(dirName)
  }
}

/** Records the boot of the machine the store runs under, and that every record before `since` is durable without it. */
async function recordBoot(files: PushFiles, boot: string, since: number): Promise<void> {
  const dir = path.join(files.root, BOOT_DIR)
  const made = await files.fs.mkdir(dir, { recursive: true })
  await files.writeReplacing(dir, BOOT_FILE, JSON.stringify({ boot, since }))
  await files.syncDir(dir)
  if (made !== undefined) await files.syncDir(files.root)
}

/** A new `.push` holds no notification: nothing before now needs recovering. */
export async function recordNewRoot(files: PushFiles): Promise<void> {
  await recordBoot(files, await bootOfMachine(), Date.now())
}

/** Records, durably, that the store `writer` made durable every notification file it wrote before `upTo` (its mark). */
export async function writeMark(files: PushFiles, writer: string, upTo: number): Promise<void> {
  const bootDir = path.join(files.root, BOOT_DIR)
  await files.writeReplacing(bootDir, MARK + writer, String(upTo))
  await files.syncDir(bootDir)
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
