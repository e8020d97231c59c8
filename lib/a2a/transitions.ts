import type { PushEvent, PushStore } from "../stores/push-store.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2AArtifact, A2ATask } from "../types.js"

/**
 * Saves one state change of a Task (with the artifact it added, if any):
 * exactly one store write. With push on, the same write enqueues what it
 * reports to the Task's webhooks: the artifact first, then the status.
 */
export type SaveTransition = (task: A2ATask, artifact?: A2AArtifact) => Promise<void>

/** Push delivery as the savers see it: the store's outbox, and the local sender to wake once a save enqueued something. */
export interface PushOutbox {
  store: PushStore
  enqueued: () => void
}

/** The saver for a store: its plain `save`, or with push on, `push.saveWithEvent` and a wake of the sender. */
export function transitionSaver(store: TaskStore, push?: PushOutbox): SaveTransition {
  if (!push) return (task) => store.save(task)
  return async (task, artifact) => {
    const status: PushEvent = { kind: "status", task }
    const index = artifact ? (task.artifacts?.indexOf(artifact) ?? -1) : -1
    const enqueued =
      index >= 0 ? await push.store.saveWithEvent(task, { kind: "artifact", task, artifactIndex: index }, status) : await push.store.saveWithEvent(task, status)
    // A Task without webhooks enqueued nothing: its save does not wake the sender.
    if (enqueued !== 0) push.enqueued()
  }
}
