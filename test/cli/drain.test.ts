import fs from "node:fs"
import path from "node:path"
import t from "tap"
import { parseCli } from "../../lib/cli.js"
import { deferred, modelServer, openAIText, rpc, startCli, tmpDir, waitFor, type Scripted } from "../fixtures/helpers.js"

/**
 * The command on SIGTERM, as a real child process: /readyz turns 503 at once while the A2A routes keep
 * answering (with connection: close); a second SIGTERM skips the rest of the drain delay; the Task running
 * then finishes within the shutdown grace, and the process exits 0 with no Task left working.
 */

const send = (url: string, text: string) =>
  fetch(`${url}/`, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify(rpc("SendMessage", { message: { messageId: `m-${text}`, role: "ROLE_USER", parts: [{ text }] }, configuration: { returnImmediately: true } })),
  })

t.test("SIGTERM drains: readiness 503, the rest still served, a second SIGTERM goes on, exit 0 with the running Task completed", async (t) => {
  const dir = tmpDir(t)
  const answer = deferred<Scripted>()
  const model = await modelServer(t, () => answer.promise)
  // A drain delay far longer than the test: only the second SIGTERM ends it, so no step races a timer.
  const { url, child, lines } = await startCli(t, ["--port", "0", "--store", `file:${dir}`, "--base-url", model.url, "--model", "m"], { TOOLNEXUS_DRAIN_DELAY: "10m" })
  t.equal((await fetch(`${url}/readyz`)).status, 200, "ready once listening")

  const running = (await (await send(url, "held")).json()) as { result: { task: { id: string } } }
  const runningId = running.result.task.id
  await waitFor(() => model.requests.length === 1, 10_000, "the model called for the running Task")
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))

  child.kill("SIGTERM")
  await waitFor(async () => (await fetch(`${url}/readyz`)).status === 503, 10_000, "readiness turning 503")
  const ready = await fetch(`${url}/readyz`)
  t.same(await ready.json(), { status: "unavailable", reason: "draining" })
  t.equal((await fetch(`${url}/healthz`)).status, 200, "alive while draining")
  const during = await fetch(`${url}/`, {
    method: "POST",
    headers: { "content-type": "application/json", "a2a-version": "1.0" },
    body: JSON.stringify(rpc("GetTask", { id: runningId })),
  })
  t.equal(during.status, 200, "the A2A routes still answer during the delay")
  t.equal(during.headers.get("connection"), "close", "each answer closes its connection")
  t.match(await during.json(), { result: { id: runningId, status: { state: "TASK_STATE_WORKING" } } })
  t.ok(lines.some((line) => line.msg === "draining: /readyz answers 503, then the server stops and lets running tasks finish" && line.drainMs === 600_000), "the log says it drains, and for how long")

  child.kill("SIGTERM")
  await waitFor(() => lines.some((line) => line.msg === "stopping now: the drain delay is skipped"), 10_000, "the second SIGTERM seen")
  // The server no longer listens; the running Task still has its grace to finish.
  answer.resolve(openAIText("finished during the grace"))
  t.equal(await exited, 0, "exits 0")

  const stored = JSON.parse(fs.readFileSync(path.join(dir, `${runningId}.json`), "utf8")) as { status: { state: string }; artifacts: Array<{ parts: Array<{ text: string }> }> }
  t.equal(stored.status.state, "completed", "the Task running at SIGTERM completed")
  t.equal(stored.artifacts[0].parts[0].text, "finished during the grace")
  const states = fs
    .readdirSync(dir)
    .filter((name) => name.endsWith(".json"))
    .map((name) => (JSON.parse(fs.readFileSync(path.join(dir, name), "utf8")) as { status: { state: string } }).status.state)
  t.same(states, ["completed"], "no Task left working")
})

t.test("SIGINT stops without the drain delay", async (t) => {
  const { url, child } = await startCli(t, ["--port", "0", "--store", "memory"], { TOOLNEXUS_DRAIN_DELAY: "10m" })
  t.equal((await fetch(`${url}/readyz`)).status, 200)
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  child.kill("SIGINT")
  t.equal(await exited, 0, "exits 0 without waiting ten minutes")
})

t.test("--drain-delay and TOOLNEXUS_DRAIN_DELAY: a duration, 0 for none, 5s by default", async (t) => {
  const delay = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    return config === "help" ? undefined : config.drainDelayMs
  }
  t.equal(delay([]), 5000)
  t.equal(delay(["--drain-delay", "0"]), 0)
  t.equal(delay(["--drain-delay", "1500"]), 1500)
  t.equal(delay([], { TOOLNEXUS_DRAIN_DELAY: "30s" }), 30_000)
  t.equal(delay(["--drain-delay", "2s"], { TOOLNEXUS_DRAIN_DELAY: "30s" }), 2000, "the flag wins")
  t.throws(() => delay(["--drain-delay", "soon"]), /--drain-delay should be a duration from 0 to 24 days/)
  t.throws(() => delay(["--drain-delay", "0.5"]), /--drain-delay should be/)
  t.throws(() => delay(["--drain-delay", "30d"]), /--drain-delay should be/, "past Node's longest timer")
})
