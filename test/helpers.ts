import { randomUUID } from "node:crypto"
import { InMemoryTaskStore } from "../lib/stores/memory.js"
import type { A2ATask, TaskState } from "../lib/types.js"
import type { Logger } from "../lib/log.js"

/** A memory store that records every save, in order. */
export class RecordingStore extends InMemoryTaskStore {
  readonly saves: A2ATask[] = []
  override async save(task: A2ATask): Promise<void> {
    this.saves.push(structuredClone(task))
    await super.save(task)
  }
  statesOf(id: string): string[] {
    return this.saves.filter((s) => s.id === id).map((s) => s.status.state)
  }
}

/** A RecordingStore with a switch: while `failing` is set, saves reject (and are not recorded); reads still work. */
export class FlakyStore extends RecordingStore {
  failing = false
  override async save(task: A2ATask): Promise<void> {
    if (this.failing) throw new Error("the task store is down")
    await super.save(task)
  }
}

/** Polls until `check` is true; fails after `ms` (generous: tests run on loaded machines). */
export async function waitFor(check: () => boolean | Promise<boolean>, ms = 5000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** A logger that keeps its lines for assertions. */
export function memoryLogger(lines: Array<Record<string, unknown>> = []): Logger & { lines: Array<Record<string, unknown>> } {
  const make = (bindings: Record<string, unknown>): Logger => {
    const at = (level: string) => (fields: object, msg: string) => void lines.push({ level, ...bindings, ...fields, msg })
    return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: (more) => make({ ...bindings, ...more }) }
  }
  return Object.assign(make({}), { lines })
}

/** A deferred promise, to hold a fake model mid-answer. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (err: unknown) => void } {
  let resolve!: (value: T) => void
  let reject!: (err: unknown) => void
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)))
  return { promise, resolve, reject }
}

/** A 0.3 user message with the messageId both versions require (a fresh one per call). */
export const userMessage = (text: string, extra: Record<string, unknown> = {}) => ({ messageId: randomUUID(), role: "user", parts: [{ kind: "text", text }], ...extra })

export const rpc = (method: string, params: unknown, id: string | number = 1) => ({ jsonrpc: "2.0", id, method, params })

/** A small Task as a store test saves it: one user message, the given state, now as the status time. */
export const sampleTask = (id: string, state: TaskState = "submitted", extra: Partial<A2ATask> = {}): A2ATask => ({
  id,
  contextId: "ctx-1",
  kind: "task",
  status: { state, timestamp: new Date().toISOString() },
  history: [{ kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "hello" }] }],
  ...extra,
})
