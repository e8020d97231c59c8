import { internalsOf, isLiveHere, type RunnerId } from "../internals.js"
import { isProcessAlive } from "../process.js"
import { errorFields, type Logger } from "../log.js"
import { TaskConflictError, type LeaseBook, type TaskStore } from "../stores/task-store.js"
import type { A2ATask, TaskState } from "../types.js"
import { agentMessage } from "./conversation.js"

/** Says whether the process that wrote `runner` may still be running the task. */
export type LivenessCheck = (runner: RunnerId, self: RunnerId) => boolean | Promise<boolean>

/**
 * The default check, for processes sharing one host (a rolling redeploy on
 * one machine, one directory): alive when its pid is. A process on another
 * host cannot be checked from here and counts as alive; a store shared
 * across hosts needs leases instead.
 */
export const sameHostLiveness: LivenessCheck = (runner, self) => {
  if (runner.instance === self.instance) return true
  if (runner.host !== self.host) return true
  // Our own pid: another server in this process if its runner is still alive here,
  // else an earlier life of this process (a restarted container reusing the pid).
  if (runner.pid === self.pid) return isLiveHere(runner.instance)
  return isProcessAlive(runner.pid)
}

/** For stores shared across hosts: alive while its lease is. */
export function leaseLiveness(leases: LeaseBook): LivenessCheck {
  return (runner, self) => runner.instance === self.instance || leases.isAlive(runner.instance)
}

const UNFINISHED: TaskState[] = ["submitted", "working"]

/**
 * Fails the Tasks left `submitted` or `working` by a process that died, so a
 * peer polling them learns they will not finish. Needs a store with `list`;
 * Tasks whose process may be alive are left alone. Returns the ids failed.
 */
export async function recoverInterrupted(opts: { store: TaskStore; self: RunnerId; log: Logger; isAlive?: LivenessCheck; signal?: AbortSignal }): Promise<string[]> {
  const { store, self, log } = opts
  const isAlive = opts.isAlive ?? sameHostLiveness
  if (!store.list) return []
  const failed: string[] = []
  for (const state of UNFINISHED) {
    const orphans: A2ATask[] = []
    let pageToken: string | undefined
    do {
      if (opts.signal?.aborted) return failed
      const page = await store.list({ status: state, pageSize: 100, pageToken, includeArtifacts: true })
      for (const task of page.tasks) {
        const runner = internalsOf(task).runner
        if (runner !== undefined && !(await isAlive(runner, self))) orphans.push(task)
      }
      pageToken = page.nextPageToken || undefined
    } while (pageToken)
    // Saved after the listing, so the pages do not shift under the cursor.
    for (const task of orphans) {
      if (opts.signal?.aborted) return failed
      const runner = internalsOf(task).runner!
      const text = `Interrupted: the server running this task (pid ${runner.pid}) stopped before it finished; send the message again`
      const recovered: A2ATask = {
        ...task,
        status: {
          state: "failed",
          timestamp: new Date().toISOString(),
          message: agentMessage(task, text),
        },
      }
      try {
        await store.save(recovered)
        failed.push(task.id)
        log.warn({ taskId: task.id, state: "failed", previousState: state, deadPid: runner.pid }, "recovered a task interrupted by a stopped server")
      } catch (err) {
        if (err instanceof TaskConflictError) continue // finished meanwhile by someone else
        log.error({ taskId: task.id, ...errorFields(err) }, "could not mark an interrupted task failed")
      }
    }
  }
  return failed
}

/**
 * Recovery for the life of a server. On a store with leases (shared by
 * servers on several hosts) it renews this server's lease every third of
 * `leaseTtlMs` and sweeps for dead servers' Tasks every `leaseTtlMs`; on
 * any other store it sweeps once, at start, by pid.
 */
export class RecoveryService {
  private timers: NodeJS.Timeout[] = []
  private readonly ttl: number
  private readonly stopping = new AbortController()
  private sweeping: Promise<void> = Promise.resolve()

  constructor(private readonly opts: { store: TaskStore; self: RunnerId; log: Logger; leaseTtlMs?: number }) {
    this.ttl = opts.leaseTtlMs ?? 15_000
  }

  /**
   * Takes this server's lease, then sweeps. Waits for the first sweep at
   * most `FIRST_SWEEP_WAIT_MS`: a large store is swept in the background,
   * so the server still starts in time.
   */
  async start(): Promise<void> {
    const { store, self, log } = this.opts
    const leases = store.leases
    const sweep = () =>
      (this.sweeping = this.sweeping.then(async () => {
        try {
          const isAlive = leases ? leaseLiveness(leases) : sameHostLiveness
          await recoverInterrupted({ store, self, log, isAlive, signal: this.stopping.signal })
        } catch (err) {
          log.error(errorFields(err), "could not look for tasks interrupted by a stopped server")
        }
      }))
    if (leases) {
      const renew = async () => {
        try {
          await leases.renew(self.instance, this.ttl)
        } catch (err) {
          log.warn(errorFields(err), "could not renew this server's lease")
        }
      }
      await renew()
      this.timers = [setInterval(renew, Math.max(1, Math.floor(this.ttl / 3))), setInterval(sweep, this.ttl)]
      for (const timer of this.timers) timer.unref()
    }
    let waited: NodeJS.Timeout | undefined
    await Promise.race([sweep(), new Promise((resolve) => (waited = setTimeout(resolve, FIRST_SWEEP_WAIT_MS)))])
    clearTimeout(waited)
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer)
    this.timers = []
    this.stopping.abort()
    await this.sweeping
    try {
      await this.opts.store.leases?.release(this.opts.self.instance)
    } catch (err) {
      this.opts.log.warn(errorFields(err), "could not release this server's lease")
    }
  }
}

/** How long start-up waits for the first sweep before leaving it to the background. */
const FIRST_SWEEP_WAIT_MS = 2000
