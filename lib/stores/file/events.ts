import path from "node:path"
import { BoundedCache } from "../../bounded-cache.js"
import type { JsonObject } from "../../types.js"
import type { ReportError } from "../background-errors.js"
import { assertAppend, type EventLog, type LoggedEvent } from "../../streams/event-log.js"
import { eventSweeper } from "../event-sweep.js"
import { mapLimited } from "./list-index.js"
import { TASK_FILE_SUFFIX, taskFileName, tmpFileName } from "./names.js"
import { isMissing, readText, statOf, writeNew, type FileSystem } from "./file-system.js"
import type { RetentionSweeper } from "../retention.js"
import { assertTaskId } from "../task-checks.js"
import { WriteOrder } from "../write-order.js"

/** What the event log needs of its FileTaskStore. */
export interface FileEventHost {
  readonly dir: string
  readonly fs: FileSystem
  readonly report: ReportError
  /** How long an ended Task's log is kept (checked by eventRetentionOf). */
  readonly retentionMs: number
  open(): Promise<void>
  /** Removes the tmp files a crash left in `dir`, by the store's rule (those of dead processes, or old). */
  removeAbandonedTmpFiles(dir: string): Promise<void>
}

const LOG = ".log"
const END = ".end"
/** Logs whose last position this process remembers, so an append costs a stat, not a read. */
const TAIL_CACHE_ENTRIES = 10_000
/** Ended logs a sweep removes side by side. */
const SWEEP_REMOVERS = 8

/** What this process knows of a log's end: the file's size, inode and mtime when it was last read or written, its last position, and whether it ends with a whole line. */
interface Tail {
  size: number | undefined
  ino: number | undefined
  mtimeMs: number
  last: number
  clean: boolean
}

/** A line kept by the reader's rule, with its text (to tell an append's own lines from another writer's). */
interface Line {
  position: number
  event: JsonObject
  text: string
}

const NO_LOG: Tail = { size: 0, ino: undefined, mtimeMs: 0, last: 0, clean: true }

let tmpCounter = 0

/**
 * FileTaskStore's event log (`store.events`), in `<dir>/.events`, made on
 * the first append or end:
 *
 * - `<name>.log`: a Task's events, one JSON line `{"p":<position>,"e":<event>}`
 *   each, appended (`<name>` is the Task's file name without `.json`, so odd,
 *   long and `..` ids are as safe as for the Tasks);
 * - `<name>.end`: made by the first `ended`, holding its time (ms since the
 *   epoch; its mtime if a crash left it empty). Any store's sweep, in any
 *   process, removes the log and then the marker once that time is
 *   `retentionMs` past, after a restart too.
 *
 * Appends are not fsynced: the log is a convenience for resuming streams,
 * and the Task's file holds the data. A crash may thus tear the last line,
 * or lose the last events. Reads parse the lines and skip one that is not
 * whole JSON (a torn one; an append after it starts on a line of its own),
 * and one whose position is not above the one kept before it: the first
 * writer of a position wins.
 *
 * Several stores, in several processes, may append to one log. Each append
 * (O_APPEND, through `FileSystem.appendFile`) lands whole after what was
 * there. To report the positions already held, a process remembers each
 * log's last position with the size (and inode) the file had then: when a
 * stat shows the same, nobody else wrote, and the append costs no read;
 * otherwise the log is read again. Two processes appending the same
 * position at the same moment both write it, and the reader keeps the one
 * that landed first; the other learns it lost when the file's size after
 * its append is not what its own write accounts for, which makes it read
 * the log and look. (A layer without `appendFile` rewrites the log whole,
 * and then two processes at once may lose one's events.)
 *
 * Appends, ends and removals of one log run one after another in this
 * process; reads do not wait for them.
 */
export class FileEventLog implements EventLog {
  readonly root: string
  private readonly order = new WriteOrder()
  private readonly tails = new BoundedCache<string, Tail>({ maxEntries: TAIL_CACHE_ENTRIES, maxBytes: Number.MAX_SAFE_INTEGER }, () => 1)
  private readonly sweeper: RetentionSweeper

  constructor(private readonly host: FileEventHost) {
    this.root = path.join(host.dir, ".events")
    this.sweeper = eventSweeper(host.retentionMs, (cutoff) => this.removeEndedBefore(cutoff), host.report)
  }

  /** Starts the sweeps of ended logs; part of the store's opening. */
  start(): void {
    this.sweeper.start()
  }

  /** Stops the sweeps, and resolves once the appends, ends and removals already called have landed (or failed). */
  async stop(): Promise<void> {
    await Promise.all([this.sweeper.stop(), this.order.idle()])
  }

  async append(taskId: string, events: readonly LoggedEvent[]): Promise<number[]> {
    assertAppend(taskId, events)
    // Serialized now: an event that is not JSON refuses the whole append, and a caller's later change does not reach the disk.
    const lines = events.map(({ position, event }) => `{"p":${position},"e":${JSON.stringify(event)}}`)
    const name = logName(taskId)
    return this.order.run(name, async () => {
      await this.host.open()
      const tail = (await this.scan(name)).tail
      const taken: number[] = []
      const fresh: number[] = []
      for (const [i, { position }] of events.entries()) {
        if (position <= tail.last) taken.push(position)
        else fresh.push(i)
      }
      if (fresh.length === 0) return taken
      // After a torn line, a line of its own.
      const data = (tail.clean ? "" : "\n") + fresh.map((i) => lines[i] + "\n").join("")
      const file = this.logFile(name)
      try {
        await this.write(file, data)
      } catch (err) {
        this.tails.delete(name)
        throw err
      }
      const last = events[fresh[fresh.length - 1]].position
      const after = await statOf(this.host.fs, file)
      if (tail.size !== undefined && after?.size === tail.size + Buffer.byteLength(data) && (tail.ino === undefined || after.ino === tail.ino)) {
        this.tails.set(name, { size: after.size, ino: after.ino, mtimeMs: after.mtimeMs, last, clean: true })
        return taken
      }
      // Another process wrote too (or the layer cannot say): the log, read again, says which positions stayed ours.
      this.tails.delete(name)
      const kept = new Map((await this.scan(name)).lines?.map((line) => [line.position, line.text]))
      for (const i of fresh) {
        const winner = kept.get(events[i].position)
        // No line at all: the log was removed since (its Task deleted), not taken by another writer.
        if (winner !== undefined && winner !== lines[i]) taken.push(events[i].position)
      }
      return taken.sort((a, b) => a - b)
    })
  }

  async read(taskId: string, after: number, limit: number): Promise<LoggedEvent[]> {
    assertTaskId(taskId)
    if (!(limit > 0)) return []
    await this.host.open()
    const text = await readText(this.host.fs, this.logFile(logName(taskId)))
    if (text === undefined) return []
    const found: LoggedEvent[] = []
    for (const { position, event } of linesOf(text)) {
      if (position <= after) continue
      found.push({ position, event })
      if (found.length >= limit) break
    }
    return found
  }

  async lastPosition(taskId: string): Promise<number> {
    assertTaskId(taskId)
    const name = logName(taskId)
    return this.order.run(name, async () => {
      await this.host.open()
      return (await this.scan(name)).tail.last
    })
  }

  async ended(taskId: string): Promise<void> {
    assertTaskId(taskId)
    const name = logName(taskId)
    await this.order.run(name, async () => {
      await this.host.open()
      try {
        await this.inRoot(() => writeNew(this.host.fs, this.endFile(name), String(Date.now()), { durable: false }))
      } catch (err) {
        // Ended before: the first end counts.
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err
      }
    })
  }

  /** Removes a deleted (or expired) Task's log and its end marker. */
  removeTask(taskId: string): Promise<void> {
    return this.remove(logName(taskId))
  }

  /** The log first: a crash between leaves a marker of no log, which the next sweep removes; never a log nothing removes. */
  private remove(name: string): Promise<void> {
    return this.order.run(name, async () => {
      this.tails.delete(name)
      await this.host.fs.rm(this.logFile(name), { force: true })
      await this.host.fs.rm(this.endFile(name), { force: true })
    })
  }

  /** The sweep: removes the logs that ended at or before `cutoff` (ms since the epoch), and tmp files a crash left. */
  private async removeEndedBefore(cutoff: number): Promise<number> {
    let names: string[]
    try {
      names = await this.host.fs.readdir(this.root)
    } catch (err) {
      if (isMissing(err)) return 0
      throw err
    }
    await this.host.removeAbandonedTmpFiles(this.root)
    const ends = names.filter((file) => file.endsWith(END)).map((file) => file.slice(0, -END.length))
    const removed = await mapLimited(ends, SWEEP_REMOVERS, async (name) => {
      const endedAt = await this.endTime(name)
      if (endedAt === undefined || endedAt > cutoff) return false
      await this.remove(name)
      return true
    })
    return removed.filter(Boolean).length
  }

  /** When the log ended, by its marker: the time it holds, or its mtime when a crash left it empty; undefined when it is gone. */
  private async endTime(name: string): Promise<number | undefined> {
    const file = this.endFile(name)
    const text = await readText(this.host.fs, file)
    if (text === undefined) return undefined
    const time = Number(text)
    if (text !== "" && Number.isSafeInteger(time)) return time
    return (await statOf(this.host.fs, file))?.mtimeMs
  }

  /**
   * The log's tail, from what this process remembers while a stat shows the
   * file as it left it; else read, with its lines (`lines`) by the reader's rule.
   */
  private async scan(name: string): Promise<{ tail: Tail; lines?: Line[] }> {
    const file = this.logFile(name)
    const stats = await statOf(this.host.fs, file)
    if (stats === undefined) {
      this.tails.delete(name)
      return { tail: NO_LOG }
    }
    const cached = this.tails.get(name)
    if (cached !== undefined && stats.size !== undefined && cached.size === stats.size && cached.ino === stats.ino && cached.mtimeMs === stats.mtimeMs) {
      return { tail: cached }
    }
    const text = await readText(this.host.fs, file)
    if (text === undefined) {
      this.tails.delete(name)
      return { tail: NO_LOG }
    }
    const lines = [...linesOf(text)]
    // The size of the stat before the read: a write landing in between makes the next stat differ, and the log is read again.
    const tail: Tail = { size: stats.size, ino: stats.ino, mtimeMs: stats.mtimeMs, last: lines.at(-1)?.position ?? 0, clean: text === "" || text.endsWith("\n") }
    if (stats.size !== undefined) this.tails.set(name, tail)
    return { tail, lines }
  }

  /** Adds `data` at the end of the log, making `.events` when it is missing. */
  private async write(file: string, data: string): Promise<void> {
    const { fs } = this.host
    if (fs.appendFile !== undefined) {
      const append = fs.appendFile.bind(fs)
      return this.inRoot(() => append(file, data, "utf8"))
    }
    // A layer without appendFile: the log rewritten whole, a tmp file renamed over it.
    const text = (await readText(this.host.fs, file)) ?? ""
    const tmp = path.join(this.root, tmpFileName(path.basename(file), process.pid, ++tmpCounter))
    try {
      await this.inRoot(() => writeNew(fs, tmp, text + data, { durable: false }))
      await fs.rename(tmp, file)
    } catch (err) {
      await fs.rm(tmp, { force: true }).catch(() => {})
      throw err
    }
  }

  /** `write()`, and once more after making `.events` if it failed for want of it. */
  private async inRoot(write: () => Promise<void>): Promise<void> {
    try {
      await write()
    } catch (err) {
      if (!isMissing(err)) throw err
      await this.host.fs.mkdir(this.root, { recursive: true })
      await write()
    }
  }

  private logFile(name: string): string {
    return path.join(this.root, name + LOG)
  }

  private endFile(name: string): string {
    return path.join(this.root, name + END)
  }
}

/** A Task's log name: its file name without `.json` (no Task file name has another dot, so `.log` and `.end` never meet another id's). */
function logName(taskId: string): string {
  return taskFileName(taskId).slice(0, -TASK_FILE_SUFFIX.length)
}

/**
 * The lines of a log that count, in order: whole JSON of a position and an
 * object event, each above the last one kept (the first writer of a
 * position wins). A torn line (a crash mid-append) is not whole, and is skipped.
 */
function* linesOf(text: string): Generator<Line> {
  let last = 0
  for (const line of text.split("\n")) {
    if (line === "") continue
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch {
      continue
    }
    if (typeof parsed !== "object" || parsed === null) continue
    const { p, e } = parsed as { p?: unknown; e?: unknown }
    if (!(Number.isSafeInteger(p) && (p as number) > last) || typeof e !== "object" || e === null || Array.isArray(e)) continue
    last = p as number
    yield { position: last, event: e as JsonObject, text: line }
  }
}
