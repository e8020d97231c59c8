import { internalsOf, isLiveHere, type RunnerId } from "../internals.js"
import { isProcessAlive } from "../process.js"
import { errorFields, type Logger } from "../log.js"
import { MAX_PAGE_SIZE } from "../stores/list.js"
import { TaskConflictError, type LeaseBook, type TaskStore } from "../stores/task-store.js"
import type { A2ATask, TaskState } from "../types.js"
import { agentMessage } from "./conversation.js"
import type { SaveTransition } from "./transitions.js"

/** Says whether the process that wrote `runner` may still be running the task. */
type LivenessCheck = (runner: RunnerId, self: RunnerId) => boolean | Promise<boolean>

/**
 * The default check, for processes sharing one host (a rolling redeploy on
 * one machine, one directory): alive when its pid is (a zombie is not). A process on another
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
function leaseLiveness(leases: LeaseBook): LivenessCheck {
  return (runner, self) => runner.instance === self.instance || leases.isAlive(runner.instance)
}

const UNFINISHED: TaskState[] = ["submitted", "working"]

/**
 * Fails the Tasks left `submitted` or `working` by a process that died, so a
 * peer polling them learns they will not finish. Needs a store with `list`;
 * Tasks whose process may be alive are left alone (and, when another
 * process runs them, its runner is told to `onAlive`). Returns the ids failed.
 */
export async function recoverInterrupted(opts: {
  store: TaskStore
  self: RunnerId
  log: Logger
  isAlive?: LivenessCheck
  signal?: AbortSignal
  onAlive?: (runner: RunnerId) => void
  /** How the failed state is saved (with push on, with its notification); default `store.save`. */
  saveTransition?: SaveTransition
}): Promise<string[]> {
  const { store, self, log } = opts
  const isAlive = opts.isAlive ?? sameHostLiveness
  if (!store.list) return []
  // One verdict per process and sweep: a busy neighbour has many Tasks, its pid is checked once.
  const verdicts = new Map<string, Promise<boolean>>()
  const alive = (runner: RunnerId): Promise<boolean> => {
    let verdict = verdicts.get(runner.instance)
    if (verdict === undefined) verdicts.set(runner.instance, (verdict = Promise.resolve(isAlive(runner, self))))
    return verdict
  }
  const failed: string[] = []
  for (const state of UNFINISHED) {
    const orphans: A2ATask[] = []
    let pageToken: string | undefined
    do {
      if (opts.signal?.aborted) return failed
      const page = await store.list({ status: state, pageSize: MAX_PAGE_SIZE, pageToken, includeArtifacts: true })
      for (const task of page.tasks) {
        const runner = internalsOf(task).runner
        if (runner === undefined) continue
        if (!(await alive(runner))) orphans.push(task)
        else if (runner.instance !== self.instance) opts.onAlive?.(runner)
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
        await (opts.saveTransition ?? ((task: A2ATask) => store.save(task)))(recovered)
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

interface RecoveryOptions {
  store: TaskStore
  self: RunnerId
  log: Logger
  /** On a store with leases: how long a server counts as alive after its last renewal (default 15000 ms). */
  leaseTtlMs?: number
  /** Without leases: how often the processes of unfinished Tasks are checked again (default 5000 ms). */
  checkIntervalMs?: number
  /** How a recovered Task's failed state is saved; default `store.save`. */
  saveTransition?: SaveTransition
}

/**
 * Recovery for the life of a server: a sweep at start, then a check every
 * `checkIntervalMs` (by pid) or `leaseTtlMs` (on a store with leases, whose
 * lease it renews every third of that). A check sweeps again at once when a
 * process seen running Tasks has died since (a neighbour on the same
 * directory killed in a rolling redeploy), and otherwise when the sweep is
 * due: at most one sweep per SWEEP_DUTY times the last one's duration, so a
 * large store is not read end to end every few seconds. stop() ends it all.
 */
export class RecoveryService {
  private readonly every: number
  private readonly stopping = new AbortController()
  private readonly isAlive: LivenessCheck
  /** The sweeps, one after the other; settles when the last one asked for has. */
  private sweeping: Promise<void> = Promise.resolve()
  private checking: Promise<void> = Promise.resolve()
  private renewing: Promise<void> = Promise.resolve()
  private checkTimer: NodeJS.Timeout | undefined
  private renewTimer: NodeJS.Timeout | undefined
  /** Other processes seen running unfinished Tasks at the last sweep, by instance. */
  private neighbours = new Map<string, RunnerId>()
  private lastSweepEnd = 0
  private lastSweepMs = 0

  constructor(private readonly opts: RecoveryOptions) {
    const leases = opts.store.leases
    this.isAlive = leases ? leaseLiveness(leases) : sameHostLiveness
    this.every = leases ? (opts.leaseTtlMs ?? 15_000) : (opts.checkIntervalMs ?? 5000)
  }

  /**
   * Takes this server's lease, then sweeps. Waits for the first sweep at
   * most `FIRST_SWEEP_WAIT_MS`: a large store is swept in the background,
   * so the server still starts in time.
   */
  async start(): Promise<void> {
    const leases = this.opts.store.leases
    if (leases) {
      const ttl = this.every
      const renew = () => (this.renewing = this.renew(leases, ttl))
      await renew()
      this.renewTimer = setInterval(() => void renew(), Math.max(1, Math.floor(ttl / 3)))
      this.renewTimer.unref()
    }
    let waited: NodeJS.Timeout | undefined
    await Promise.race([this.sweep(), new Promise((resolve) => (waited = setTimeout(resolve, FIRST_SWEEP_WAIT_MS)))])
    clearTimeout(waited)
    this.scheduleCheck()
  }

  /** Ends the checks and the lease renewals, waits for a sweep under way to stop, and gives the lease up. */
  async stop(): Promise<void> {
    this.stopping.abort()
    clearTimeout(this.checkTimer)
    clearInterval(this.renewTimer)
    await Promise.all([this.checking, this.sweeping, this.renewing])
    try {
      await this.opts.store.leases?.release(this.opts.self.instance)
    } catch (err) {
      this.opts.log.warn(errorFields(err), "could not release this server's lease")
    }
  }

  private async renew(leases: LeaseBook, ttl: number): Promise<void> {
    try {
      await leases.renew(this.opts.self.instance, ttl)
    } catch (err) {
      this.opts.log.warn(errorFields(err), "could not renew this server's lease")
    }
  }

  private scheduleCheck(): void {
    if (this.stopping.signal.aborted) return
    this.checkTimer = setTimeout(() => {
      this.checking = this.check().finally(() => this.scheduleCheck())
    }, this.every)
    this.checkTimer.unref()
  }

  /** Sweeps when a neighbour died since the last sweep, or when one is due. */
  private async check(): Promise<void> {
    await this.sweeping
    const due = performance.now() - this.lastSweepEnd >= this.lastSweepMs * (SWEEP_DUTY - 1)
    if (due || (await this.aNeighbourDied())) await this.sweep()
  }

  private async aNeighbourDied(): Promise<boolean> {
    for (const runner of this.neighbours.values()) {
      if (this.stopping.signal.aborted) return false
      try {
        if (!(await this.isAlive(runner, this.opts.self))) return true
      } catch (err) {
        this.opts.log.warn(errorFields(err), "could not check whether another server is alive")
      }
    }
    return false
  }

  private sweep(): Promise<void> {
    this.sweeping = this.sweeping.then(async () => {
      if (this.stopping.signal.aborted) return
      const { store, self, log } = this.opts
      const started = performance.now()
      const neighbours = new Map<string, RunnerId>()
      try {
        await recoverInterrupted({ store, self, log, saveTransition: this.opts.saveTransition, isAlive: this.isAlive, signal: this.stopping.signal, onAlive: (runner) => neighbours.set(runner.instance, runner) })
        this.neighbours = neighbours
      } catch (err) {
        log.error(errorFields(err), "could not look for tasks interrupted by a stopped server")
      }
      this.lastSweepEnd = performance.now()
      this.lastSweepMs = this.lastSweepEnd - started
    })
    return this.sweeping
  }
}

/** How long start-up waits for the first sweep before leaving it to the background. */
const FIRST_SWEEP_WAIT_MS = 2000
/** A sweep that took d ms is not due again for SWEEP_DUTY × d: at most 1/SWEEP_DUTY of the time goes on sweeps (the file store reads every Task file in one). */
const SWEEP_DUTY = 20
