import { AgingMap } from "../aging-map.js"
import { internalsOf } from "../internals.js"
import type { A2ATask } from "../types.js"

/** A Task's answer as JSON text, and who may read it. */
interface RenderedAnswer {
  json: string
  /** The principal that owns the Task; undefined when it was created without authentication. */
  owner: string | undefined
}

/** Renderings kept per Task: the wire versions, with or without a history length. */
const ANSWERS_PER_TASK = 4

interface Entry {
  /** The stored text the answers were rendered from. */
  text: string
  owner: string | undefined
  /** JSON text by rendering key (wire version and history length). */
  answers: Map<string, string>
}

/**
 * Answers rendered from a stored Task's text, by Task id, reused while the
 * store hands back the same text: a Task read again unchanged (a client
 * polling GetTask) costs no parse, no wire conversion and no serialization.
 * Holds at most `maxEntries` Tasks and a few renderings of each; the oldest
 * make room.
 */
export class RenderedTasks {
  private readonly entries = new AgingMap<string, Entry>()

  constructor(private readonly maxEntries = 4096) {}

  /**
   * The JSON of `render(task)` for the Task stored as `text`: rendered once
   * per text and `key`, which names everything besides the Task that
   * `render` depends on.
   */
  answer(id: string, text: string, key: string, render: (task: A2ATask) => unknown): RenderedAnswer {
    let entry = this.entries.get(id)
    let task: A2ATask | undefined
    if (entry === undefined || entry.text !== text) {
      task = JSON.parse(text) as A2ATask
      entry = { text, owner: internalsOf(task).principal, answers: new Map() }
      this.entries.set(id, entry)
      if (this.entries.size > this.maxEntries) this.entries.shift()
    }
    let json = entry.answers.get(key)
    if (json === undefined) {
      json = JSON.stringify(render(task ?? (JSON.parse(text) as A2ATask)))
      entry.answers.set(key, json)
      // Keys are the peers' choice (any history length): keep a few.
      if (entry.answers.size > ANSWERS_PER_TASK) entry.answers.delete(entry.answers.keys().next().value!)
    }
    return { json, owner: entry.owner }
  }

  /** Drops what was rendered for a Task the store no longer holds. */
  forget(id: string): void {
    this.entries.delete(id)
  }
}
