import type { A2AMessage, A2APart, JsonObject } from "../types.js"

/**
 * What a Task's agent is: the code that answers a peer's message. The
 * runner calls it once per run of a Task (a new Task, or an input-required
 * Task's follow-up) and keeps every guarantee around it: stores, bindings,
 * streams and their resume, push, cancel, recovery, limits, spans and
 * metrics. The built-in tool-calling loop is one agent (`toolLoopAgent`);
 * `agent` in the plugin's options is your own.
 */
export type AgentFunction = (ctx: AgentContext) => Promise<AgentOutcome>

/**
 * How a run ends, besides throwing (which fails the Task with the error's
 * message, cut and with credentials blanked out):
 * - `undefined`: completed; the answer is what `ctx.text()` streamed, if anything.
 * - a string: completed; the answer is what `ctx.text()` streamed followed by the string.
 * - `{ inputRequired: "question" }`: the Task waits for the peer (`input-required`) with the
 *   question as its status message; the peer's next message to the Task runs the agent again.
 */
export type AgentOutcome = void | undefined | string | { inputRequired: string }

/** A run of the agent: the Task, the peer's message, and the ways to answer. */
export interface AgentContext {
  /** The Task being worked on. */
  readonly taskId: string
  /** Its context: every Task of a conversation shares it. */
  readonly contextId: string
  /**
   * The peer's message, as the Task stores it: `parts` of `{kind:"text",text}`,
   * `{kind:"file",file:{name?,mimeType?,bytes?|uri?}}` (bytes in base64) or `{kind:"data",data}`,
   * its `messageId` and `metadata`. Read it; do not change it.
   */
  readonly message: A2AMessage
  /**
   * The conversation before `message`, oldest first: the messages of the earlier Tasks of the same
   * context that the peer may read, then this Task's own (an input-required Task's question among
   * them); the last 50 at most.
   */
  readonly history: readonly A2AMessage[]
  /** Aborted when the Task is canceled, the server stops, or the Task passes its limits (maxTaskBytes): stop then. */
  readonly signal: AbortSignal
  /**
   * Streams a piece of the answer: the Task's `answer` artifact grows chunk by chunk on every
   * stream, and GetTask shows the text so far. `{ anew: true }` starts the answer over (what was
   * streamed before is dropped; `delta` may then be empty). Ignored once the run has ended.
   */
  text(delta: string, opts?: { anew?: boolean }): void
  /**
   * Adds an artifact to the Task: streams get it at once, GetTask shows it, push sends it with the
   * run's last state. Returns its `artifactId` and `append`, which adds parts to it chunk by chunk;
   * an artifact stays open for `append` until one is sent with `lastChunk: true` (the default for
   * `artifact()` itself: pass `lastChunk: false` to stream into it). Throws a TypeError for parts
   * that are not text, file or data parts.
   */
  artifact(input: AgentArtifactInput): AgentArtifact
  /**
   * Says what the agent is doing: a `working` status with this text as its message, saved, sent to
   * streams as a status update and to push webhooks. Resolves once saved; never rejects (a store
   * failure is logged).
   */
  status(text: string): Promise<void>
}

/** An artifact as the agent gives it. */
export interface AgentArtifactInput {
  name?: string
  description?: string
  /** At least one part. */
  parts: A2APart[]
  metadata?: JsonObject
  /** False: more parts follow through `append`. Default true: the artifact is whole. */
  lastChunk?: boolean
}

/** An artifact the agent added: its id, and the way to stream more parts into it. */
export interface AgentArtifact {
  readonly artifactId: string
  /**
   * Adds parts to the artifact: streams get them as an appended chunk, the Task keeps them.
   * `lastChunk: true` closes it. Throws a TypeError once it is closed, or for bad parts.
   */
  append(parts: A2APart[], opts?: { lastChunk?: boolean }): void
}
