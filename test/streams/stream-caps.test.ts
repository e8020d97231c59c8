import t, { type Test } from "tap"
import { TaskEvents } from "../../lib/streams/events.js"
import { StoreFollower } from "../../lib/streams/follower.js"
import { JsonRpcDispatcher, type DispatchOutcome } from "../../lib/a2a/jsonrpc.js"
import { A2AOperations } from "../../lib/a2a/operations.js"
import { TaskRunner } from "../../lib/a2a/runner.js"
import { StreamSlots, type StreamLimits } from "../../lib/streams/stream-slots.js"
import { createLocalClient } from "../../lib/client/client.js"
import { serve } from "../../plugins/serve.js"
import { answerOf, FlakyStore, memoryLogger, postRpc, readSse, rpc, userMessage, waitFor } from "../fixtures/helpers.js"

/**
 * Caps on open streams: past maxStreamsPerPrincipal or maxStreams a new stream is refused with
 * -32603 before anything is created, and each stream's slot comes back exactly once, however it ends.
 */

/** A model that answers only when its run is aborted or `finishAll()` is called: streams stay open until then. */
function heldModel() {
  const waiting = new Set<() => void>()
  const client = createLocalClient(
    ({ signal }) =>
      new Promise<string>((resolve, reject) => {
        const done = () => resolve("done")
        waiting.add(done)
        signal?.addEventListener("abort", () => (waiting.delete(done), reject(signal.reason)), { once: true })
      }),
  )
  return { client, running: () => waiting.size, finishAll: () => [...waiting].forEach((done) => (waiting.delete(done), done())) }
}

/** The protocol core with stream caps, on a store whose saves can fail; `stream` opens one as `who` and says how it went. */
function core(t: Test, limits: StreamLimits) {
  const log = memoryLogger()
  const store = new FlakyStore()
  const model = heldModel()
  const events = new TaskEvents()
  const runner = new TaskRunner({ store, client: model.client, log, events })
  const slots = new StreamSlots(limits)
  const dispatcher = new JsonRpcDispatcher(new A2AOperations({ store, runner, events, follower: new StoreFollower({ store, runner, log }), streams: slots }))
  t.teardown(() => runner.stop(0))
  const open = async (body: unknown, who: { principal?: string; address?: string }) => {
    const peer = new AbortController()
    const outcome: DispatchOutcome = await dispatcher.dispatch(body, { log, endSignal: () => peer.signal, ...who })
    const messages: unknown[] = []
    const done = outcome.stream ? (async () => { for await (const frame of outcome.stream!) messages.push(frame.response) })() : Promise.resolve()
    return { outcome, error: answerOf(outcome)?.error, messages, done, leave: () => peer.abort() }
  }
  const stream = (who: { principal?: string; address?: string }, text = "hold") => open(rpc("SendStreamingMessage", { message: userMessage(text) }), who)
  return { store, model, slots, runner, stream, open }
}

t.test("a principal past maxStreamsPerPrincipal is refused while another still streams; past maxStreams everyone is", async (t) => {
  const { store, model, slots, stream } = core(t, { maxStreams: 3, maxStreamsPerPrincipal: 2 })
  const alice = [await stream({ principal: "alice" }), await stream({ principal: "alice" })]
  t.ok(alice.every((s) => s.outcome.stream), "alice opens two streams")
  const tasksBefore = store.saves.length

  const refused = await stream({ principal: "alice" }, "one too many")
  t.notOk(refused.outcome.stream, "the third is not a stream")
  t.match(refused.error, { code: -32603, message: /Too many open streams: this principal has 2 open, the most maxStreamsPerPrincipal \(2\) allows; close one/, data: { retryable: true } })
  t.equal(store.saves.length, tasksBefore, "and created no Task")
  t.notOk(store.saves.some((task) => JSON.stringify(task).includes("one too many")), "nothing of the refused message was saved")

  const bob = await stream({ principal: "bob" })
  t.ok(bob.outcome.stream, "bob still gets a stream")
  const carol = await stream({ principal: "carol" })
  t.match(carol.error, { code: -32603, message: /at capacity for streams \(3 open, maxStreams 3\); poll GetTask instead/ })
  t.equal(slots.open(), 3)

  alice[0].leave() // alice's peer goes away: its slot comes back at once
  t.equal(slots.open({ principal: "alice" }), 1)
  t.ok((await stream({ principal: "carol" })).outcome.stream, "a slot freed by a peer that left is taken by the next caller")
  await waitFor(() => model.running() >= 3, 5000, "the runs to start")
  model.finishAll()
  await waitFor(() => slots.open() === 0, 5000, "every stream to give its slot back")
})

t.test("a subscription takes a slot too, and gives it back when it is refused", async (t) => {
  const { slots, stream, open } = core(t, { maxStreamsPerPrincipal: 1 })
  const first = await stream({ principal: "alice" })
  const taskId = first.outcome.taskId!
  const refused = await open(rpc("SubscribeToTask", { id: taskId }), { principal: "alice" })
  t.match(refused.error, { code: -32603, message: /maxStreamsPerPrincipal \(1\)/ })
  const bobs = await open(rpc("SubscribeToTask", { id: taskId }), { principal: "bob" })
  t.match(bobs.error, { code: -32001 }, "another principal's subscription to it is not found")
  t.equal(slots.open({ principal: "bob" }), 0, "and its slot came back")
  first.leave()
  const again = await open(rpc("SubscribeToTask", { id: taskId }), { principal: "alice" })
  t.ok(again.outcome.stream, "with the slot free alice subscribes")
  again.leave()
  t.equal(slots.open(), 0)
})

t.test("a stream whose Task cannot be created gives its slot back; one that ends gives it back exactly once", async (t) => {
  const { store, model, slots, stream } = core(t, { maxStreams: 1 })
  store.failing = true
  const failed = await stream({ principal: "alice" })
  t.match(failed.error, { code: -32603 }, "the store is down: an error, not a stream")
  t.equal(slots.open(), 0, "the slot taken for it came back")
  store.failing = false

  const ends = await stream({ principal: "alice" })
  t.ok(ends.outcome.stream, "the only slot is free for the next stream")
  await waitFor(() => model.running() === 1, 5000, "the run to start")
  model.finishAll()
  await ends.done
  t.match(ends.messages.at(-1), { result: { final: true } }, "the stream ran to its Task's end")
  t.equal(slots.open(), 0, "its slot came back when it ended")
  ends.leave() // the peer's connection closes after the end too: nothing more comes back
  t.equal(slots.open(), 0)
  const next = await stream({ principal: "alice" })
  t.ok(next.outcome.stream, "one slot: the next stream gets it")
  t.match((await stream({ principal: "bob" })).error, { code: -32603, message: /maxStreams 1/ }, "and still only one: no slot was given back twice")
  next.leave()
})

t.test("without authentication streams are counted per client address", async (t) => {
  const { slots, stream } = core(t, { maxStreamsPerPrincipal: 1 })
  t.ok((await stream({ address: "10.0.0.1" })).outcome.stream)
  t.match((await stream({ address: "10.0.0.1" })).error, { code: -32603, message: /this client address has 1 open/ })
  t.ok((await stream({ address: "10.0.0.2" })).outcome.stream, "another address has its own count")
  t.ok((await stream({ principal: "10.0.0.1" })).outcome.stream, "a principal named like an address shares nothing with it")
  t.equal(slots.open(), 3)
})

t.test("over HTTP: a refused stream is one error (JSON in 1.0, one event in 0.3); stopping the server ends the open ones", async (t) => {
  const model = heldModel()
  const srv = await serve("127.0.0.1:0", { client: model.client, logger: false, a2a: { maxStreams: 2, shutdownGraceMs: 0 } })
  t.teardown(() => srv.stop())
  const open = () => postRpc(srv.url, rpc("message/stream", { message: userMessage("hold") }))
  const streams = [await open(), await open()]
  const readers = streams.map((res) => readSse(res.body!))
  await waitFor(() => readers.every((r) => r.messages.some((m) => m.result?.status?.state === "working")), 10_000, "both streams to be working")
  const refused = await open()
  t.equal(refused.status, 200)
  t.match(refused.headers.get("content-type"), /^text\/event-stream/, "0.3: an event stream, as its official client reads streaming methods")
  const events = await readSse(refused.body!).done
  t.match(events, [{ jsonrpc: "2.0", id: 1, error: { code: -32603, message: /maxStreams 2/ } }], "of the one error")
  const refused10 = await postRpc(srv.url, rpc("SendStreamingMessage", { message: { messageId: "m-10", role: "ROLE_USER", parts: [{ text: "hold" }] } }), { "a2a-version": "1.0" })
  t.match(refused10.headers.get("content-type"), /^application\/json/, "1.0: a JSON answer, not text/event-stream")
  t.match(await refused10.json(), { jsonrpc: "2.0", id: 1, error: { code: -32603, message: /maxStreams 2/ } })
  const list = await (await postRpc(srv.url, rpc("ListTasks", {}))).json()
  t.equal(list.result.totalSize, 2, "the refused stream created no Task")
  await srv.stop()
  await Promise.all(readers.map((r) => r.done))
  t.pass("stopping the server ended both streams")
})

t.test("stream caps must be positive integers", async (t) => {
  for (const key of ["maxStreams", "maxStreamsPerPrincipal"]) {
    await t.rejects(
      serve("127.0.0.1:0", { client: createLocalClient(() => "x"), logger: false, a2a: { [key]: 0 } }),
      new RegExp(`opts\\.${key} should be a positive integer`),
    )
  }
})
