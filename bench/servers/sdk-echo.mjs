// The SDK servers' echo agent: an executor that answers at once, the same for every binding the SDK serves.
import { randomUUID } from "node:crypto"
import { TaskState } from "@a2a-js/sdk"
import { AgentEvent } from "@a2a-js/sdk/server"
import { status, textPart } from "./sdk-app.mjs"

/** Publishes the task, its answer as an artifact and the completed status, in one go. */
/** @typedef {import("@a2a-js/sdk/server").AgentExecutor} AgentExecutor */

/** @implements {AgentExecutor} */
export class EchoExecutor {
  /**
   * @param {import("@a2a-js/sdk/server").RequestContext} ctx
   * @param {import("@a2a-js/sdk/server").ExecutionEventBus} bus
   */
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx
    const prompt = userMessage.parts.map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("\n")
    bus.publish(AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED), history: [userMessage], artifacts: [], metadata: undefined }))
    bus.publish(
      AgentEvent.artifactUpdate({
        taskId,
        contextId,
        artifact: { artifactId: randomUUID(), name: "answer", description: "", parts: [textPart(`echo: ${prompt}`)], metadata: undefined, extensions: [] },
        append: false,
        lastChunk: true,
        metadata: undefined,
      }),
    )
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined }))
    bus.finished()
  }

  async cancelTask() {}
}
