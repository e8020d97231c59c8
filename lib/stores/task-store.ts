import type { A2ATask } from "../types.js"
import type { EventLog } from "../streams/event-log.js"
import type { TaskPage, TaskQuery } from "./list.js"
import type { PushStore } from "./push-store.js"

/**
 * Where Tasks live. `get` and `save` are the whole required contract; the
 * server uses the optional extras only when a store has them, so a host
 * store with just get/save keeps working.
 */
export interface TaskStore {
  /** The stored Task, or `undefined` when no Task has that id. Rejects on a read error. */
  get(id: string): Promise<A2ATask | undefined>
  /**
   * The stored Task as its JSON text, for stores that hold it as text anyway:
   * the server reuses what it rendered from a text it has seen, so a Task
   * read again unchanged costs no parse. Same rules as `get`.
   */
  getText?(id: string): Promise<string | undefined>
  /** Stores the Task under `task.id`, replacing what was there. Resolves once the save is durable for this store. */
  save(task: A2ATask): Promise<void>
  /** One page of Tasks for ListTasks, with the rules of `pageOfTasks` in ./list.ts. Without it, ListTasks is unsupported. */
  list?(query: TaskQuery): Promise<TaskPage>
  /** Removes the Task; removing a missing id is not an error. */
  delete?(id: string): Promise<void>
  /**
   * Makes the store ready (a directory created, a connection and its tables
   * or buckets), rejecting with why it cannot be. The other calls do it on
   * first use anyway; calling it first only learns that earlier.
   */
  open?(): Promise<void>
  /** Releases what the store holds open (connections, handles). */
  close?(): Promise<void>
  /**
   * For stores several servers share: calls `onChange(id)` after any process
   * saved or deleted a Task, so each server sees the others' cancels and
   * updates. Resolves once watching; the function it gives stops watching.
   */
  watch?(onChange: (id: string) => void): Promise<() => Promise<void>>
  /** For stores several servers share: liveness records, so a dead server's Tasks are recovered by the others. */
  leases?: LeaseBook
  /**
   * Push notifications: the Tasks' webhook configs and the outbox of
   * notifications not yet delivered. `delete` (and a retention sweep) of a
   * Task removes its configs and notifications too. Without it the push
   * methods answer -32003.
   */
  push?: PushStore
  /**
   * The events the Tasks' streams were sent, by position, so a dropped
   * stream resumes (`Last-Event-ID`) here or on another server sharing the
   * store. `delete` (and a retention sweep) of a Task removes its log too.
   * Without it a stream cannot be resumed.
   */
  events?: EventLog
}

/** Who is alive among the servers sharing a store. */
export interface LeaseBook {
  /** Records that `instance` is alive for `ttlMs` more. */
  renew(instance: string, ttlMs: number): Promise<void>
  /** Whether `instance` holds a lease that has not expired. */
  isAlive(instance: string): Promise<boolean>
  /** Gives the lease up, on a clean stop. */
  release(instance: string): Promise<void>
}

/**
 * A shared store refuses to replace a Task that is already terminal
 * (another server canceled or recovered it): the first final word wins.
 */
export class TaskConflictError extends Error {
  constructor(
    readonly taskId: string,
    /** What the store holds: the Task as the other writer left it. */
    readonly stored: A2ATask,
  ) {
    super(`Task ${JSON.stringify(taskId.slice(0, 128))} is already ${stored.status.state} in the store; the save was refused`)
    this.name = "TaskConflictError"
  }
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
