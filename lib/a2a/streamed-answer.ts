import { randomUUID } from "node:crypto"
import { copyWith } from "../objects.js"
import type { A2AArtifact, A2ATask } from "../types.js"
import { artifactEvent, type TaskEvent } from "../streams/events.js"

/**
 * The answer a model streams in one run: the artifact its chunks build and
 * the events they make. The first chunk creates the artifact, every later
 * one appends; a later turn (after tool calls) writes the answer anew, so
 * its first chunk replaces what the earlier turn said. All in memory: no I/O.
 */
export class StreamedAnswer {
  /** The artifact the chunks build, and the final answer keeps. */
  readonly artifactId = randomUUID()
  /** The model turn whose text this is. */
  private turn = 0
  /** What the current turn has said so far. */
  private text = ""

  /** The event of a chunk of `turn`'s text (not empty). */
  chunk(task: A2ATask, delta: string, turn: number): TaskEvent {
    const append = this.turn === turn
    if (!append) {
      this.turn = turn
      this.text = ""
    }
    this.text += delta
    return { type: "artifact", taskId: task.id, contextId: task.contextId, artifact: this.artifact(delta), append, lastChunk: false }
  }

  /** How much the answer so far weighs: its text. */
  get soFarText(): string {
    return this.text
  }

  /** The Task with the answer so far as its last artifact. */
  soFar(task: A2ATask): A2ATask {
    return copyWith(task, { artifacts: [...(task.artifacts ?? []), this.artifact(this.text)] })
  }

  /**
   * The event that ends the answer, as `final` (the artifact the Task is
   * saved with) has it: an empty last chunk when the chunks were its whole
   * text (nothing is sent twice), else the artifact sent whole, anew (a
   * model that said something else at the end).
   */
  end(task: A2ATask, final: A2AArtifact): TaskEvent {
    const [part, ...more] = final.parts
    if (final.artifactId === this.artifactId && more.length === 0 && part?.kind === "text" && part.text === this.text) {
      return { type: "artifact", taskId: task.id, contextId: task.contextId, artifact: this.artifact(""), append: true, lastChunk: true }
    }
    return artifactEvent(task, final)
  }

  private artifact(text: string): A2AArtifact {
    return { artifactId: this.artifactId, name: "answer", parts: [{ kind: "text", text }] }
  }
}
