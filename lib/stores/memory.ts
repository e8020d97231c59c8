import type { A2ATask } from "../types.js"
import { pageOfTasks, type TaskPage, type TaskQuery } from "./list.js"
import type { TaskStore } from "./task-store.js"

/**
 * Tasks in a Map, for the life of the process. Every save and get copies,
 * so a caller mutating a Task it handed in or got back never changes what
 * is stored.
 */
export class InMemoryTaskStore implements TaskStore {
  private readonly tasks = new Map<string, A2ATask>()

  async get(id: string): Promise<A2ATask | undefined> {
    const task = this.tasks.get(id)
    return task === undefined ? undefined : structuredClone(task)
  }

  async save(task: A2ATask): Promise<void> {
    this.tasks.set(task.id, structuredClone(task))
  }

  async list(query: TaskQuery): Promise<TaskPage> {
    return structuredClone(pageOfTasks(this.tasks.values(), query))
  }

  async delete(id: string): Promise<void> {
    this.tasks.delete(id)
  }

  /** How many Tasks are held. */
  get size(): number {
    return this.tasks.size
  }
}
