import type { PushEvent, PushStore } from "../stores/push-store.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2AArtifact, A2ATask } from "../types.js"

/**
 * Saves one state change of a Task (with the artifacts it added, if any: one,
 * or several in order): exactly one store write. With push on, the same write
 * enqueues what it reports to the Task's webhooks: the artifacts first, then the status.
 */
export type SaveTransition = (task: A2ATask, artifact?: A2AArtifact | readonly A2AArtifact[]) => Promise<void>

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
    const added = artifact === undefined ? [] : Array.isArray(artifact) ? (artifact as readonly A2AArtifact[]) : [artifact as A2AArtifact]
    const artifactEvents: PushEvent[] = []
    for (const one of added) {
      const index = task.artifacts?.indexOf(one) ?? -1
      if (index >= 0) artifactEvents.push({ kind: "artifact", task, artifactIndex: index })
    }
    const enqueued = await push.store.saveWithEvent(task, ...artifactEvents, status)
    // A Task without webhooks enqueued nothing: its save does not wake the sender.
    if (enqueued !== 0) push.enqueued()
  }
}
