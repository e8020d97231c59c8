import type { A2AArtifact, A2ATask } from "../types.js"

/** What happens to a Task after it is created, as streams see it. */
export type TaskEvent =
  | { type: "status"; task: A2ATask }
  | { type: "artifact"; task: A2ATask; artifact: A2AArtifact }

type Listener = (event: TaskEvent) => void

/** In-process fan-out of Task events: every subscriber of a Task sees its events in order. */
export class TaskEvents {
  private readonly listeners = new Map<string, Set<Listener>>()

  subscribe(taskId: string, listener: Listener): () => void {
    let set = this.listeners.get(taskId)
    if (!set) this.listeners.set(taskId, (set = new Set()))
    set.add(listener)
    return () => {
      set.delete(listener)
      if (set.size === 0 && this.listeners.get(taskId) === set) this.listeners.delete(taskId)
    }
  }

  publish(event: TaskEvent): void {
    const set = this.listeners.get(event.task.id)
    if (set) for (const listener of [...set]) listener(event)
  }
}

/**
 * A subscription as an async iterator: events queue while the reader is
 * busy, and `return()` (a closed stream) unsubscribes.
 */
export function eventQueue(events: TaskEvents, taskId: string): AsyncIterableIterator<TaskEvent> & { close(): void } {
  const queued: TaskEvent[] = []
  let wake: (() => void) | undefined
  let closed = false
  const unsubscribe = events.subscribe(taskId, (event) => {
    queued.push(event)
    wake?.()
  })
  const close = () => {
    closed = true
    unsubscribe()
    wake?.()
  }
  const iterator = {
    close,
    async next(): Promise<IteratorResult<TaskEvent>> {
      while (queued.length === 0 && !closed) await new Promise<void>((resolve) => (wake = resolve))
      wake = undefined
      const event = queued.shift()
      return event ? { value: event, done: false } : { value: undefined, done: true }
    },
    async return(): Promise<IteratorResult<TaskEvent>> {
      close()
      return { value: undefined, done: true }
    },
    [Symbol.asyncIterator]() {
      return iterator
    },
  }
  return iterator
}
