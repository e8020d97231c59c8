// Two servers sharing one PostgreSQL store, as replicas behind a load balancer would: a Task created
// through one is read through the other. Needs PostgreSQL at 127.0.0.1:5432 with a database "test"
// (set TOOLNEXUS_EXAMPLE_PG_URL to use another); the store creates its tables on first use.
// Run: npm run build && node dist/examples/postgres-replicas.js
import assert from "node:assert/strict"
import { createLocalClient } from "toolnexus/client"
import { serve } from "toolnexus/fastify"

const url = process.env.TOOLNEXUS_EXAMPLE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
// A table of its own, so the example never meets another program's Tasks.
const store = `${url}?table=example_replica_tasks`

const client = createLocalClient(() => "the answer is 42")
// Given a postgres:// selector, each server opens its own pool to the same tables, and closes it on stop().
const one = await serve("127.0.0.1:0", { client, a2a: { name: "replica", store }, logger: false })
const two = await serve("127.0.0.1:0", { client, a2a: { name: "replica", store }, logger: false })

async function rpc(base: string, method: string, params: object): Promise<{ result: { task: { id: string; status: { state: string } } } }> {
  const res = await fetch(base, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  })
  return (await res.json()) as never
}

try {
  // Created on replica one; a 1.0 SendMessage waits for the Task to finish.
  const sent = await rpc(one.url, "SendMessage", { message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "what is the answer?" }] } })
  const id = sent.result.task.id
  console.log(`created ${id} on ${one.url}: ${sent.result.task.status.state}`)

  // Read on replica two: it has never seen this Task in memory, the store has.
  const got = (await rpc(two.url, "GetTask", { id })) as unknown as { result: { id: string; status: { state: string }; artifacts: Array<{ parts: Array<{ text: string }> }> } }
  assert.equal(got.result.id, id)
  assert.equal(got.result.status.state, "TASK_STATE_COMPLETED")
  console.log(`read ${id} on ${two.url}: ${got.result.artifacts[0].parts[0].text}`)
} finally {
  await Promise.all([one.stop(), two.stop()])
}
console.log("ok: a Task created on one replica was read on the other")
