import t from "tap"
import { tmpDir, waitFor } from "../fixtures/helpers.js"
import { allCompleted, checkDelivery, pushServer, receiver, sendWithHook } from "../fixtures/push-receiver.js"

/** Tasks per test: each brings RUN.length notifications. */
const TASKS = 20
/** The push timeout of the servers: a claim lasts 2 x this + 10 s (lib/push/sender.ts), so a dead server's claims run out within ~14 s. */
const TIMEOUT_MS = 2000

t.test("file store: a server killed with SIGKILL while notifications are pending; the next server on the directory delivers every one, in order per Task", async (t) => {
  const dir = tmpDir(t)
  const hook = await receiver(t)
  const first = await pushServer(t, `file:${dir}`, hook, TIMEOUT_MS)

  // The receiver refuses: every Task runs to its end, its notifications stay in the outbox.
  const ids: string[] = []
  for (let i = 0; i < TASKS; i++) ids.push(await sendWithHook(first.url, hook, hook.url(`/hook/${i}`)))
  await waitFor(() => allCompleted(first.url, ids), 30_000, "every Task to complete")
  await waitFor(() => new Set(hook.received.map((r) => r.taskId)).size === TASKS, 30_000, "a refused attempt for every Task")
  t.equal(hook.deliveredKeys(), 0, "nothing delivered while the receiver refuses")

  // The receiver stops answering: the server holds claims on requests under way when it is killed.
  hook.setMode("hold")
  await waitFor(() => hook.holding() > 0, 30_000, "a request held open")
  first.child.kill("SIGKILL")
  await first.exited
  await waitFor(() => hook.holding() === 0, 30_000, "the dead server's connections to close")
  const cut = hook.received.filter((r) => r.status === 0)
  t.ok(cut.length > 0, `${cut.length} requests were cut by the kill`)

  hook.setMode("accept")
  await pushServer(t, `file:${dir}`, hook, TIMEOUT_MS)
  // Every notification of every Task, SUBMITTED included: the configs were inline (checkDelivery).
  await waitFor(() => ids.every((id) => hook.received.some((r) => r.taskId === id && r.status === 200 && r.event === "TASK_STATE_COMPLETED")), 60_000, "every Task's last notification delivered")
  const redelivered = checkDelivery(t, hook.received, ids)
  t.equal(redelivered, 0, "no notification was answered 2xx twice")
  for (const r of cut) t.ok(hook.received.some((d) => d.status === 200 && d.key === r.key), "a request cut by the kill was sent again with its key")
})
