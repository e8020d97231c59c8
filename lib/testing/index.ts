/**
 * "toolnexus/testing": the TaskStore contract, runnable from any test runner. The four shipped stores
 * pass it in toolnexus's own tests; a store of your own should too before a server relies on it.
 *
 * ```ts
 * import { runStoreContract } from "toolnexus/testing"
 * const failures = await runStoreContract(() => new MyStore())
 * if (failures.length > 0) throw new Error(failures.map((f) => `${f.check}: ${f.message}`).join("\n"))
 * ```
 *
 * @module toolnexus/testing
 */
import type { TaskStore } from "../stores/task-store.js"
import { STORE_CHECKS } from "./store-contract.js"

/** What one check found a store doing wrong. */
export interface ContractFailure {
  /** The check, by name: what part of the contract broke. */
  check: string
  /** What was expected and what came (or what the store threw). */
  message: string
}

export interface ContractOptions {
  /** How long one check may take before it fails as hanging, in ms; default 10000. */
  timeoutMs?: number
}

const DEFAULT_TIMEOUT_MS = 10_000

/**
 * Runs every check of the TaskStore contract, each on a fresh store from `makeStore()` (closed after
 * it, when it has `close`), one after another. Resolves to the failures, empty when the store keeps the
 * contract; never rejects for the store's sake. A check that takes longer than `timeoutMs` fails as
 * hanging, and the next one starts on a store of its own.
 */
export async function runStoreContract(makeStore: () => TaskStore | Promise<TaskStore>, options: ContractOptions = {}): Promise<ContractFailure[]> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new TypeError(`runStoreContract: options.timeoutMs should be a whole number of ms, 1 or more, got ${JSON.stringify(timeoutMs)}`)
  const failures: ContractFailure[] = []
  for (const check of STORE_CHECKS) {
    let store: TaskStore | undefined
    let timer: NodeJS.Timeout | undefined
    try {
      const hung = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`did not finish within ${timeoutMs} ms: a call of the store never settled`)), timeoutMs)
      })
      await Promise.race([
        (async () => {
          store = await makeStore()
          await check.run(store)
        })(),
        hung,
      ])
    } catch (err) {
      failures.push({ check: check.name, message: err instanceof Error ? err.message : String(err) })
    } finally {
      clearTimeout(timer)
      // A close that hangs or fails is the store's own business here: the check already said what it found.
      if (store?.close) await Promise.race([store.close().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1000).unref())])
    }
  }
  return failures
}
