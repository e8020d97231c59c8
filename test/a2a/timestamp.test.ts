import t from "tap"
import { TaskEvents } from "../../lib/streams/events.js"
import { StoreFollower } from "../../lib/streams/follower.js"
import { JsonRpcDispatcher } from "../../lib/a2a/jsonrpc.js"
import { A2AOperations } from "../../lib/a2a/operations.js"
import { TaskRunner } from "../../lib/a2a/runner.js"
import { createLocalClient } from "../../lib/client/client.js"
import { normalizeTimestamp } from "../../lib/timestamp.js"
import { memoryLogger, RecordingStore, rpc, sampleTask } from "../fixtures/helpers.js"

t.test("normalizeTimestamp reads RFC 3339 date-times, offsets and fractions included", async (t) => {
  t.equal(normalizeTimestamp("2026-01-31T12:00:00Z"), "2026-01-31T12:00:00.000Z")
  t.equal(normalizeTimestamp("2026-01-31t12:00:00z"), "2026-01-31T12:00:00.000Z", "t and z may be lower case")
  t.equal(normalizeTimestamp("2026-01-31T14:30:00+02:30"), "2026-01-31T12:00:00.000Z", "a positive offset is east of UTC")
  t.equal(normalizeTimestamp("2026-01-31T07:00:00-05:00"), "2026-01-31T12:00:00.000Z")
  t.equal(normalizeTimestamp("2026-01-31T12:00:00.123Z"), "2026-01-31T12:00:00.123Z", "milliseconds exactly")
  t.equal(normalizeTimestamp("2026-01-31T12:00:00.5Z"), "2026-01-31T12:00:00.500Z")
  t.equal(normalizeTimestamp("2026-01-31T12:00:00.123000000Z"), "2026-01-31T12:00:00.123Z", "trailing zeros add nothing")
  t.equal(normalizeTimestamp("2026-01-31T12:00:00.1230001Z"), "2026-01-31T12:00:00.124Z", "a finer fraction rounds up, never into an earlier millisecond")
  t.equal(normalizeTimestamp("2024-02-29T00:00:00Z"), "2024-02-29T00:00:00.000Z", "a leap day")
  t.equal(normalizeTimestamp("2016-12-31T23:59:60Z"), "2017-01-01T00:00:00.000Z", "a leap second is the next minute's first moment")
  t.equal(normalizeTimestamp("0050-06-01T00:00:00Z"), "0050-06-01T00:00:00.000Z", "a two-digit year is not read as 19xx")
})

t.test("normalizeTimestamp refuses what Date.parse would guess at", async (t) => {
  for (const text of [
    "-1",
    "2026",
    "Nov 30 2026",
    "2026-01-31",
    "2026-01-31T12:00:00",
    "2026-01-31 12:00:00Z",
    "2026-01-31T12:00Z",
    "2026-1-31T12:00:00Z",
    "+002026-01-31T12:00:00Z",
    "2026-01-31T12:00:00.Z",
    "2026-01-31T12:00:00+0200",
    " 2026-01-31T12:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-00-01T00:00:00Z",
    "2026-02-29T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-01-00T00:00:00Z",
    "2026-01-31T24:00:00Z",
    "2026-01-31T12:60:00Z",
    "2026-01-31T12:00:61Z",
    "2026-01-31T12:00:00+24:00",
    "2026-01-31T12:00:00-00:60",
    "1900-02-29T00:00:00Z",
  ]) {
    t.equal(normalizeTimestamp(text), undefined, JSON.stringify(text))
  }
  t.equal(normalizeTimestamp("2000-02-29T01:00:00+01:00"), "2000-02-29T00:00:00.000Z", "a century leap day; the stored form, in UTC")
  t.equal(normalizeTimestamp("0000-01-01T00:00:00+01:00"), undefined, "an offset that leaves year 0000 cannot sort as text")
  t.equal(normalizeTimestamp("9999-12-31T23:30:00-01:00"), undefined, "nor one past year 9999")
})

function dispatcher() {
  const store = new RecordingStore()
  const log = memoryLogger()
  const events = new TaskEvents()
  const runner = new TaskRunner({ store, client: createLocalClient(() => "x"), log, events })
  const rpcs = new JsonRpcDispatcher(new A2AOperations({ store, runner, events, follower: new StoreFollower({ store, runner, log }) }))
  const call = async (body: unknown, version?: string) => JSON.parse((await rpcs.dispatch(body, { log, version })).body!)
  return { store, call }
}

t.test("ListTasks statusTimestampAfter: anything but an RFC 3339 date-time is -32602 naming the field, in both versions", async (t) => {
  const { call } = dispatcher()
  for (const version of [undefined, "1.0"]) {
    for (const text of ["-1", "2026", "Nov 30 2026", "2026-02-30T00:00:00Z"]) {
      const { error } = await call(rpc("ListTasks", { statusTimestampAfter: text }), version)
      t.match(error, { code: -32602, message: /params\.statusTimestampAfter must be an RFC 3339 date-time such as 2026-01-31T12:00:00Z/ }, `${JSON.stringify(text)} (${version ?? "0.3"})`)
    }
  }
})

t.test("ListTasks statusTimestampAfter: an offset time filters at the instant it names", async (t) => {
  const { store, call } = dispatcher()
  const at = (id: string, timestamp: string) => sampleTask(id, "completed", { status: { state: "completed", timestamp } })
  await store.save(at("before", "2026-01-31T11:59:59.999Z"))
  await store.save(at("on", "2026-01-31T12:00:00.000Z"))
  await store.save(at("after", "2026-01-31T12:00:00.001Z"))
  const ids = async (after: string) => (await call(rpc("ListTasks", { statusTimestampAfter: after }))).result.tasks.map((task: { id: string }) => task.id).sort()
  t.same(await ids("2026-01-31T14:00:00+02:00"), ["after", "on"], "+02:00 is two hours ahead of UTC")
  t.same(await ids("2026-01-31T12:00:00.0001Z"), ["after"], "a sub-millisecond time excludes the millisecond before it")
  t.same(await ids("2026-01-31T06:59:59.999-05:00"), ["after", "before", "on"])
})
