import { randomUUID } from "node:crypto"
import { copyWith } from "../objects.js"
import type { A2AArtifact, A2ATask } from "../types.js"
import { artifactEvent, type TaskEvent } from "../streams/events.js"

/**
 * The answer an agent streams in one run: the artifact its chunks build and
 * the events they make. The first chunk creates the artifact, every later
 * one appends; a chunk `anew` (the built-in loop's next model turn, after
 * tool calls) writes the answer anew, replacing what was said before. All in
 * memory: no I/O.
 */
export class StreamedAnswer {
  /** The artifact the chunks build, and the final answer keeps. */
  readonly artifactId = randomUUID()
  /** A chunk was sent since the answer last started: the next one appends. */
  private started = false
  /** What the answer says so far. */
  private text = ""

  /** The event of a chunk (not empty); `anew`, it replaces what came before. */
  chunk(task: A2ATask, delta: string, anew: boolean): TaskEvent {
    const append = this.started && !anew
    if (!append) this.text = ""
    this.started = true
    this.text += delta
    return { type: "artifact", taskId: task.id, contextId: task.contextId, artifact: this.artifact(delta), append, lastChunk: false }
  }

  /** Drops what was said: the next chunk starts the answer anew. */
  restart(): void {
    this.started = false
    this.text = ""
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
