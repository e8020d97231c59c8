import type { PushOutboxItem } from "../push-store.js"

/**
 * A push journal: one file per Task directory and writing store,
 * `j-<pid>-<writer>`, that the store appends its new notifications to
 * (a line `{"o":<item>,"c":<config file>}`) and, once each is sent, given up
 * on, written out as a file of its own or taken back, a line `{"a":<key>}`
 * (a sent one's waits for the journal's next append, a fraction of a
 * second at most).
 * Appending costs no new file and no removal: on a file system where each
 * of those is dear (ext4 without a journal checks every inode freed in the
 * last minute), a notification costs two appends instead of a file made,
 * renamed and removed.
 *
 * While its writer lives, a journal's notifications are its writer's to
 * send (they are held in its memory); other stores read the file only to
 * keep each channel's order, and to take a journal over once its writer is
 * dead: the taker renames it to `j-<pid>-<writer>~<taker pid>` (a rename is
 * atomic: of two takers only one finds the name), writes each notification
 * left as a file of its own, and removes it.
 */

const JOURNAL_NAME = /^j-(\d{1,15})-([\w-]{8})(?:~(\d{1,15}))?$/

export interface JournalName {
  /** As listed. */
  name: string
  /** The pid of the process that wrote it. */
  pid: number
  /** The writing store's name. */
  writer: string
  /** The pid of the process taking it over; undefined while it is its writer's. */
  taker?: number
}

export function journalFileName(pid: number, writer: string): string {
  return `j-${pid}-${writer}`
}

export function journalName(name: string): JournalName[] {
  const match = JOURNAL_NAME.exec(name)
  if (!match) return []
  return [{ name, pid: Number(match[1]), writer: match[2], taker: match[3] === undefined ? undefined : Number(match[3]) }]
}

export function takenJournalName(journal: JournalName, taker: number): string {
  return `${journalFileName(journal.pid, journal.writer)}~${taker}`
}

/** A notification a journal holds and has not marked done. */
export interface JournalEntry {
  item: PushOutboxItem
  /** Its config's file name (the channel it goes in). */
  configFile: string
}

/** The line that adds a notification. */
export function entryLine(entry: JournalEntry): string {
  return `{"o":${JSON.stringify(entry.item)},"c":${JSON.stringify(entry.configFile)}}\n`
}

/** The line that marks a notification done (sent, dead, written as a file of its own, taken back). */
export function doneLine(key: string): string {
  return `{"a":${JSON.stringify(key)}}\n`
}

/**
 * The notifications a journal's text holds and has not marked done, in the
 * order written, by key; and the keys it marked done. A line cut short (its
 * writer stopped mid-append, or a crash of the machine tore it) and
 * anything that is not a line of the journal's are passed over.
 */
export function readJournal(text: string): { open: Map<string, JournalEntry>; done: Set<string> } {
  const open = new Map<string, JournalEntry>()
  const done = new Set<string>()
  let start = 0
  for (let end = text.indexOf("\n"); end >= 0; start = end + 1, end = text.indexOf("\n", start)) {
    let line: { o?: PushOutboxItem; c?: unknown; a?: unknown }
    try {
      line = JSON.parse(text.slice(start, end)) as typeof line
    } catch {
      continue
    }
    if (typeof line?.a === "string") {
      open.delete(line.a)
      done.add(line.a)
    } else if (isItem(line?.o) && typeof line.c === "string" && !done.has(line.o.key)) {
      open.set(line.o.key, { item: line.o, configFile: line.c })
    }
  }
  return { open, done }
}

function isItem(value: unknown): value is PushOutboxItem {
  const item = value as PushOutboxItem
  return typeof item === "object" && item !== null && typeof item.key === "string" && typeof item.taskId === "string" && typeof item.configId === "string" && Number.isSafeInteger(item.seq)
}
