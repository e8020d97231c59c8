import { isDeepStrictEqual } from "node:util"

/**
 * The few assertions the contract checks make, with no test runner behind them: each throws a
 * ContractBreach saying what was expected and what came, and the runner turns it into a failure.
 */

/** A check found the store breaking the contract. */
export class ContractBreach extends Error {
  constructor(message: string) {
    super(message)
    this.name = "ContractBreach"
  }
}

const shown = (value: unknown) => {
  const text = JSON.stringify(value)
  return text === undefined ? String(value) : text.length > 300 ? `${text.slice(0, 300)}…` : text
}

/** `actual` is `expected` (Object.is). */
export function equal(actual: unknown, expected: unknown, what: string): void {
  if (!Object.is(actual, expected)) throw new ContractBreach(`${what}: expected ${shown(expected)}, got ${shown(actual)}`)
}

/** `actual` deeply equals `expected`, after a JSON round trip (what a store keeps is JSON). */
export function same(actual: unknown, expected: unknown, what: string): void {
  const normal = (value: unknown): unknown => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)))
  if (!isDeepStrictEqual(normal(actual), normal(expected))) throw new ContractBreach(`${what}: expected ${shown(expected)}, got ${shown(actual)}`)
}

/** `actual` holds every field of `expected` with its value, recursively (other fields may be there too). */
export function has(actual: unknown, expected: Record<string, unknown>, what: string): void {
  const holds = (value: unknown, wanted: unknown): boolean => {
    if (wanted === null || typeof wanted !== "object") return Object.is(value, wanted)
    if (value === null || typeof value !== "object") return false
    return Object.entries(wanted).every(([key, field]) => holds((value as Record<string, unknown>)[key], field))
  }
  if (!holds(actual, expected)) throw new ContractBreach(`${what}: expected fields ${shown(expected)}, got ${shown(actual)}`)
}

/** `promise` rejects with an error whose message matches `pattern`. */
export async function rejects(promise: Promise<unknown> | (() => Promise<unknown>), pattern: RegExp, what: string): Promise<void> {
  let outcome: { error: unknown } | undefined
  try {
    await (typeof promise === "function" ? promise() : promise)
  } catch (err) {
    outcome = { error: err }
  }
  if (outcome === undefined) throw new ContractBreach(`${what}: expected a rejection matching ${pattern}, but it resolved`)
  const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error)
  if (!pattern.test(message)) throw new ContractBreach(`${what}: expected a rejection matching ${pattern}, got ${shown(message)}`)
}
