import t, { type Test } from "tap"
import { callRpc, deferred, modelServer, openAIText, readSse, rpc, startCli, waitFor, type ModelRequest, type Scripted } from "./helpers.js"

/**
 * Two real toolnexus processes on one shared store: send to A, then read,
 * list, cancel and subscribe through B. Each backend's test file calls
 * twoServers() with a store selector naming a fresh table or bucket.
 */

const promptOf = (request: ModelRequest) => {
  const content = request.body.messages.at(-1)?.content
  return typeof content === "string" ? content : ""
}

/** An OpenAI-style model that answers "done: <prompt>" at once, or holds prompts starting with "hold" until the test answers them. */
async function fakeModel(t: Test) {
  const held = new Map<string, ReturnType<typeof deferred<Scripted>>>()
  const { url, requests } = await modelServer(t, (request) => {
    const prompt = promptOf(request)
    if (!prompt.startsWith("hold")) return openAIText(`done: ${prompt}`)
    const answer = deferred<Scripted>()
    held.set(prompt, answer)
    return answer.promise
  })
  const abandoned = (prompt: string) => requests.some((request) => promptOf(request) === prompt && request.abandoned)
  return { url, held, abandoned }
}

const call = (url: string, method: string, params: unknown) => callRpc(url, rpc(method, params), { "a2a-version": "1.0" })

/** Opens SubscribeToTask on `url`; its events' results arrive in `messages` as they come. */
async function subscribe(url: string, id: string) {
  const res = await fetch(url + "/", {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify(rpc("SubscribeToTask", { id }, 9)),
  })
  return readSse(res.body!)
}

const message = (text: string) => ({ message: { messageId: `m-${text}-${Math.random()}`, role: "ROLE_USER", parts: [{ text }] } })

export function twoServers(backend: string, makeSelector: () => Promise<{ selector: string; cleanup: () => Promise<void> }>): void {
  t.test(`${backend}: two server processes share tasks, cancels and streams`, async (t) => {
    const { selector, cleanup } = await makeSelector()
    t.teardown(cleanup)
    const model = await fakeModel(t)
    const serverArgs = ["--port", "0", "--store", selector, "--base-url", model.url, "--model", "m"]
    const a = await startCli(t, serverArgs)
    const b = await startCli(t, serverArgs)

    // Send to A, read and list through B.
    const quick = await call(a.url, "SendMessage", message("quick"))
    t.equal(quick.result.task.status.state, "TASK_STATE_COMPLETED")
    const read = await call(b.url, "GetTask", { id: quick.result.task.id })
    t.equal(read.result.artifacts[0].parts[0].text, "done: quick", "B reads what A saved")
    const listed = await call(b.url, "ListTasks", { includeArtifacts: true })
    t.ok(listed.result.tasks.some((task: any) => task.id === quick.result.task.id), "B lists it")

    // A stream opened on B sees A's updates.
    const slow = await call(a.url, "SendMessage", { ...message("hold slow"), configuration: { returnImmediately: true } })
    const slowId = slow.result.task.id
    await waitFor(() => model.held.has("hold slow"), 10_000, "A to call the model")
    const followed = await subscribe(b.url, slowId)
    await waitFor(() => followed.messages.length >= 1, 10_000, "B's stream to start")
    model.held.get("hold slow")!.resolve(openAIText("done: slow"))
    const seen = (await followed.done).map((event) => event.result)
    t.match(seen.at(-2), { artifactUpdate: { artifact: { parts: [{ text: "done: slow" }] } } }, "B's stream carries A's artifact")
    t.match(seen.at(-1), { statusUpdate: { status: { state: "TASK_STATE_COMPLETED" } } }, "and closes at A's completion")

    // A cancel sent to B stops the work running on A.
    const long = await call(a.url, "SendMessage", { ...message("hold long"), configuration: { returnImmediately: true } })
    const longId = long.result.task.id
    await waitFor(() => model.held.has("hold long"), 10_000, "A to call the model")
    const watching = await subscribe(b.url, longId)
    await waitFor(() => watching.messages.length >= 1, 10_000, "B's stream to start")
    const canceled = await call(b.url, "CancelTask", { id: longId })
    t.equal(canceled.result.status.state, "TASK_STATE_CANCELED")
    await waitFor(() => model.abandoned("hold long"), 10_000, "A's model request to be aborted")
    t.match((await watching.done).at(-1)?.result, { statusUpdate: { status: { state: "TASK_STATE_CANCELED" } } }, "B's stream ends canceled")
    t.equal((await call(a.url, "GetTask", { id: longId })).result.status.state, "TASK_STATE_CANCELED", "A agrees")
  })
}
