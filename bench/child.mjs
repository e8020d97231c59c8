// Child processes for the bench: each server (and each measurement that wants a clean heap)
// runs in its own process, reports over IPC and is always killed by the one who started it.
import { fork } from "node:child_process"
import { once } from "node:events"

const live = new Set()

/** Kills every child still running; the orchestrator calls it on exit, error and signals. */
export function killAll() {
  for (const child of live) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }
  live.clear()
}

/**
 * Forks `script` with IPC and waits for its first message ({ ready: true, ... }).
 * Rejects if it exits or reports an error first, or after `timeoutMs`.
 */
export async function startChild(script, args = [], { execArgv = [], timeoutMs = 60_000, env } = {}) {
  const child = fork(script, args, { execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"], env: { ...process.env, ...env } })
  live.add(child)
  child.once("exit", () => live.delete(child))
  const first = await firstMessage(child, timeoutMs, `${script} ${args.join(" ")}`)
  if (first.error) {
    await stopChild(child)
    throw new Error(`${script} failed to start: ${first.error}`)
  }
  return { child, info: first }
}

/** Sends a request over IPC and resolves with the child's answer to it. */
export function ask(child, message, timeoutMs = 600_000) {
  child.send(message)
  return firstMessage(child, timeoutMs, JSON.stringify(message).slice(0, 80)).then((reply) => {
    if (reply.error) throw new Error(reply.error)
    return reply
  })
}

function firstMessage(child, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(reject, new Error(`${what}: no answer in ${timeoutMs} ms`)), timeoutMs)
    const onMessage = (m) => finish(resolve, m)
    const onExit = (code, signal) => finish(reject, new Error(`${what}: exited (${signal ?? code}) before answering`))
    function finish(settle, value) {
      clearTimeout(timer)
      child.off("message", onMessage)
      child.off("exit", onExit)
      settle(value)
    }
    child.on("message", onMessage)
    child.on("exit", onExit)
  })
}

/** Asks the child to stop (it closes its server and exits, writing any --cpu-prof), then kills it if it lingers. */
export async function stopChild(child, graceMs = 10_000) {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, "exit")
  // A child that already said what it had to may be gone: a failed send is fine, the kill below ends a stuck one.
  if (child.connected) child.send({ stop: true }, () => {})
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
  await exited
  clearTimeout(timer)
  live.delete(child)
}

/**
 * In a child: runs `handlers[name](message)` for each request and answers with the result; `stop` closes
 * and exits. Every child also answers `cpu`: the CPU time it has used, in microseconds.
 */
export function serveParent(handlers, close = async () => {}) {
  handlers = { cpu: async () => ({ cpuUs: cpuMicroseconds() }), ...handlers }
  // A rejection here (a send that throws) is left unhandled on purpose: it ends the child, and the parent sees it gone.
  process.on("message", (message) => void answer(message))
  async function answer(message) {
    if (message.stop) {
      try {
        await close()
      } finally {
        process.exit(0) // exit, not kill: --cpu-prof writes its profile on a normal exit
      }
      return
    }
    try {
      const [name] = Object.keys(message)
      const handler = handlers[name]
      if (!handler) throw new Error(`unknown request ${name}`)
      process.send({ ok: true, ...(await handler(message[name])) })
    } catch (err) {
      process.send({ error: String(err?.stack ?? err) })
    }
  }
  // The parent died without telling us: never outlive it.
  process.on("disconnect", () => process.exit(0))
}

/** In a child: tells the parent it failed to start, then exits. */
export function reportStartFailure(err) {
  process.send?.({ error: String(err?.stack ?? err) }, () => process.exit(1))
}

function cpuMicroseconds() {
  const { user, system } = process.cpuUsage()
  return user + system
}

/**
 * Runs `work` while measuring the CPU time `child` spends (it must answer `cpu`), and adds
 * `cpuUsPerRequest` to the result: a figure other load on the machine hardly moves, unlike req/s.
 */
export async function withChildCpu(child, work) {
  const before = (await ask(child, { cpu: {} })).cpuUs
  const result = await work()
  const after = (await ask(child, { cpu: {} })).cpuUs
  return { ...result, cpuUsPerRequest: result.requests > 0 ? (after - before) / result.requests : NaN }
}
