import type { Test } from "tap"
import { callRpc, joinedChunks, kindsOf, openStream, postRpc, resumeRpc, rpc, scriptedModel, sendStreamingRpc, waitFor } from "./helpers.js"

/**
 * The two ways a peer resumes a stream, written once: the stream opens on
 * `streamUrl`, is cut, and resumes with Last-Event-ID on `resumeUrl` (the
 * same server, or another sharing the store).
 */
export interface ResumeSetup {
  model: ReturnType<typeof scriptedModel>
  streamUrl: string
  resumeUrl: string
}

/** A stream opened on `streamUrl` that got the Task, its working status and the model's `chunks`, then was cut: what the peer had. */
async function streamThenCut(model: ResumeSetup["model"], streamUrl: string, chunks: string[]) {
  const first = await openStream(streamUrl, sendStreamingRpc("hi"))
  for (const chunk of chunks) model.say(chunk)
  await waitFor(() => first.messages.length >= 2 + chunks.length, 10_000, `${chunks.length} chunks`)
  first.cut()
  return { first, lastId: first.ids.at(-1)!, taskId: first.messages[0].result.task.id as string }
}

/** Cut mid-answer: the peer gets the chunk said while it was away, the live ones and the end, each once, ids going on. */
export async function resumeMidAnswer(t: Test, { model, streamUrl, resumeUrl }: ResumeSetup): Promise<void> {
  const { first, lastId, taskId } = await streamThenCut(model, streamUrl, ["one ", "two "])
  // What happens while the peer is away is kept for it.
  model.say("three ")
  const again = await openStream(resumeUrl, resumeRpc(taskId), { "last-event-id": String(lastId) })
  t.equal(again.status, 200)
  await waitFor(() => again.messages.length >= 2, 10_000, "the Task, then the chunk said while away")
  t.match(again.messages[0].result, { task: { id: taskId, status: { state: "TASK_STATE_WORKING" } } }, "the stream starts with the Task")
  t.equal(again.ids[0], lastId, "whose id is where the replay starts from")
  model.say("four")
  model.end()
  const results = (await again.done).map((m) => m.result)
  t.same(kindsOf(results), ["task", "artifactUpdate", "artifactUpdate", "artifactUpdate", "statusUpdate"], "the missed chunk, the live ones, the end: nothing twice")
  t.same(again.ids, [lastId, lastId + 1, lastId + 2, lastId + 3, lastId + 4], "ids go on from the last one seen")
  t.equal(results.at(-1).statusUpdate.status.state, "TASK_STATE_COMPLETED")
  const before = joinedChunks(first.messages.map((m) => m.result))
  t.equal(before + joinedChunks(results.slice(1)), "one two three four", "what the peer saw before and after joins into the answer")
}

/** Finished while the peer was away: without Last-Event-ID the spec's error; with it, the events to the end, then the stream closes. */
export async function resumeAfterTheEnd(t: Test, { model, streamUrl, resumeUrl }: ResumeSetup): Promise<void> {
  const { lastId, taskId } = await streamThenCut(model, streamUrl, ["a"])
  model.say("b")
  model.end()
  await waitFor(async () => (await callRpc(resumeUrl, rpc("GetTask", { id: taskId }))).result?.status.state === "completed", 10_000, "the Task to complete")
  // The store may say completed a moment before the run has finished: until then a subscription streams its end.
  const answeredPlainly = async () => {
    const res = await postRpc(resumeUrl, resumeRpc(taskId), { "a2a-version": "1.0" })
    if (res.headers.get("content-type")?.startsWith("application/json")) return true
    await res.text()
    return false
  }
  await waitFor(answeredPlainly, 10_000, "the run to finish")
  const plain = await callRpc(resumeUrl, resumeRpc(taskId), { "a2a-version": "1.0" })
  t.match(plain.error, { code: -32004, message: /already completed/ }, "without Last-Event-ID a finished Task keeps the spec's error")
  const again = await openStream(resumeUrl, resumeRpc(taskId), { "last-event-id": String(lastId) })
  const results = (await again.done).map((m) => m.result)
  t.same(kindsOf(results), ["task", "artifactUpdate", "artifactUpdate", "statusUpdate"])
  t.equal(results.at(-1).statusUpdate.status.state, "TASK_STATE_COMPLETED")
  t.equal("a" + joinedChunks(results.slice(1)), "ab")
  const endId = again.ids.at(-1)!
  const atTheEnd = await openStream(resumeUrl, resumeRpc(taskId), { "last-event-id": String(endId) })
  t.same(kindsOf((await atTheEnd.done).map((m) => m.result)), ["task"], "resumed from the final event itself: the Task alone, nothing again")
  t.same(atTheEnd.ids, [endId])
}
