// Tasks shaped like the ones the toolnexus runner stores for a one-turn echo answer.
import { randomUUID } from "node:crypto"
import { hostname } from "node:os"

/**
 * A completed Task in stored (0.3) form: the user's message, the answer, one artifact, our internals in metadata.
 * @param {string} [id]
 * @returns {import("../dist/lib/stores/index.js").A2ATask}
 */
export function completedTask(id = randomUUID()) {
  const contextId = randomUUID()
  const at = new Date().toISOString()
  /**
   * @param {"user" | "agent"} role
   * @param {string} text
   * @returns {import("../dist/lib/stores/index.js").A2AMessage}
   */
  const message = (role, text) => ({ kind: "message", messageId: randomUUID(), role, parts: [{ kind: "text", text }], taskId: id, contextId })
  return {
    id,
    contextId,
    kind: "task",
    status: { state: "completed", timestamp: at },
    history: [message("user", "hi"), message("agent", "echo: hi")],
    metadata: { toolnexus: { runner: { host: hostname(), pid: process.pid, instance: randomUUID() } } },
    artifacts: [{ artifactId: randomUUID(), name: "answer", parts: [{ kind: "text", text: "echo: hi" }] }],
  }
}

/**
 * The text chunks of a streamed answer, the same for every streaming server: short, token-sized ("w0 ", "w1 ", ...).
 * @param {number} count
 */
export function streamChunks(count) {
  return Array.from({ length: count }, (_, i) => `w${i} `)
}
