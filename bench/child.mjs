// Child processes for the bench: each server (and each measurement that wants a clean heap)
// runs in its own process, reports over IPC and is always killed by the one who started it.
import { fork } from "node:child_process"
import { once } from "node:events"

/** @typedef {import("node:child_process").ChildProcess} ChildProcess */
/**
 * What a child says over IPC: its first message ({ ready: true, url, ... }) or an answer; `error` when it failed.
 * The fields besides `error` are each child's own.
 * @typedef {{ error?: string, [field: string]: any }} ChildMessage
 */

/** @type {Set<ChildProcess>} */
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
 * @param {string} script
 * @param {string[]} [args]
 * @param {{ execArgv?: string[], timeoutMs?: number, env?: Record<string, string> }} [opts]
 * @returns {Promise<{ child: ChildProcess, info: ChildMessage }>}
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

/**
 * Sends a request over IPC and resolves with the child's answer to it.
 * @param {ChildProcess} child
 * @param {object} message
 * @param {number} [timeoutMs]
 * @returns {Promise<ChildMessage>}
 */
export function ask(child, message, timeoutMs = 600_000) {
  child.send(message)
  return firstMessage(child, timeoutMs, JSON.stringify(message).slice(0, 80)).then((reply) => {
    if (reply.error) throw new Error(reply.error)
    return reply
  })
}

/**
 * @param {ChildProcess} child
 * @param {number} timeoutMs
 * @param {string} what
 * @returns {Promise<ChildMessage>}
 */
function firstMessage(child, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(reject, new Error(`${what}: no answer in ${timeoutMs} ms`)), timeoutMs)
    /** @param {ChildMessage} m */
    const onMessage = (m) => finish(resolve, m)
    /** @param {number | null} code @param {NodeJS.Signals | null} signal */
    const onExit = (code, signal) => finish(reject, new Error(`${what}: exited (${signal ?? code}) before answering`))
    /**
     * @template V
     * @param {(value: V) => void} settle
     * @param {V} value
     */
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

/**
 * Asks the child to stop (it closes its server and exits, writing any --cpu-prof), then kills it if it lingers.
 * @param {ChildProcess} child
 * @param {number} [graceMs]
 */
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
 * @param {Record<string, (request: any) => Promise<object | undefined>>} handlers what each request's body is, its handler says
 * @param {() => Promise<void>} [close]
 */
export function serveParent(handlers, close = async () => {}) {
  handlers = { cpu: async () => ({ cpuUs: cpuMicroseconds() }), ...handlers }
  // A rejection here (a send that throws) is left unhandled on purpose: it ends the child, and the parent sees it gone.
  process.on("message", (/** @type {Record<string, unknown>} */ message) => void answer(message))
  /** @param {Record<string, unknown>} message */
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
      process.send?.({ ok: true, ...(await handler(message[name])) })
    } catch (err) {
      process.send?.({ error: errorText(err) })
    }
  }
  // The parent died without telling us: never outlive it.
  process.on("disconnect", () => process.exit(0))
}

/**
 * In a child: tells the parent it failed to start, then exits.
 * @param {unknown} err
 */
export function reportStartFailure(err) {
  process.send?.({ error: errorText(err) }, () => process.exit(1))
}

/**
 * The port a listening TCP server is bound to.
 * @param {{ address(): import("node:net").AddressInfo | string | null }} server
 */
export function portOf(server) {
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("not a listening TCP server")
  return address.port
}

/**
 * An error's message, or whatever was thrown as text.
 * @param {unknown} err
 */
export function errorMessage(err) {
  return err instanceof Error ? err.message : String(err)
}

/**
 * An error's stack, or whatever was thrown as text.
 * @param {unknown} err
 */
export function errorText(err) {
  return err instanceof Error ? String(err.stack ?? err) : String(err)
}

function cpuMicroseconds() {
  const { user, system } = process.cpuUsage()
  return user + system
}

/**
 * Runs `work` while measuring the CPU time `child` spends (it must answer `cpu`), and adds
 * `cpuUsPerRequest` to the result: a figure other load on the machine hardly moves, unlike req/s.
 * @template {{ requests: number }} R
 * @param {ChildProcess} child
 * @param {() => Promise<R>} work
 * @returns {Promise<R & { cpuUsPerRequest: number }>}
 */
export async function withChildCpu(child, work) {
  const before = (await ask(child, { cpu: {} })).cpuUs
  const result = await work()
  const after = (await ask(child, { cpu: {} })).cpuUs
  return { ...result, cpuUsPerRequest: result.requests > 0 ? (after - before) / result.requests : NaN }
}
