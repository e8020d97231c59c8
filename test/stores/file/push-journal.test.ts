import fsp from "node:fs/promises"
import path from "node:path"
import t from "tap"
import { FileTaskStore, type FileSystem } from "../../../lib/stores/file/store.js"
import { entryLine, readJournal } from "../../../lib/stores/file/push-journal.js"
import type { PushConfigRecord } from "../../../lib/stores/push-store.js"
import type { TaskState } from "../../../lib/types.js"
import { deadPid, killedJournalWriter, recordingFs, sampleTask, simulated, tmpDir, waitFor } from "../../fixtures/helpers.js"

// A FileTaskStore whose claims ran (a store that sends) appends the notifications of its saves to a journal per Task
// directory (lib/stores/file/push-journal.ts) instead of writing each as a file of its own.

const config = (taskId: string, id = "a"): PushConfigRecord => ({ taskId, id, version: "1.0", url: "https://hooks.example.com/a", createdAt: new Date().toISOString() })

async function saveState(store: FileTaskStore, id: string, state: TaskState): Promise<void> {
  const task = sampleTask(id, state)
  await store.push.saveWithEvent(task, { kind: "status", task })
}

/** Task `id` saved with config "a". */
async function withConfig(store: FileTaskStore, id: string): Promise<void> {
  await store.save(sampleTask(id))
  await store.push.putConfig(config(id))
}

/** A store that sends: its claims ran (none found anything). */
async function sending(store: FileTaskStore): Promise<FileTaskStore> {
  await store.push.claim("i-1", 10, 60_000, Date.now())
  return store
}

const claim = (store: FileTaskStore, now = Date.now()) => store.push.claim("i-1", 10, 60_000, now)

/** Claims and acks until nothing is due: what was sent, as "task#state key", in order. */
async function drain(store: FileTaskStore): Promise<string[]> {
  const sent: string[] = []
  for (;;) {
    const claims = await claim(store)
    if (claims.length === 0) return sent
    for (const held of claims) {
      sent.push(`${held.item.taskId}#${held.item.event.task.status.state} ${held.item.key}`)
      await store.push.ack(held)
    }
  }
}

const taskDir = (dir: string, id: string) => path.join(dir, ".push", `${id}.json`)
const namesIn = async (dir: string, id: string, prefix: string) => (await fsp.readdir(taskDir(dir, id))).filter((name) => name.startsWith(prefix))

/** The notifications Task `id`'s journals hold and have not marked done, as "state key". */
async function inJournals(dir: string, id: string): Promise<string[]> {
  const open: string[] = []
  for (const name of await namesIn(dir, id, "j-")) {
    for (const { item } of readJournal(await fsp.readFile(path.join(taskDir(dir, id), name), "utf8")).open.values()) open.push(`${item.event.task.status.state} ${item.key}`)
  }
  return open
}

t.test("a store that sends appends its notifications to a journal, not files of their own: sent in order, each once; close removes the emptied journal", async (t) => {
  const dir = tmpDir(t)
  const store = await sending(new FileTaskStore(dir))
  await withConfig(store, "t-1")
  await saveState(store, "t-1", "working")
  await saveState(store, "t-1", "input-required")
  t.same(await namesIn(dir, "t-1", "o-"), [], "no notification file")
  const journaled = await inJournals(dir, "t-1")
  t.match(journaled, [/^working /, /^input-required /], "both in the store's one journal, in order")
  t.same(await drain(store), journaled.map((entry) => `t-1#${entry}`), "sent in order, under their keys")
  t.same(await drain(store), [], "nothing sent again")
  // A sent notification's done line waits for the journal's next append, 200 ms at most.
  await waitFor(async () => (await inJournals(dir, "t-1")).length === 0, 10_000, "the done lines")
  t.pass("each marked done")
  await store.close()
  t.same(await namesIn(dir, "t-1", "j-"), [], "close removes the emptied journal")
  t.same(await namesIn(dir, "t-1", "o-"), [], "and writes nothing out")
})

t.test("a journal notification whose attempt failed waits in a file of its own; one given up on becomes a dead letter", async (t) => {
  const dir = tmpDir(t)
  const store = await sending(new FileTaskStore(dir))
  t.teardown(() => store.close())
  await withConfig(store, "t-1")
  await saveState(store, "t-1", "working")
  const now = Date.now()
  const [first] = await claim(store, now)
  await store.push.retryLater(first, now + 60_000, "503 Service Unavailable")
  t.match(await namesIn(dir, "t-1", "o-"), [/^o-0000000000000001-\d+-1-a\.json~\d{16}~wait$/], "written out with its attempt counted, waiting for its time")
  t.same(await inJournals(dir, "t-1"), [], "and marked done in the journal")
  t.same(await claim(store, now + 1), [], "not due before its time")
  const [again] = await claim(store, now + 60_001)
  t.match(again?.item, { key: first.item.key, attempts: 1, lastError: "503 Service Unavailable" }, "due at its time, the same notification")
  await store.push.ack(again)

  await saveState(store, "t-1", "input-required")
  const [second] = await claim(store)
  t.equal(second.item.event.task.status.state, "input-required")
  await store.push.deadLetter(second, "410 Gone", 1)
  t.match(await store.push.listDeadLetters(10), [{ key: second.item.key, reason: "410 Gone" }], "a dead letter")
  t.same(await inJournals(dir, "t-1"), [], "marked done in the journal")
  t.same(await claim(store), [], "nothing left to send")
  // A settlement of a claim the store no longer holds changes nothing.
  await store.push.ack(second)
  await store.push.retryLater(second, Date.now(), "late")
  await store.push.deadLetter(second, "late")
  t.equal((await store.push.listDeadLetters(10)).length, 1, "no second dead letter")
})

t.test("another store's journal holds its channel: a later notification of the Task waits until that store has sent its own", async (t) => {
  const dir = tmpDir(t)
  const writer = await sending(new FileTaskStore(dir))
  await withConfig(writer, "t-1")
  const other = new FileTaskStore(dir)
  t.teardown(() => Promise.all([writer.close(), other.close()]))
  await saveState(writer, "t-1", "working")
  // A store that does not send writes a file of its own, after the journal's seq.
  await saveState(other, "t-1", "input-required")
  t.match(await namesIn(dir, "t-1", "o-"), [/^o-0000000000000002-/], "the later one in a file, next in the Task's order")
  t.same(await claim(other), [], "the channel's head is in the writer's journal: the other store does not send past it")
  const [first] = await claim(writer)
  t.equal(first.item.event.task.status.state, "working", "the writer sends its own")
  await writer.push.ack(first)
  let next: Awaited<ReturnType<typeof claim>> = []
  await waitFor(async () => (next = await claim(other)).length > 0, 10_000, "the other store to find the channel moved on")
  t.equal(next[0].item.event.task.status.state, "input-required", "then the next, by either store")
  await other.push.ack(next[0])
})

t.test("close writes out what a journal still holds, for any store to send; a deleted config takes its journal notifications with it", async (t) => {
  const dir = tmpDir(t)
  const writer = await sending(new FileTaskStore(dir))
  await withConfig(writer, "t-1")
  await withConfig(writer, "t-2")
  await saveState(writer, "t-1", "working")
  await saveState(writer, "t-2", "working")
  const [key] = (await inJournals(dir, "t-1")).map((entry) => entry.split(" ")[1])
  await writer.push.deleteConfig("t-2", "a")
  t.same(await inJournals(dir, "t-2"), [], "the deleted config's notification is marked done")
  await writer.close()
  t.same([...(await namesIn(dir, "t-1", "j-")), ...(await namesIn(dir, "t-2", "j-"))], [], "no journal left")
  t.match(await namesIn(dir, "t-1", "o-"), [/^o-0000000000000001-\d+-0-a\.json$/], "its notification in a file of its own")
  const next = new FileTaskStore(dir)
  t.teardown(() => next.close())
  t.same(await drain(next), [`t-1#working ${key}`], "sent by the next store, under its key; none of the deleted config")
})

t.test("a claim whose lease ran out leaves the journal: another store on the directory takes it over", async (t) => {
  const dir = tmpDir(t)
  const writer = await sending(new FileTaskStore(dir))
  const other = new FileTaskStore(dir)
  t.teardown(() => Promise.all([writer.close(), other.close()]))
  await withConfig(writer, "t-1")
  await saveState(writer, "t-1", "working")
  const now = Date.now()
  const [short] = await writer.push.claim("dying", 10, 1000, now)
  t.same(await other.push.claim("i-2", 10, 60_000, now + 999), [], "held under its lease")
  // The writer's next claim after the lease finds it unsettled, and writes it out; the other store's claim takes it.
  t.same(await writer.push.claim("i-1", 10, 60_000, now + 1000), [], "not held again by the writer")
  // The other store reads every Task directory again 5 seconds after its last full scan.
  const taken = await other.push.claim("i-2", 10, 60_000, now + 6000)
  t.equal(taken[0]?.item.key, short.item.key, "taken over by the other store")
  await writer.push.retryLater(short, now + 1000, "late")
  t.same(await writer.push.claim("i-3", 10, 60_000, now + 6001), [], "the late retry of the lapsed claim releases nothing")
  await other.push.ack(taken[0])
})

/** A FileSystem that appends (so the store keeps journals) and runs `hook` before each operation. */
function appendingFs(dir: string, hook: (op: string, file: string) => void): FileSystem {
  return {
    ...recordingFs(dir, [], hook),
    appendFile: async (file, data, encoding) => {
      hook("append", file)
      await fsp.appendFile(file, data, encoding)
    },
  }
}

t.test("a save that fails takes its journal notifications back; one whose journal cannot be appended to fails whole", async (t) => {
  const dir = tmpDir(t)
  let fail: "rename" | "append" | undefined
  const store = await sending(
    new FileTaskStore(dir, {
      fs: appendingFs(dir, (op, file) => {
        if (op === fail && (op === "append" || path.dirname(file) === dir)) throw simulated("EIO")
      }),
    }),
  )
  t.teardown(() => store.close())
  await withConfig(store, "t-1")
  fail = "rename"
  await t.rejects(saveState(store, "t-1", "working"), /EIO/, "the Task's save fails")
  t.same(await inJournals(dir, "t-1"), [], "its notification is marked done: taken back")
  fail = "append"
  await t.rejects(saveState(store, "t-1", "working"), /EIO/, "a save whose notification cannot be appended fails")
  t.equal((await store.get("t-1"))?.status.state, "submitted", "and saves nothing")
  fail = undefined
  await saveState(store, "t-1", "input-required")
  t.match(await drain(store), [/^t-1#input-required /], "only the save that landed is sent")
})

t.test("a killed writer's journal, whose take-over another process began and died in, is taken over by the next store: what its saves landed is sent, in order, each once; a notification of a save that never landed is not", async (t) => {
  const dir = tmpDir(t)
  const setup = new FileTaskStore(dir)
  await withConfig(setup, "t-1")
  await setup.close()
  await killedJournalWriter(t, dir, "t-1", ["working", "input-required"])
  const [journal] = await namesIn(dir, "t-1", "j-")
  const file = path.join(taskDir(dir, "t-1"), journal)
  const open = [...readJournal(await fsp.readFile(file, "utf8")).open.values()]
  t.same(
    open.map(({ item }) => item.event.task.status.state),
    ["working", "input-required"],
    "the dead writer's journal holds both",
  )
  // A notification appended by a save that died before its Task landed: above the stored seq.
  await fsp.appendFile(file, entryLine({ ...open[1], item: { ...open[1].item, key: "never-landed", seq: 3 } }))
  // And a take-over of the journal, begun by a process that died before it ended.
  await fsp.rename(file, `${file}~${await deadPid()}`)

  const next = new FileTaskStore(dir)
  t.teardown(() => next.close())
  t.same(
    await drain(next),
    open.map(({ item }) => `t-1#${item.event.task.status.state} ${item.key}`),
    "sent in order, under their keys",
  )
  t.same(await namesIn(dir, "t-1", "j-"), [], "the journal is gone")
  t.same(await namesIn(dir, "t-1", "o-"), [], "and every notification written out of it was sent")
})
