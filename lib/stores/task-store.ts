import type { A2ATask } from "../types.js"
import type { TaskPage, TaskQuery } from "./list.js"

/**
 * Where Tasks live. `get` and `save` are the whole required contract; the
 * server uses the optional extras only when a store has them, so a host
 * store with just get/save keeps working.
 */
export interface TaskStore {
  /** The stored Task, or `undefined` when no Task has that id. Rejects on a read error. */
  get(id: string): Promise<A2ATask | undefined>
  /** Stores the Task under `task.id`, replacing what was there. Resolves once the save is durable for this store. */
  save(task: A2ATask): Promise<void>
  /** One page of Tasks for ListTasks, with the rules of `pageOfTasks` in ./list.ts. Without it, ListTasks is unsupported. */
  list?(query: TaskQuery): Promise<TaskPage>
  /** Removes the Task; removing a missing id is not an error. */
  delete?(id: string): Promise<void>
  /** Releases what the store holds open (connections, handles). */
  close?(): Promise<void>
}

/** True for any object with callable `get` and `save`: the shape a host store must have. */
export function isTaskStore(value: unknown): value is TaskStore {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as TaskStore).get === "function" &&
    typeof (value as TaskStore).save === "function"
  )
}
