// An agent of your own, served with everything toolnexus adds around it: `agent` in place of a client.
// It reports what it is doing, streams its answer, adds a file and a data artifact, and asks the peer a
// question (input-required), answered in a second message. The official A2A SDK's client (@a2a-js/sdk)
// calls it. Run: npm run build && node dist/examples/own-agent.js
import assert from "node:assert/strict"
import { GetTaskRequest, SendMessageRequest, TaskState } from "@a2a-js/sdk"
import { ClientFactory } from "@a2a-js/sdk/client"
import { serve, type AgentContext, type AgentOutcome } from "toolnexus"

/** A trip planner: plain code standing in for whatever your agent is (a graph, a pipeline, another SDK). */
async function planner(ctx: AgentContext): Promise<AgentOutcome> {
  const said = ctx.message.parts.map((part) => (part.kind === "text" ? part.text : "")).join(" ")
  // No city yet, and none asked for before: ask. The peer's answer comes back as ctx.message, the question in ctx.history.
  const asked = ctx.history.some((message) => message.role === "agent")
  if (!asked && !/Paris|Rome/.test(said)) return { inputRequired: "Which city: Paris or Rome?" }
  const city = /Rome/.test(said) ? "Rome" : "Paris"

  await ctx.status(`looking up ${city}`)
  for (const word of ["Three ", "days ", "in ", city]) {
    if (ctx.signal.aborted) throw new Error("stopped") // canceled, or the server is stopping
    ctx.text(word)
  }
  ctx.artifact({
    name: "itinerary.md",
    parts: [{ kind: "file", file: { name: "itinerary.md", mimeType: "text/markdown", bytes: Buffer.from(`# ${city}\n\n1. Arrive\n2. Walk\n3. Leave\n`).toString("base64") } }],
  })
  // An artifact streamed in pieces: open with lastChunk: false, close with the last append.
  const costs = ctx.artifact({ name: "costs", parts: [{ kind: "data", data: { day: 1, euros: 120 } }], lastChunk: false })
  costs.append([{ kind: "data", data: { day: 2, euros: 90 } }])
  costs.append([{ kind: "data", data: { day: 3, euros: 60 } }], { lastChunk: true })
  return "." // the rest of the answer, after what ctx.text() streamed
}

const agent = await serve("127.0.0.1:0", { agent: planner, a2a: { name: "planner" }, logger: false })

try {
  const sdk = await new ClientFactory().createFromUrl(agent.url)
  const say = (text: string, more: { taskId?: string; contextId?: string } = {}) =>
    SendMessageRequest.fromJSON({ message: { messageId: `m-${text}`, role: "ROLE_USER", parts: [{ text }], ...more } })
  const textOf = (parts: Array<{ content?: { $case: string; value: unknown } }> = []) => parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("")

  // 1. No city: the Task waits for input, the question as its status message.
  const asked = await sdk.sendMessage(say("plan a trip"))
  assert.ok("status" in asked)
  assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED)
  console.log(`asked: ${textOf(asked.status?.message?.parts)}`)

  // 2. The answer, on a stream: the status message, the chunks, the artifacts, completed.
  const seen: string[] = []
  for await (const { payload } of sdk.sendMessageStream(say("Rome", { taskId: asked.id, contextId: asked.contextId }))) {
    if (payload?.$case === "statusUpdate") {
      const { state, message } = payload.value.status ?? {}
      seen.push(`status ${TaskState[state ?? 0]}${message ? `: ${textOf(message.parts)}` : ""}`)
    }
    if (payload?.$case === "artifactUpdate") seen.push(`artifact ${payload.value.artifact?.name}${payload.value.append ? " (more)" : ""}`)
  }
  for (const line of seen) console.log(`  ${line}`)
  assert.equal(seen.at(-1), "status TASK_STATE_COMPLETED")
  assert.ok(seen.includes("status TASK_STATE_WORKING: looking up Rome"))
  assert.ok(seen.includes("artifact itinerary.md") && seen.includes("artifact costs (more)"))

  const done = await sdk.getTask(GetTaskRequest.fromJSON({ id: asked.id }))
  const names = done.artifacts.map((artifact) => artifact.name)
  assert.deepEqual(names, ["itinerary.md", "costs", "answer"])
  assert.equal(done.artifacts[1].parts.length, 3, "the data artifact holds its three parts")
  assert.equal(textOf(done.artifacts[2].parts), "Three days in Rome.")
  console.log(`answer: ${textOf(done.artifacts[2].parts)}`)
  console.log("ok: an agent of your own streamed, added a file and a data artifact, and asked for input")
} finally {
  await agent.stop()
}
