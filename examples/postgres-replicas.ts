// Two servers sharing one PostgreSQL store, as replicas behind a load balancer would: a Task created
// through one is read through the other. Needs PostgreSQL at 127.0.0.1:5432 with a database "test"
// (set TOOLNEXUS_EXAMPLE_PG_URL to use another); the store creates its tables on first use.
// Run: npm run build && node dist/examples/postgres-replicas.js
import assert from "node:assert/strict"
import { createLocalClient } from "toolnexus/client"
import { serve } from "toolnexus/fastify"

const url = process.env.TOOLNEXUS_EXAMPLE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test"
// A table of its own, so the example never meets another program's Tasks.
const selector = new URL(url)
selector.searchParams.set("table", "example_replica_tasks")
const store = selector.href

const client = createLocalClient(() => "the answer is 42")
// Given a postgres:// selector, each server opens its own pool to the same tables, and closes it on stop().
const one = await serve("127.0.0.1:0", { client, a2a: { name: "replica", store }, logger: false })
const two = await serve("127.0.0.1:0", { client, a2a: { name: "replica", store }, logger: false })

/** One JSON-RPC call in A2A 1.0; `Result` is the shape the caller expects back. */
async function rpc<Result>(base: string, method: string, params: object): Promise<Result> {
  const res = await fetch(base, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  })
  const answer = (await res.json()) as { result: Result }
  return answer.result
}

interface Task {
  id: string
  status: { state: string }
  artifacts?: Array<{ parts: Array<{ text: string }> }>
}

try {
  // Created on replica one; a 1.0 SendMessage waits for the Task to finish.
  const { task: sent } = await rpc<{ task: Task }>(one.url, "SendMessage", { message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "what is the answer?" }] } })
  const id = sent.id
  console.log(`created ${id} on ${one.url}: ${sent.status.state}`)

  // Read on replica two: it has never seen this Task in memory, the store has.
  const got = await rpc<Task>(two.url, "GetTask", { id })
  assert.equal(got.id, id)
  assert.equal(got.status.state, "TASK_STATE_COMPLETED")
  console.log(`read ${id} on ${two.url}: ${got.artifacts?.[0].parts[0].text}`)
} finally {
  await Promise.all([one.stop(), two.stop()])
}
console.log("ok: a Task created on one replica was read on the other")
