import { spawn, type ChildProcess } from "node:child_process"
import http from "node:http"
import path from "node:path"
import readline from "node:readline"
import t from "tap"
import { waitFor } from "./helpers.js"

/**
 * Two real toolnexus processes on one shared store: send to A, then read,
 * list, cancel and subscribe through B. Each backend's test file calls
 * twoServers() with a store selector naming a fresh table or bucket.
 */
const root = path.resolve(import.meta.dirname, "..")

/** An OpenAI-style model that answers "done: <prompt>" at once, or holds prompts starting with "hold" until released. */
async function fakeModel() {
  const held = new Map<string, { release: (text: string) => void; aborted: boolean }>()
  const server = http.createServer((req, res) => {
    let body = ""
    req.on("data", (chunk) => (body += chunk))
    req.on("end", () => {
      const prompt = String(JSON.parse(body).messages.at(-1)?.content ?? "")
      const answer = (text: string) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ choices: [{ message: { content: text } }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }))
      }
      if (!prompt.startsWith("hold")) return answer(`done: ${prompt}`)
      const entry = { release: answer, aborted: false }
      held.set(prompt, entry)
      res.on("close", () => {
        if (!res.writableEnded) entry.aborted = true
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, held, server }
}

async function startServer(store: string, modelUrl: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [path.join(root, "dist/bin/toolnexus.js"), "--port", "0", "--store", store, "--base-url", modelUrl, "--model", "m"], { cwd: root })
  let stderr = ""
  child.stderr!.on("data", (chunk) => (stderr += chunk))
  const url = await new Promise<string>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).on("line", (line) => {
      const entry = JSON.parse(line)
      if (entry.msg === "toolnexus agent listening") resolve(entry.url)
    })
    child.once("exit", (code) => reject(new Error(`server exited early (${code}): ${stderr}`)))
  })
  return { url, child }
}

const rpc = async (url: string, method: string, params: unknown, version = "1.0") =>
  (await fetch(url + "/", {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": version },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  }).then((r) => r.json())) as any

/** Opens SubscribeToTask on `url` and collects the events as they arrive, until the stream ends. */
function subscribe(url: string, id: string) {
  const events: any[] = []
  const done = fetch(url + "/", {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "SubscribeToTask", params: { id } }),
  }).then(async (res) => {
    let buffered = ""
    for await (const chunk of res.body!.pipeThrough(new TextDecoderStream())) {
      buffered += chunk
      let end: number
      while ((end = buffered.indexOf("\n\n")) >= 0) {
        events.push(JSON.parse(buffered.slice(0, end).replace(/^data: /, "")).result)
        buffered = buffered.slice(end + 2)
      }
    }
    return events
  })
  return { events, done }
}

const message = (text: string) => ({ message: { messageId: `m-${text}-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] } })

export function twoServers(backend: string, makeSelector: () => Promise<{ selector: string; cleanup: () => Promise<void> }>): void {
  t.test(`${backend}: two server processes share tasks, cancels and streams`, async (t) => {
    const { selector, cleanup } = await makeSelector()
    t.teardown(cleanup)
    const model = await fakeModel()
    t.teardown(() => {
      model.server.closeAllConnections()
      model.server.close()
    })
    const a = await startServer(selector, model.url)
    t.teardown(() => a.child.kill("SIGKILL"))
    const b = await startServer(selector, model.url)
    t.teardown(() => b.child.kill("SIGKILL"))

    // Send to A, read and list through B.
    const quick = await rpc(a.url, "SendMessage", message("quick"))
    t.equal(quick.result.task.status.state, "TASK_STATE_COMPLETED")
    const read = await rpc(b.url, "GetTask", { id: quick.result.task.id })
    t.equal(read.result.artifacts[0].parts[0].text, "done: quick", "B reads what A saved")
    const listed = await rpc(b.url, "ListTasks", { includeArtifacts: true })
    t.ok(listed.result.tasks.some((task: any) => task.id === quick.result.task.id), "B lists it")

    // A stream opened on B sees A's updates.
    const slow = await rpc(a.url, "SendMessage", { ...message("hold slow"), configuration: { returnImmediately: true } })
    const slowId = slow.result.task.id
    await waitFor(() => model.held.has("hold slow"), 10_000, "A to call the model")
    const followed = subscribe(b.url, slowId)
    await waitFor(() => followed.events.length >= 1, 10_000, "B's stream to start")
    model.held.get("hold slow")!.release("done: slow")
    const seen = await followed.done
    t.match(seen.at(-2), { artifactUpdate: { artifact: { parts: [{ text: "done: slow" }] } } }, "B's stream carries A's artifact")
    t.match(seen.at(-1), { statusUpdate: { status: { state: "TASK_STATE_COMPLETED" } } }, "and closes at A's completion")

    // A cancel sent to B stops the work running on A.
    const long = await rpc(a.url, "SendMessage", { ...message("hold long"), configuration: { returnImmediately: true } })
    const longId = long.result.task.id
    await waitFor(() => model.held.has("hold long"), 10_000, "A to call the model")
    const watching = subscribe(b.url, longId)
    await waitFor(() => watching.events.length >= 1, 10_000, "B's stream to start")
    const canceled = await rpc(b.url, "CancelTask", { id: longId })
    t.equal(canceled.result.status.state, "TASK_STATE_CANCELED")
    await waitFor(() => model.held.get("hold long")!.aborted, 10_000, "A's model request to be aborted")
    t.match((await watching.done).at(-1), { statusUpdate: { status: { state: "TASK_STATE_CANCELED" } } }, "B's stream ends canceled")
    t.equal((await rpc(a.url, "GetTask", { id: longId })).result.status.state, "TASK_STATE_CANCELED", "A agrees")
  })
}
