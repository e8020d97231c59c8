// The official @a2a-js/sdk 1.3 on Express (DefaultRequestHandler, InMemoryTaskStore) with an executor that streams:
// the SDK's equivalent of toolnexus streaming a local model's chunks. Per Task it publishes the Task, a working
// status, one artifact-update per chunk of the same async iterable ours reads (the first creates the artifact, the
// rest append), an empty closing chunk with lastChunk (as ours sends), then the completed status: the same events,
// in the same order, as toolnexus sends for SendStreamingMessage.
// argv: <chunks per Task>
import { randomUUID } from "node:crypto"
import { TaskState } from "@a2a-js/sdk"
import { AgentEvent } from "@a2a-js/sdk/server"
import { serveSdk, status, textPart } from "./sdk-app.mjs"
import { streamChunks } from "../fixtures.mjs"

const chunks = streamChunks(Number(process.argv[2] ?? 200))

/** The model: the chunks as an async iterable, yielded as fast as they are asked for (as ours reads its local model). */
async function* model() {
  yield* chunks
}

/** @typedef {import("@a2a-js/sdk/server").AgentExecutor} AgentExecutor */

/** @implements {AgentExecutor} */
class StreamingExecutor {
  /**
   * @param {import("@a2a-js/sdk/server").RequestContext} ctx
   * @param {import("@a2a-js/sdk/server").ExecutionEventBus} bus
   */
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx
    bus.publish(AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED), history: [userMessage], artifacts: [], metadata: undefined }))
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_WORKING), metadata: undefined }))
    const artifactId = randomUUID()
    /** @param {string} text @param {boolean} append @param {boolean} lastChunk */
    const chunk = (text, append, lastChunk) =>
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId, name: "answer", description: "", parts: [textPart(text)], metadata: undefined, extensions: [] },
        append,
        lastChunk,
        metadata: undefined,
      })
    let first = true
    for await (const text of model()) {
      bus.publish(chunk(text, !first, false))
      first = false
    }
    bus.publish(chunk("", true, true))
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined }))
    bus.finished()
  }

  async cancelTask() {}
}

await serveSdk(new StreamingExecutor(), "streaming agent for the benchmark")
