import { createHash } from "node:crypto"

/**
 * Maps a Task id to a file name inside the store's directory.
 *
 * - Plain ids (lowercase letters, digits, `-`, `_`) keep their own name:
 *   `abc-123` → `abc-123.json`.
 * - Every other id is base32-encoded (lowercase alphabet, so it stays distinct
 *   on case-insensitive file systems) behind a `~` that no plain id has:
 *   `a/b`, `a_b`, `Abc` and `abc` all get different names, and no name can
 *   leave the directory.
 * - Ids whose encoded name would pass the 255-byte name limit are named by
 *   their SHA-256 (`~~<hex>.json`); the id inside the file tells them apart.
 */
const PLAIN_ID = /^[a-z0-9_-]{1,200}$/
const BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
/** Longest encoded name body that leaves room for `~` and `.json` under 255 bytes. */
const MAX_ENCODED = 240
const MAX_NAME_BYTES = 255
const TMP_FILE_SUFFIX = ".tmp"
/** `<anything>.<pid>.<counter>.tmp`, as `tmpFileName` makes them. */
const TMP_NAME = /.\.(\d{1,15})\.\d{1,16}\.tmp$/

export const TASK_FILE_SUFFIX = ".json"

export function taskFileName(id: string): string {
  if (PLAIN_ID.test(id)) return id + TASK_FILE_SUFFIX
  const encoded = base32(Buffer.from(id, "utf8"))
  if (encoded.length <= MAX_ENCODED) return "~" + encoded + TASK_FILE_SUFFIX
  return "~~" + createHash("sha256").update(id, "utf8").digest("hex") + TASK_FILE_SUFFIX
}

/** The id a file name was made from, or `undefined` for hashed names (read the file) and foreign files. */
export function idFromFileName(name: string): string | undefined {
  if (!name.endsWith(TASK_FILE_SUFFIX)) return undefined
  const body = name.slice(0, -TASK_FILE_SUFFIX.length)
  if (PLAIN_ID.test(body)) return body
  if (body.startsWith("~") && !body.startsWith("~~")) return unbase32(body.slice(1))?.toString("utf8")
  return undefined
}

function base32(bytes: Buffer): string {
  let out = ""
  let bits = 0
  let value = 0
  for (const byte of bytes) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31]
  return out
}

function unbase32(text: string): Buffer | undefined {
  const bytes: number[] = []
  let bits = 0
  let value = 0
  for (const char of text) {
    const digit = BASE32.indexOf(char)
    if (digit < 0) return undefined
    value = ((value << 5) | digit) & 0xffff
    bits += 5
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 0xff)
      bits -= 8
    }
  }
  return Buffer.from(bytes)
}

/**
 * Where a save writes before its rename: `<taskfile>.<pid>.<counter>.tmp`.
 * It always ends in `.tmp`, so it can never be read as a Task. Task file
 * names are ASCII and may be 246 bytes long, so the task part is cut to keep
 * the whole name within 255 bytes; the pid and counter make it unique.
 */
export function tmpFileName(taskFile: string, pid: number, counter: number): string {
  const tail = `.${pid}.${counter}${TMP_FILE_SUFFIX}`
  return taskFile.slice(0, MAX_NAME_BYTES - tail.length) + tail
}

/** The pid in a name made by `tmpFileName`, or `undefined` for any other name. */
export function pidFromTmpFileName(name: string): number | undefined {
  const match = TMP_NAME.exec(name)
  if (!match) return undefined
  const pid = Number(match[1])
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined
}
