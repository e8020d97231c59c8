import fs from "node:fs"
import fsp from "node:fs/promises"
import path from "node:path"
import type { A2ATask } from "../types.js"
import { TASK_FILE_SUFFIX, taskFileName } from "./file-names.js"
import { pageOfTasks, type TaskPage, type TaskQuery } from "./list.js"
import type { TaskStore } from "./task-store.js"

let tmpCounter = 0

/**
 * One JSON file per Task id in one directory.
 *
 * A save writes a uniquely named tmp file, fsyncs it, renames it over the
 * Task's file and fsyncs the directory: a reader never sees a half-written
 * Task, and an acknowledged save survives a crash. Saves of one id take
 * effect in call order. A file that cannot be read or parsed is an error,
 * never "not found".
 */
export class FileTaskStore implements TaskStore {
  readonly dir: string
  /** The tail of the save chain per id, so saves of one id never overtake each other. */
  private readonly pending = new Map<string, Promise<void>>()

  constructor(dir: string) {
    if (typeof dir !== "string" || dir.length === 0) {
      throw new TypeError("FileTaskStore needs a directory path, e.g. new FileTaskStore(\"./.toolnexus/tasks\")")
    }
    this.dir = path.resolve(dir)
    fs.mkdirSync(this.dir, { recursive: true })
  }

  /** The file a Task id is stored in. */
  fileFor(id: string): string {
    assertId(id)
    return path.join(this.dir, taskFileName(id))
  }

  async get(id: string): Promise<A2ATask | undefined> {
    const file = this.fileFor(id)
    const task = await this.readFile(file)
    // A hashed file name could in theory be shared; the id inside decides.
    if (task !== undefined && task.id !== id) {
      throw new Error(`FileTaskStore found a file at ${file} that does not hold task ${JSON.stringify(id)}`)
    }
    return task
  }

  /** The Task in a file; undefined when there is no file; an error when it cannot be read or is not a Task. */
  private async readFile(file: string): Promise<A2ATask | undefined> {
    let text: string
    try {
      text = await fsp.readFile(file, "utf8")
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined
      throw new Error(`FileTaskStore could not read ${file}: ${(err as Error).message}`, { cause: err })
    }
    let task: A2ATask
    try {
      task = JSON.parse(text) as A2ATask
    } catch (err) {
      throw new Error(`FileTaskStore found a corrupt task file at ${file}: ${(err as Error).message}`, { cause: err })
    }
    if (task === null || typeof task !== "object" || typeof task.id !== "string" || typeof task.status?.state !== "string") {
      throw new Error(`FileTaskStore found a file at ${file} that is not a Task`)
    }
    return task
  }

  save(task: A2ATask): Promise<void> {
    if (task === null || typeof task !== "object") return Promise.reject(new TypeError("FileTaskStore.save needs a Task object"))
    let file: string
    let text: string
    try {
      file = this.fileFor(task.id)
      // Serialize now, so a caller mutating the Task after save() cannot change what lands on disk.
      text = JSON.stringify(task)
    } catch (err) {
      return Promise.reject(err)
    }
    const previous = this.pending.get(task.id) ?? Promise.resolve()
    const write = previous.then(() => this.writeDurably(file, text))
    const tail = write.catch(() => {})
    this.pending.set(task.id, tail)
    void tail.then(() => {
      if (this.pending.get(task.id) === tail) this.pending.delete(task.id)
    })
    return write
  }

  /** Reads every Task file in the directory: fine for thousands of Tasks, a database store for more. */
  async list(query: TaskQuery): Promise<TaskPage> {
    const names = (await fsp.readdir(this.dir)).filter((name) => name.endsWith(TASK_FILE_SUFFIX))
    const tasks: A2ATask[] = []
    const readers = Array.from({ length: Math.min(32, names.length) }, async () => {
      for (let name = names.pop(); name !== undefined; name = names.pop()) {
        const task = await this.readFile(path.join(this.dir, name))
        if (task) tasks.push(task)
      }
    })
    await Promise.all(readers)
    return pageOfTasks(tasks, query)
  }

  async delete(id: string): Promise<void> {
    await fsp.rm(this.fileFor(id), { force: true })
  }

  /** Resolves once every save already called has landed (or failed). */
  async close(): Promise<void> {
    await Promise.all(this.pending.values())
  }

  private async writeDurably(file: string, text: string): Promise<void> {
    const tmp = `${file}.${process.pid}.${++tmpCounter}.tmp`
    const handle = await fsp.open(tmp, "w")
    try {
      await handle.writeFile(text, "utf8")
      await handle.sync()
    } finally {
      await handle.close()
    }
    try {
      await fsp.rename(tmp, file)
    } catch (err) {
      await fsp.rm(tmp, { force: true })
      throw err
    }
    await syncDirectory(this.dir)
  }
}

/** Makes a rename in `dir` durable. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await fsp.open(dir, "r")
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

function assertId(id: unknown): asserts id is string {
  if (typeof id !== "string" || id.length === 0) {
    throw new TypeError(`A Task id must be a non-empty string, got ${typeof id === "string" ? "\"\"" : typeof id}`)
  }
  if (id.includes("\0")) throw new TypeError("A Task id must not contain NUL bytes")
}
