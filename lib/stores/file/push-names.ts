import { createHash } from "node:crypto"
import { padded } from "../push-records.js"
import { TASK_FILE_SUFFIX, taskFileName } from "./names.js"

/**
 * The names of the files in a Task's push directory, `<dir>/.push/<taskfile>/`:
 *
 * - `c-<version>-<random>-<configfile>`: a config; a put writes the next
 *   version and removes the one before (the newest counts, the name
 *   breaking a tie);
 * - `o-<seq>-<pid>-<attempts>-<configfile>`: a notification to that config,
 *   written by process `pid` before the Task save it reports; a failed
 *   attempt writes it anew under the next name, so a name always holds the
 *   same notification (and a claim reads it once); while held (claimed, or
 *   waiting for its retry) its name ends in `~<until>~<token>`;
 * - `j-<pid>-<writer>`: the journal of a store that sends (see
 *   push-journal.ts and push-journal-writer.ts);
 * - `d-<deadAt>-<key>.json`: a dead letter.
 */

export const CONFIG = "c-"
export const ITEM = "o-"
export const DEAD = "d-"
/** seq, pid, attempts, config file, and while held: until, token. */
const ITEM_NAME = /^o-(\d{16})-(\d{1,15})-(\d{1,9})-(.+\.json)(?:~(\d{16})~([\w-]{1,16}))?$/
/** The latest time a name holds: 16 digits. */
const MAX_NAMED_TIME = Number.MAX_SAFE_INTEGER
/** The token of a hold that waits for a retry's time (no claim holds it). */
export const WAITING = "wait"
/** version, a random part (two processes putting one config in the same millisecond name theirs apart), config file. */
const CONFIG_NAME = /^c-(\d{16})-[\w-]{8}-(.+\.json)$/
/** Config ids past this many characters of file name are named by their hash (the id inside tells them apart). */
const MAX_CONFIG_NAME = 160

/** A notification's file name, read. */
export interface ItemName {
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

/** A Task's directory under `.push`, not the boot record's (nor a tmp file). */
export function isTaskDir(name: string): boolean {
  return name.endsWith(TASK_FILE_SUFFIX)
}

export function configName(name: string): Array<{ name: string; version: number; configFile: string }> {
  const match = CONFIG_NAME.exec(name)
  return match ? [{ name, version: Number(match[1]), configFile: match[2] }] : []
}

/** Each config's newest file name, by config file. */
export function currentConfigs(names: readonly string[]): Map<string, string> {
  const newest = new Map<string, { name: string; version: number }>()
  for (const config of names.flatMap(configName)) {
    const held = newest.get(config.configFile)
    if (held === undefined || held.version < config.version || (held.version === config.version && held.name < config.name)) newest.set(config.configFile, config)
  }
  return new Map([...newest].map(([configFile, { name }]) => [configFile, name]))
}

/** A config id's file name: the Task-file encoding, or its hash when that would be long. */
export function configFileName(id: string): string {
  const name = taskFileName(id)
  return name.length <= MAX_CONFIG_NAME ? name : "~~" + createHash("sha256").update(id, "utf8").digest("hex") + ".json"
}

/** A time (ms since the epoch) as a name holds it: whole, 16 digits, rounded up (a hold never ends before its time). */
export function timeInName(ms: number): string {
  return padded(Math.min(MAX_NAMED_TIME, Math.max(0, Math.ceil(ms))))
}

export function itemFileName(seq: number, pid: number, attempts: number, configFile: string): string {
  return `${ITEM}${padded(seq)}-${pid}-${attempts}-${configFile}`
}

/** A notification's name while held until `until` by the hold `token`. */
export function heldName(base: string, until: number, token: string): string {
  return `${base}~${timeInName(until)}~${token}`
}

export function itemName(name: string): ItemName[] {
  const match = ITEM_NAME.exec(name)
  if (!match) return []
  const [, seq, pid, attempts, configFile, until] = match
  // A held name is its base, "~", 16 digits, "~" and the token.
  const base = until === undefined ? name : name.slice(0, name.length - until.length - match[6].length - 2)
  return [{ name, base, seq: Number(seq), pid: Number(pid), attempts: Number(attempts), configFile, until: until === undefined ? 0 : Number(until) }]
}

export function deadLetterFileName(deadAt: number, key: string): string {
  return `${DEAD}${padded(deadAt)}-${key}.json`
}

/** The key of a dead letter's file name (`d-<deadAt>-<key>.json`). */
export function deadLetterKey(name: string): string[] {
  const match = /^d-\d{16}-(.+)\.json$/.exec(name)
  return match ? [match[1]] : []
}
