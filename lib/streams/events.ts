import type { A2AArtifact, A2ATask, A2ATaskStatus } from "../types.js"

/**
 * What happens to a Task after it is created, as its streams are sent it
 * and the event log keeps it: whole, in the stored (0.3-like) shapes, so an
 * event read back from the log renders as the live one did.
 */
export type TaskEvent =
  | { type: "status"; taskId: string; contextId?: string; status: A2ATaskStatus }
  | {
      type: "artifact"
      taskId: string
      contextId?: string
      artifact: A2AArtifact
      /** The parts add to the artifact of the same id sent before (a chunk after the first); false: it is sent whole, or anew. */
      append: boolean
      /** No more chunks of this artifact follow. */
      lastChunk: boolean
    }

/** An event and its place in the Task's log: 1, 2, 3 … (the SSE `id:`); 0 for an event no log numbers (another server's, seen from the store). */
export interface PositionedEvent {
  position: number
  event: TaskEvent
}

/** The status event of a Task as it stands. */
export function statusEvent(task: A2ATask): TaskEvent {
  return { type: "status", taskId: task.id, contextId: task.contextId, status: task.status }
}

/** An artifact sent whole. */
export function artifactEvent(task: A2ATask, artifact: A2AArtifact): TaskEvent {
  return { type: "artifact", taskId: task.id, contextId: task.contextId, artifact, append: false, lastChunk: true }
}

type Listener = (event: PositionedEvent) => void

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

  publish(event: PositionedEvent): void {
    const set = this.listeners.get(event.event.taskId)
    if (set) for (const listener of [...set]) listener(event)
  }
}

/** How many events may wait for one slow reader before its stream is ended (it can resume from its last id). */
const MAX_QUEUED_EVENTS = 10_000

/** A subscription as an async iterator (see eventQueue). */
export type EventQueue = AsyncIterableIterator<PositionedEvent> & {
  close(): void
  /** Aborts once the reader fell `maxQueued` events behind: the queue dropped its events and ended, and its stream should end now. */
  readonly overflow: AbortSignal
}

/**
 * A subscription as an async iterator: events queue while the reader is
 * busy, and `return()` (a closed stream) unsubscribes. A reader that falls
 * `maxQueued` events behind is cut off: the queue ends (the stream closes,
 * the peer resumes with Last-Event-ID) instead of growing without bound.
 */
export function eventQueue(events: TaskEvents, taskId: string, maxQueued = MAX_QUEUED_EVENTS): EventQueue {
  let queued: PositionedEvent[] = []
  let wake: (() => void) | undefined
  let closed = false
  const overflow = new AbortController()
  const unsubscribe = events.subscribe(taskId, (event) => {
    if (queued.length >= maxQueued) {
      queued = []
      close()
      overflow.abort(new Error(`the reader fell ${maxQueued} events behind`))
      return
    }
    queued.push(event)
    wake?.()
  })
  const close = () => {
    closed = true
    unsubscribe()
    wake?.()
  }
  const iterator: EventQueue = {
    close,
    overflow: overflow.signal,
    async next(): Promise<IteratorResult<PositionedEvent>> {
      while (queued.length === 0 && !closed) await new Promise<void>((resolve) => (wake = resolve))
      wake = undefined
      const event = queued.shift()
      return event ? { value: event, done: false } : { value: undefined, done: true }
    },
    async return(): Promise<IteratorResult<PositionedEvent>> {
      close()
      return { value: undefined, done: true }
    },
    [Symbol.asyncIterator]() {
      return iterator
    },
  }
  return iterator
}
