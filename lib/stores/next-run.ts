/**
 * A job that callers share by arrival: a call while no run is under way
 * starts one; a call while one runs waits for the next, which starts when
 * that one ends and serves every call that arrived meanwhile. So each
 * caller gets a run that began after its call (what a group commit needs:
 * an fsync begun after the caller's rename), and at most two runs exist.
 */
export class NextRun {
  private running: Promise<void> | undefined
  private next: Promise<void> | undefined

  constructor(private readonly run: () => Promise<void>) {}

  /** A run that begins now or after the one under way; settles as that run does. */
  request(): Promise<void> {
    if (this.running === undefined) return this.start()
    this.next ??= this.running.then(
      () => this.start(),
      () => this.start(),
    )
    return this.next
  }

  /** Settles once the run under way and the one waiting to start, if any, have ended (however they ended). */
  async idle(): Promise<void> {
    await (this.next ?? this.running)?.catch(() => {})
  }

  private start(): Promise<void> {
    this.next = undefined
    const running = this.run()
    this.running = running
    const clear = () => {
      if (this.running === running) this.running = undefined
    }
    running.then(clear, clear)
    return running
  }
}
