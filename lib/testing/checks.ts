import { isDeepStrictEqual } from "node:util"
import type { TaskStore } from "../stores/task-store.js"
import type { A2ATask, TaskState } from "../types.js"

/** One broken promise of a store: the check that found it and what it saw. */
export interface ContractFailure {
  /** The name of the check, as listed in the contract's check names. */
  check: string
  /** What the check expected and what the store did instead. */
  message: string
}

/** Options every contract runner takes. */
export interface ContractOptions {
  /** How long one check may run, in milliseconds, before it fails as timed out. Default 60 000. */
  timeoutMs?: number
  /** Run only the checks with these names (see the contract's list of names); default every check. */
  only?: readonly string[]
}

/** A value or a promise of it: what a store factory may return. */
export type Awaitable<T> = T | Promise<T>

/**
 * A store and a way to open another store on the same medium (directory,
 * tables, buckets): a second process, or the same one after a restart.
 * The checks that need two stores run only when a factory returns this.
 */
export interface StoreWithPeer {
  /** A fresh, empty store. */
  store: TaskStore
  /** Another store over what `store` holds. */
  another(): Awaitable<TaskStore>
}

/** The default of ContractOptions.timeoutMs. */
export const DEFAULT_CHECK_TIMEOUT_MS = 60_000

/** How long the runner waits for a check's stores to close. */
const CLOSE_TIMEOUT_MS = 5_000

/** A broken expectation inside a check; its message becomes the failure's. */
export class ContractError extends Error {
  override name = "ContractError"
}

/** The stores a check opens; the runner closes every one when the check ends. */
export interface CheckContext {
  /** Keeps `store` to be closed when the check ends, and gives it back. */
  track(store: TaskStore): TaskStore
}

/** One named check of a contract. */
export interface Check<M> {
  name: string
  run(make: M, context: CheckContext): Promise<void>
}

/** Settles with "timeout" when `promise` takes longer than `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<{ value: T } | "timeout"> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), ms)
  })
  try {
    return await Promise.race([promise.then((value) => ({ value })), timeout])
  } finally {
    clearTimeout(timer)
  }
}

const messageOf = (err: unknown) => (err instanceof ContractError ? err.message : `threw ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`)

/** Runs `checks` one after another, each bounded by the timeout, and closes the stores each opened. */
export async function runChecks<M>(checks: ReadonlyArray<Check<M>>, make: M, options: ContractOptions = {}): Promise<ContractFailure[]> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw new TypeError(`options.timeoutMs should be a positive number of milliseconds, got ${String(options.timeoutMs)}`)
  const known = new Set(checks.map((check) => check.name))
  const unknown = options.only?.filter((name) => !known.has(name)) ?? []
  if (unknown.length > 0) throw new TypeError(`options.only names no check of this contract: ${unknown.map((name) => JSON.stringify(name)).join(", ")}`)
  const failures: ContractFailure[] = []
  for (const check of checks) {
    if (options.only && !options.only.includes(check.name)) continue
    const opened: TaskStore[] = []
    const context: CheckContext = {
      track(store) {
        opened.push(store)
        return store
      },
    }
    let outcome: { value: void } | "timeout"
    try {
      outcome = await within(check.run(make, context), timeoutMs)
    } catch (err) {
      failures.push({ check: check.name, message: messageOf(err) })
      outcome = { value: undefined }
    }
    if (outcome === "timeout") failures.push({ check: check.name, message: `timed out after ${timeoutMs} ms: a store call never settled` })
    for (const store of opened) {
      if (typeof store.close !== "function") continue
      try {
        const closed = await within(Promise.resolve(store.close()), Math.min(timeoutMs, CLOSE_TIMEOUT_MS))
        if (closed === "timeout") failures.push({ check: check.name, message: "close() did not settle" })
      } catch (err) {
        failures.push({ check: check.name, message: `close() ${messageOf(err)}` })
      }
    }
  }
  return failures
}

/** Makes a store with `make` and tracks it, whichever shape the factory gives. */
export async function openStore<A extends unknown[]>(
  make: (...args: A) => Awaitable<TaskStore | StoreWithPeer>,
  context: CheckContext,
  ...args: A
): Promise<{ store: TaskStore; another?: () => Promise<TaskStore> }> {
  const made = await make(...args)
  if (isPeer(made)) {
    const peer = made
    return { store: context.track(peer.store), another: async () => context.track(await peer.another()) }
  }
  return { store: context.track(made) }
}

function isPeer(made: TaskStore | StoreWithPeer): made is StoreWithPeer {
  return typeof (made as StoreWithPeer).another === "function" && typeof (made as StoreWithPeer).store === "object"
}

// ---------------------------------------------------------------------------
// Assertions: plain comparisons that throw ContractError naming what broke.

const shown = (value: unknown) => {
  if (value === undefined) return "undefined"
  if (value instanceof RegExp) return String(value)
  const text = JSON.stringify(value)
  return text.length > 300 ? `${text.slice(0, 300)}…` : text
}

/** JSON's view of a value (what a store can keep): undefined members dropped. */
const plain = (value: unknown): unknown => (value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as unknown))

/** `actual` is `expected` (===). */
export function equal(actual: unknown, expected: unknown, what: string): void {
  if (actual !== expected) throw new ContractError(`${what}: expected ${shown(expected)}, got ${shown(actual)}`)
}

/** `actual` and `expected` hold the same JSON. */
export function same(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(plain(actual), plain(expected))) throw new ContractError(`${what}: expected ${shown(expected)}, got ${shown(actual)}`)
}

/** `condition` holds. */
export function ok(condition: unknown, what: string): void {
  if (!condition) throw new ContractError(what)
}

/** Does `actual` have every member `pattern` names (regular expressions test strings; arrays match element by element)? */
function fits(actual: unknown, pattern: unknown): boolean {
  if (pattern instanceof RegExp) return typeof actual === "string" && pattern.test(actual)
  if (Array.isArray(pattern)) return Array.isArray(actual) && actual.length === pattern.length && pattern.every((each, i) => fits(actual[i], each))
  if (pattern !== null && typeof pattern === "object") {
    if (actual === null || typeof actual !== "object") return false
    return Object.entries(pattern).every(([key, each]) => fits((actual as Record<string, unknown>)[key], each))
  }
  return actual === pattern
}

/** `actual` has at least the members of `pattern`. */
export function matches(actual: unknown, pattern: unknown, what: string): void {
  if (!fits(actual, pattern)) throw new ContractError(`${what}: expected something like ${shown(pattern)}, got ${shown(actual)}`)
}

/** `promise` rejects with an error that fits `expected` (an error class, or a pattern of its members). */
export async function rejects(promise: Promise<unknown>, expected: (abstract new (...args: never[]) => Error) | Record<string, unknown>, what: string): Promise<void> {
  let reason: unknown
  try {
    await promise
  } catch (err) {
    reason = err
  }
  if (reason === undefined) throw new ContractError(`${what}: expected a rejection, but the call resolved`)
  const fitsExpected = typeof expected === "function" ? reason instanceof expected : fits(reason, expected)
  if (!fitsExpected) throw new ContractError(`${what}: rejected with ${messageOf(reason)}, not the error expected`)
}

/** Resolves once `condition` holds, checking every 5 ms; fails naming `what` after `ms`. */
export async function waitFor(condition: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new ContractError(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** A small Task as the checks save it: one user message, the given state, a fixed status time. */
export const sampleTask = (id: string, state: TaskState = "submitted", extra: Partial<A2ATask> = {}): A2ATask => ({
  id,
  contextId: "ctx-1",
  kind: "task",
  status: { state, timestamp: "2026-01-01T00:00:00.000Z" },
  history: [{ kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "hello" }] }],
  ...extra,
})
