/* How the NATS store's errors read: what it was doing, in its own name, with the driver's error as the cause. */

/** Runs a driver call, naming what it was doing when it fails: the driver's own messages are terse ("TIMEOUT"). */
export async function withContext<T>(doing: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (err) {
    if (err instanceof Error && err.message.startsWith("NatsTaskStore")) throw err
    throw new Error(`NatsTaskStore could not ${doing}: ${messageOf(err)}`, { cause: err })
  }
}

export function closedError(): Error {
  return new Error("NatsTaskStore is closed")
}

/** The message of anything thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/** An id (or key) as an error message shows it: JSON-quoted, cut at 128 characters. */
export function quote(id: string): string {
  return JSON.stringify(id.length > 128 ? id.slice(0, 128) + "…" : id)
}
