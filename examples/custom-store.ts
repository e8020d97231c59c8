import assert from "node:assert/strict"
import type { A2ATask, TaskStore } from "toolnexus"
import { runStoreContract } from "toolnexus/testing"

/** A TaskStore of its own: Tasks kept in a Map, each stored and handed out as a copy. */
class MapTaskStore implements TaskStore {
  readonly #tasks = new Map<string, A2ATask>()

  async get(id: string): Promise<A2ATask | undefined> {
    const task = this.#tasks.get(id)
    return task === undefined ? undefined : structuredClone(task)
  }

  async save(task: A2ATask): Promise<void> {
    this.#tasks.set(task.id, structuredClone(task))
  }

  async delete(id: string): Promise<void> {
    this.#tasks.delete(id)
  }
}

// Every check builds a fresh store, runs against it and closes it; an empty list means the contract holds.
const failures = await runStoreContract(() => new MapTaskStore(), { timeoutMs: 5_000 })
assert.deepEqual(failures, [])
console.log("ok: MapTaskStore keeps the TaskStore contract")
