import { BoundedCache, type CacheBounds } from "../bounded-cache.js"
import { heapShare, textHeapBytes } from "../heap-budget.js"
import { internalsOf, tenantOf } from "../internals.js"
import type { A2ATask } from "../types.js"

/** A Task's answer as JSON text, and who may read it. */
interface RenderedAnswer {
  json: string
  /** The principal that owns the Task; undefined when it was created without authentication. */
  owner: string | undefined
  /** The tenant it was created under (tenantOf). */
  tenant: ReturnType<typeof tenantOf>
}

/** Renderings kept per Task: the wire versions, with or without a history length. */
const ANSWERS_PER_TASK = 4
/** Default bounds: 4096 Tasks, and a sixteenth of the heap limit (the stored text and every answer counted at 2 bytes a character). */
export const RENDERED_DEFAULT_ENTRIES = 4096
export const RENDERED_HEAP_FRACTION = 1 / 16
/** An entry's own objects (the entry, its Map and key strings), besides the texts. */
const ENTRY_HEAP_BYTES = 512

interface Entry {
  /** The stored text the answers were rendered from. */
  text: string
  owner: string | undefined
  tenant: ReturnType<typeof tenantOf>
  /** JSON text by rendering key (wire version and history length). */
  answers: Map<string, string>
}

/**
 * Answers rendered from a stored Task's text, by Task id, reused while the
 * store hands back the same text: a Task read again unchanged (a client
 * polling GetTask) costs no parse, no wire conversion and no serialization.
 * Holds at most `maxEntries` Tasks and a few renderings of each, weighing
 * at most `maxBytes` (the stored text counts: the cache keeps it alive); the
 * least recently rendered make room, and a Task too big for the budget is
 * rendered for each read instead.
 */
export class RenderedTasks {
  private readonly entries: BoundedCache<string, Entry>

  constructor(bounds: Partial<CacheBounds> = {}) {
    const { maxEntries = RENDERED_DEFAULT_ENTRIES, maxBytes = heapShare(RENDERED_HEAP_FRACTION) } = bounds
    this.entries = new BoundedCache({ maxEntries, maxBytes }, weigh)
  }

  /** The bytes held, as counted against the budget. */
  get bytes(): number {
    return this.entries.bytes
  }

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
      entry = { text, owner: internalsOf(task).principal, tenant: tenantOf(task), answers: new Map() }
    }
    let json = entry.answers.get(key)
    if (json === undefined) {
      json = JSON.stringify(render(task ?? (JSON.parse(text) as A2ATask)))
      entry.answers.set(key, json)
      // Keys are the peers' choice (any history length): keep a few.
      if (entry.answers.size > ANSWERS_PER_TASK) entry.answers.delete(entry.answers.keys().next().value!)
      // Weighed anew with its new answer; one over the whole budget is not kept.
      this.entries.set(id, entry)
    }
    return { json, owner: entry.owner, tenant: entry.tenant }
  }

  /** Drops what was rendered for a Task the store no longer holds. */
  forget(id: string): void {
    this.entries.delete(id)
  }
}

function weigh(entry: Entry): number {
  let bytes = ENTRY_HEAP_BYTES + textHeapBytes(entry.text)
  for (const json of entry.answers.values()) bytes += textHeapBytes(json)
  return bytes
}
