import { hostname } from "node:os"
import { randomUUID } from "node:crypto"
import { copyWith } from "./objects.js"
import type { PushEvent } from "./stores/push-store.js"
import type { A2ATask, JsonObject } from "./types.js"

/**
 * What the server keeps about a Task for itself, under one reserved
 * metadata key: who may see it, and which process is running it. It is
 * stored with the Task (so it survives a restart and works for any store)
 * and stripped at the wire, so peers never see it.
 */
const INTERNALS_KEY = "toolnexus"

/** The process that runs a task, to tell a live run from one whose process died. */
export interface RunnerId {
  host: string
  pid: number
  /** Unique per process start, so a restarted process reusing the pid is not mistaken for the old one. */
  instance: string
}

interface TaskInternals {
  /** The principal that created the Task; only it can see the Task. Absent when the server has no authentication. */
  principal?: string
  /** The tenant the Task was created under (a 1.0 request's `tenant`): only requests naming it reach the Task. Absent: no tenant. */
  tenant?: string
  /** Which process runs (or last ran) the Task. */
  runner?: RunnerId
  /**
   * The highest push-notification sequence number this save commits: a
   * store that writes a Task's notifications before the Task (file, NATS)
   * delivers one only once the stored Task's pushSeq reached it.
   */
  pushSeq?: number
  /**
   * The save that committed pushSeq (a store whose notifications' keys name
   * their save: NATS): of notifications of the same seq written by two saves
   * at once, the one whose save landed.
   */
  pushWriter?: string
  /**
   * The notifications of this Task whose files are not durable on their own
   * (FileTaskStore): the save is their durable record, and they are made
   * again from it after a crash of the machine. Left out when there are none.
   */
  pushPending?: PendingPush[]
  /** The position in the Task's event log of the last event this save reflects (see EventLog): where a stream starting from this Task picks up. */
  events?: number
}

/** A notification as its Task's save records it (see TaskInternals.pushPending): its outbox item, less what the Task gives. */
export interface PendingPush {
  /** The process that wrote its file: the file's name carries it. */
  pid: number
  /** The store that wrote it, whose mark (`.push/.boot/w-<by>`) says when it no longer needs this record. */
  by: string
  key: string
  configId: string
  seq: number
  /** When it was enqueued, and due: ms since the epoch (a notification written anew after a failed attempt is synced, and no longer recorded here). */
  at: number
  /** What it reports, with its save's trace context when it had one (made again, the notification continues that trace); without `task`, the Task whose save records it (less its pushPending). */
  event: Omit<PushEvent, "task"> & { task?: A2ATask }
}

/** The runners alive in this process: several servers may share one process (and one store). */
const liveInstances = new Set<string>()

/** A new runner identity for this process, alive until retired. */
export function currentRunner(): RunnerId {
  const runner = { host: hostname(), pid: process.pid, instance: randomUUID() }
  liveInstances.add(runner.instance)
  return runner
}

/** The runner stopped: its instance id no longer counts as alive. */
export function retireRunner(runner: RunnerId): void {
  liveInstances.delete(runner.instance)
}

/** Whether a runner of this very process is still alive. */
export function isLiveHere(instance: string): boolean {
  return liveInstances.has(instance)
}

export function internalsOf(task: A2ATask): TaskInternals {
  const value = task.metadata?.[INTERNALS_KEY]
  return value !== null && typeof value === "object" ? value : {}
}

export function withInternals(task: A2ATask, internals: TaskInternals): A2ATask {
  return copyWith(task, { metadata: copyWith(task.metadata ?? {}, { [INTERNALS_KEY]: internals as unknown as JsonObject }) })
}

/** The push sequence a stored Task committed (see TaskInternals.pushSeq); 0 when it has none, or there is no Task. */
export function pushSeqOf(task: A2ATask | undefined): number {
  if (task === undefined) return 0
  const seq = internalsOf(task).pushSeq
  return typeof seq === "number" && Number.isSafeInteger(seq) && seq > 0 ? seq : 0
}

/** The save that committed the stored Task's pushSeq (see TaskInternals.pushWriter), if a store named it. */
export function pushWriterOf(task: A2ATask | undefined): string | undefined {
  if (task === undefined) return undefined
  const writer = internalsOf(task).pushWriter
  return typeof writer === "string" ? writer : undefined
}

/** The event-log position a stored Task reflects (see TaskInternals.events); 0 when it has none. */
export function positionOf(task: A2ATask): number {
  const position = internalsOf(task).events
  return typeof position === "number" && Number.isSafeInteger(position) && position > 0 ? position : 0
}

/** The Task carrying `position` as the event-log position it reflects. */
export function withPosition(task: A2ATask, position: number): A2ATask {
  return positionOf(task) === position ? task : withInternals(task, { ...internalsOf(task), events: position })
}

/** The Task carrying `seq` as its committed push sequence, and `writer` as the save that committed it (the Task itself when it already does). */
export function withPushSeq(task: A2ATask, seq: number, writer?: string): A2ATask {
  const internals = internalsOf(task)
  if ((internals.pushSeq ?? 0) === seq && internals.pushWriter === writer) return task
  const { pushSeq: _seq, pushWriter: _writer, ...rest } = internals
  return withInternals(task, { ...rest, ...(seq === 0 ? {} : { pushSeq: seq }), ...(writer === undefined ? {} : { pushWriter: writer }) })
}

/** The notifications the stored Task records as pending (see TaskInternals.pushPending); none when it has no list. */
export function pushPendingOf(task: A2ATask | undefined): PendingPush[] {
  if (task === undefined) return []
  const pending = internalsOf(task).pushPending
  return Array.isArray(pending) ? pending.filter(isPendingPush) : []
}

function isPendingPush(value: PendingPush): boolean {
  return (
    value !== null &&
    typeof value === "object" &&
    Number.isSafeInteger(value.pid) &&
    typeof value.by === "string" &&
    typeof value.key === "string" &&
    typeof value.configId === "string" &&
    Number.isSafeInteger(value.seq) &&
    Number.isFinite(value.at) &&
    value.event !== null &&
    typeof value.event === "object"
  )
}

/** The Task without its pushPending: what a notification reports, and what a save starts from (a list read with the Task is never saved again as it was). */
export function withoutPushPending(task: A2ATask): A2ATask {
  const internals = internalsOf(task)
  if (internals.pushPending === undefined) return task
  const { pushPending: _pending, ...rest } = internals
  return withInternals(task, rest)
}

/** The Task carrying `seq` as its committed push sequence and `pending` as its pending notifications (none: no list). */
export function withPushRecord(task: A2ATask, seq: number, pending: PendingPush[]): A2ATask {
  const internals = internalsOf(task)
  if ((internals.pushSeq ?? 0) === seq && internals.pushPending === undefined && pending.length === 0) return task
  const { pushSeq: _seq, pushPending: _pending, ...rest } = internals
  return withInternals(task, { ...rest, ...(seq === 0 ? {} : { pushSeq: seq }), ...(pending.length === 0 ? {} : { pushPending: pending }) })
}

/** The Task as peers see it: without the server's own metadata. */
export function publicTask(task: A2ATask): A2ATask {
  if (task.metadata === undefined || !(INTERNALS_KEY in task.metadata)) return task
  const { metadata: _all, ...rest } = task
  const metadata = publicMetadata(task)
  return metadata === undefined ? rest : copyWith(rest, { metadata })
}

/** A Task's metadata without the server's own; undefined when nothing else is left. */
export function publicMetadata(task: A2ATask): JsonObject | undefined {
  const all = task.metadata
  if (all === undefined || !(INTERNALS_KEY in all)) return all
  let rest: JsonObject | undefined
  for (const key in all) {
    if (key !== INTERNALS_KEY) (rest ??= {})[key] = all[key]
  }
  return rest
}

/**
 * A Task's owner, for store queries (TaskQuery.owners): the principal that
 * created it, or `null` when it was created without authentication. The
 * one place that knows where the owner is kept. `false` when that field
 * holds something other than a name (not written by this server): such a
 * Task matches no owner a query names, so no principal sees it.
 */
export function ownerOf(task: A2ATask): string | null | false {
  return ownerFromField(internalsOf(task).principal)
}

function ownerFromField(field: unknown): string | null | false {
  return field === undefined ? null : typeof field === "string" ? field : false
}

/**
 * A Task's tenant, for store queries (TaskQuery.tenant): the one it was
 * created under, `null` for none. `false` when that field holds something
 * other than a name (not written by this server): no query's tenant matches.
 */
export function tenantOf(task: A2ATask): string | null | false {
  const field = internalsOf(task).tenant
  return field === undefined ? null : typeof field === "string" ? field : false
}

/** Whether a Task was created under `tenant` (`null`: under none). A Task is reached only under its own tenant, and one without a tenant only without one. */
export function isInTenant(task: A2ATask, tenant: string | null): boolean {
  return tenantOf(task) === tenant
}

/**
 * Who sees what, the one rule: the owners whose Tasks `principal` may see,
 * as a store query's `owners`. Without authentication (`principal`
 * undefined), every owner's (no filter). With it, the principal's own; the
 * Tasks without an owner (saved before authentication was on) belong to
 * nobody, unless the operator named their owner (`unownedTasksBelongTo`):
 * then to that principal alone. They are never shared.
 */
export function ownersVisibleTo(principal: string | undefined, unownedTasksBelongTo?: string): Array<string | null> | undefined {
  if (principal === undefined) return undefined
  return principal === unownedTasksBelongTo ? [principal, null] : [principal]
}

/** Whether a Task is among `owners` (what ownersVisibleTo gives; undefined: every owner). */
export function isVisibleTo(task: A2ATask, owners: ReadonlyArray<string | null> | undefined): boolean {
  return mayRead(owners, internalsOf(task).principal)
}

/** The same rule, given the Task's internals' principal field as it is stored (undefined for an unowned Task). */
export function mayRead(owners: ReadonlyArray<string | null> | undefined, principalField: unknown): boolean {
  if (owners === undefined) return true
  const owner = ownerFromField(principalField)
  return owner !== false && owners.includes(owner)
}
