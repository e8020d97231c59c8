/** The file operations a FileTaskStore uses: node:fs/promises fits, and so does a wrapper that records or fails them. */
export interface FileSystem {
  /** Creates the store's directory and any missing parents; an existing directory is not an error. */
  mkdir(path: string, options: { recursive: true }): Promise<unknown>
  /** "wx": a new file (EEXIST when it exists), whose writes the store makes durable (the default opens it with O_DSYNC); "r": for an fsync. */
  open(path: string, flags: "wx" | "r"): Promise<FileSystemHandle>
  /**
   * Optional: creates the file at `path` holding `data`, failing with
   * EEXIST when it exists, without making it durable (no O_DSYNC, no
   * fsync): the push notifications, which their Task's save records until
   * they are sent. Without it, they are written as through `open("wx")`,
   * synced.
   */
  createUnsynced?(path: string, data: string, encoding: "utf8"): Promise<void>
  rename(from: string, to: string): Promise<void>
  /** `recursive` only for the push directory of a deleted Task (`<dir>/.push/<taskfile>`). */
  rm(path: string, options: { force: true; recursive?: true }): Promise<void>
  readFile(path: string, encoding: "utf8"): Promise<string>
  readdir(path: string): Promise<string[]>
  /**
   * Optional: makes `to` another name of the file at `from`, failing with
   * EEXIST when `to` exists (never replacing it). Retention uses it to put
   * back a file another process saved while the sweep moved it aside,
   * without overwriting one saved after that; without it, a rename does.
   */
  link?(from: string, to: string): Promise<void>
  /**
   * Optional: adds `data` at the end of the file at `path` (O_APPEND: each
   * call lands whole after what any process wrote before it), creating the
   * file when it is missing; ENOENT when its directory is. The event log
   * appends with it; without it, a log is rewritten whole (a tmp file
   * renamed over it), and two processes appending to one log at once may
   * then lose one's events.
   */
  appendFile?(path: string, data: string, encoding: "utf8"): Promise<void>
  /** `ino`, `size` and `ctimeMs` let get() and list() reuse a file they read before; a layer without them just reads every time. */
  stat(path: string): Promise<FileStat>
  /**
   * Optional: calls `onChange(name)` soon after a file in directory `dir` is
   * created, replaced, changed or removed (`undefined` when it cannot say
   * which), and `onError` when watching stops; returns what stops it; throws
   * when the directory cannot be watched. The default is fs.watch. Without
   * it, list() finds other processes' changes by a stat of every Task file
   * whenever the directory's times moved.
   */
  watchDirectory?(dir: string, onChange: (name: string | undefined) => void, onError: (err: Error) => void): { close(): void }
}

export interface FileStat {
  mtimeMs: number
  ctimeMs?: number
  ino?: number
  size?: number
}

export interface FileSystemHandle {
  writeFile(data: string, encoding: "utf8"): Promise<void>
  sync(): Promise<void>
  close(): Promise<void>
}

/** Whether a file operation failed because the file (or its directory) is not there. */
export function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === "ENOENT"
}

/** The file's text; undefined when it is missing; any other failure is an error naming the file. */
export async function readText(fs: FileSystem, file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, "utf8")
  } catch (err) {
    if (isMissing(err)) return undefined
    throw new Error(`FileTaskStore could not read ${file}: ${(err as Error).message}`, { cause: err })
  }
}

/**
 * Creates `file` holding `text`; EEXIST when it exists. `durable`: synced
 * before it resolves (the default layer opens it with O_DSYNC, and the sync
 * then costs nothing more); else left to the layer's `open("wx")`.
 */
export async function writeNew(fs: FileSystem, file: string, text: string, options: { durable: boolean }): Promise<void> {
  const handle = await fs.open(file, "wx")
  try {
    await handle.writeFile(text, "utf8")
    if (options.durable) await handle.sync()
  } finally {
    await handle.close()
  }
}

/** Makes what is in a directory (new names, renames, removals) durable. */
export function syncDirectory(fs: FileSystem, dir: string): Promise<void> {
  return fsync(fs, dir)
}

/** Makes a file durable; false when it is missing. */
export async function syncFile(fs: FileSystem, file: string): Promise<boolean> {
  try {
    await fsync(fs, file)
    return true
  } catch (err) {
    if (isMissing(err)) return false
    throw err
  }
}

/** The file's stat; undefined when it is missing. */
export async function statOf(fs: FileSystem, file: string): Promise<FileStat | undefined> {
  try {
    return await fs.stat(file)
  } catch (err) {
    if (isMissing(err)) return undefined
    throw err
  }
}

async function fsync(fs: FileSystem, target: string): Promise<void> {
  const handle = await fs.open(target, "r")
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}
