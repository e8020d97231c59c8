/**
 * What a store opens on first use and keeps: a connection, a pool, a
 * directory made ready. Callers share one attempt; a failed attempt is
 * forgotten, so the next call tries again instead of failing for good.
 * After `close()` nothing new is opened: a call still gets what is open
 * (the writes called before close need it), else `closedError()`.
 */
export class OpenOnce<T> {
  private attempt: Promise<T> | undefined
  private closed = false

  constructor(
    private readonly open: () => Promise<T>,
    private readonly closedError: () => Error = () => new Error("closed"),
  ) {}

  /** What is open, opening it when nothing is (or the last attempt failed). */
  get(): Promise<T> {
    if (this.attempt !== undefined) return this.attempt
    if (this.closed) return Promise.reject(this.closedError())
    const attempt = this.open()
    this.attempt = attempt
    attempt.catch(() => this.forget(attempt))
    return attempt
  }

  /** The attempt under way or done, without starting one. */
  get current(): Promise<T> | undefined {
    return this.attempt
  }

  /** Drops `attempt` (a connection that died), so the next `get` opens anew; a newer attempt is kept. */
  forget(attempt: Promise<T> | undefined): void {
    if (this.attempt === attempt) this.attempt = undefined
  }

  /** Opens nothing more. Resolves with what was open, or undefined when nothing was (or it failed). */
  close(): Promise<T | undefined> {
    this.closed = true
    return this.attempt?.catch(() => undefined) ?? Promise.resolve(undefined)
  }
}
