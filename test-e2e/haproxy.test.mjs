// End to end behind Debian's HAProxy (npm run test:e2e; not part of npm test, which runs on machines without it):
// three replicas of the command on one Postgres store, HAProxy checking GET /readyz, a steady load of A2A 1.0
// SendMessage and GetTask from clients that never retry, while each replica in turn gets SIGTERM and comes back.
import http from "node:http"
import t from "tap"
import { A2A_1, openStream, readEvents, request, rpc, startCluster, startLoad, startModel, waitFor } from "./cluster.mjs"

t.test("a rolling restart behind HAProxy drops no request, and a stream resumes on another replica", async (t) => {
  const model = await startModel()
  t.teardown(() => model.close())
  const cluster = await startCluster({ count: 3, drainDelay: "2s", model })
  t.teardown(() => cluster.close())
  const load = startLoad(cluster.url, { workers: 4 })
  let loadStopped = false
  t.teardown(() => (loadStopped ? undefined : load.stop()))
  await waitFor(() => load.acknowledged.length >= 20, 30_000, "the load to get going")

  // A stream through HAProxy; the replica serving it is the first to be stopped.
  const first = await openStream(cluster.url, rpc("SendStreamingMessage", { message: { messageId: "s-1", role: "ROLE_USER", parts: [{ text: "stream:one" }] } }))
  t.equal(first.statusCode, 200)
  const servedBy = first.headers["x-served-by"]
  const streaming = cluster.replicas.find((r) => r.name === servedBy)
  t.ok(streaming, `HAProxy says which replica serves the stream (${servedBy})`)
  const one = readEvents(first)
  const model1 = await model.opened("one")
  const texts = ["a", "b", "c", "d", "e", "f", "g", "h"]
  const chunkEvents = (events) => events.filter((e) => e.data.result?.artifactUpdate)
  for (const text of texts.slice(0, 3)) model1.chunk(text)
  await waitFor(() => chunkEvents(one.events).length >= 3, 30_000, "the first three chunks on the stream")

  // SIGTERM: the stream keeps flowing through the drain delay, then ends; the Task runs on within the grace.
  const order = [streaming, ...cluster.replicas.filter((r) => r !== streaming)]
  const exitCode = cluster.terminate(streaming)
  await cluster.waitState(streaming.name, "DOWN", 10_000)
  model1.chunk(texts[3])
  await waitFor(() => chunkEvents(one.events).length >= 4, 30_000, "a chunk sent while draining")
  const firstEvents = await one.done
  const taskId = firstEvents[0].data.result.task.id
  const lastId = firstEvents.at(-1).id
  t.notOk(firstEvents.some((e) => e.data.result?.statusUpdate?.status?.state === "TASK_STATE_COMPLETED"), "the first stream ended before the Task did")

  // Resumed through HAProxy: another replica answers, from the event log, then live as the draining one finishes the Task.
  const again = await openStream(cluster.url, rpc("SubscribeToTask", { id: taskId }), { "last-event-id": String(lastId) })
  t.equal(again.statusCode, 200)
  t.not(again.headers["x-served-by"], streaming.name, `resumed on another replica (${again.headers["x-served-by"]})`)
  const two = readEvents(again)
  await waitFor(() => two.events.length >= 1, 30_000, "the resumed stream's Task frame")
  for (const text of texts.slice(4)) model1.chunk(text)
  model1.end()
  const secondEvents = await two.done
  t.equal(secondEvents[0].data.result.task.id, taskId, "the resumed stream starts with the Task")
  const resumed = secondEvents.slice(1)
  const ids = [...firstEvents, ...resumed].map((e) => e.id)
  t.same(ids, [...new Set(ids)].sort((a, b) => a - b), "event ids rise across both streams, no duplicate")
  t.equal(resumed[0]?.id, lastId + 1, "the resumed stream goes on from the next event: no gap")
  const streamedText = [...chunkEvents(firstEvents), ...chunkEvents(resumed)].map((e) => e.data.result.artifactUpdate.artifact.parts.map((p) => p.text).join("")).join("")
  t.equal(streamedText, texts.join(""), "every chunk once, in order, across the two streams")
  t.equal(resumed.at(-1)?.data.result.statusUpdate?.status?.state, "TASK_STATE_COMPLETED", "and the resumed stream ends with the Task completed")
  t.equal(await exitCode, 0, `${streaming.name} exited 0 once its Task finished`)
  await cluster.restart(streaming)

  // The other two, one after the other, under the same load.
  for (const replica of order.slice(1)) {
    const code = await cluster.terminate(replica)
    t.equal(code, 0, `${replica.name} exited 0`)
    await cluster.restart(replica)
  }
  // A little load on the restarted set, then stop it.
  const settled = load.samples.length
  await waitFor(() => load.samples.length >= settled + 20, 30_000, "load after the last restart")
  await load.stop()
  loadStopped = true

  const failures = load.samples.filter((s) => !s.ok)
  t.ok(load.samples.length > 100, `${load.samples.length} requests sent through the restarts`)
  t.same(failures.slice(0, 5), [], `every request answered 200 without an error (${failures.length} did not)`)
  if (failures.length > 0) t.comment(JSON.stringify(failures.slice(0, 5).map((f) => ({ ...f, at: Math.round(f.at) }))))

  // Every acknowledged Task is readable, completed, through HAProxy.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 })
  t.teardown(() => agent.destroy())
  const unread = []
  const ids2 = [...load.acknowledged]
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (ids2.length > 0) {
        const id = ids2.pop()
        const res = await request(agent, `${cluster.url}/`, { method: "POST", body: rpc("GetTask", { id }), headers: A2A_1 })
        const state = res.status === 200 ? JSON.parse(res.text).result?.status?.state : `HTTP ${res.status}`
        if (state !== "TASK_STATE_COMPLETED") unread.push({ id, state })
      }
    }),
  )
  t.same(unread, [], `all ${load.acknowledged.length} acknowledged Tasks read back completed`)
  t.same(
    cluster.replicas.map((r) => r.exits),
    cluster.replicas.map(() => [0]),
    "every replica exited 0",
  )
})
