import { randomUUID } from "node:crypto"
import type { ChatMessage } from "../models/model.js"
import { errorFields, type Logger } from "../log.js"
import { MAX_PAGE_SIZE } from "../stores/list.js"
import type { TaskStore } from "../stores/task-store.js"
import type { A2AMessage, A2APart, A2ATask } from "../types.js"

/** What an agent sees of a Task: its latest message, what came before as history; and the model's view of both. */

/**
 * The conversation before the task's latest message: the earlier tasks of
 * its context (when `lookUpContext` and the store can list) whose owners
 * are among `owners` (what the caller may read: ownersVisibleTo), then its
 * own history, the last `limit` messages.
 */
export async function earlierMessages(
  task: A2ATask,
  opts: { store: TaskStore; log: Logger; limit: number; lookUpContext: boolean; owners: ReadonlyArray<string | null> | undefined; tenant: string | null },
): Promise<A2AMessage[]> {
  const own = (task.history ?? []).slice(0, -1)
  let earlier: A2AMessage[] = []
  const { store } = opts
  if (opts.lookUpContext && store.list && task.contextId !== undefined) {
    try {
      // Only the turns the caller may read: a shared contextId must not leak another's conversation.
      const page = await store.list({ contextId: task.contextId, pageSize: MAX_PAGE_SIZE, owners: opts.owners, tenant: opts.tenant })
      earlier = page.tasks
        .filter((other) => other.id !== task.id)
        .reverse()
        .flatMap((other) => other.history ?? [])
    } catch (err) {
      opts.log.warn({ taskId: task.id, contextId: task.contextId, ...errorFields(err) }, "could not read the context's earlier turns")
    }
  }
  return [...earlier, ...own].slice(-opts.limit)
}

/** Messages as the model reads them: the peer's as the user's, the agent's as its own, each part as text. */
export function chatMessages(messages: readonly A2AMessage[]): ChatMessage[] {
  return messages.map((message) => ({ role: message.role === "user" ? "user" : "assistant", content: promptFrom(message) }))
}

/** A text message from the agent about a Task: its answer, its question, or why it failed. */
export function agentMessage(task: A2ATask, text: string): A2AMessage {
  return { kind: "message", messageId: randomUUID(), role: "agent", parts: [{ kind: "text", text }], taskId: task.id, contextId: task.contextId }
}

/** The model's prompt: text parts as they are, other parts described in a line. */
export function promptFrom(message: A2AMessage | undefined): string {
  return (message?.parts ?? []).map(partAsText).join("\n")
}

function partAsText(part: A2APart): string {
  switch (part.kind) {
    case "text":
      return part.text
    case "data":
      return JSON.stringify(part.data)
    case "file":
      return `[file ${part.file.name ?? ""}${part.file.mimeType ? ` (${part.file.mimeType})` : ""}${part.file.uri ? ` at ${part.file.uri}` : ", inline"}]`
  }
}
