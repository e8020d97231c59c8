/**
 * Saves of a running Task's answer so far: at most one every `intervalMs`,
 * one at a time. `schedule` after each chunk; `settled` before the final
 * save, so that save lands after any under way; `stop` once the run ends.
 */
export class ProgressSaves {
  private timer: NodeJS.Timeout | undefined
  /** A save is scheduled and has not begun: chunks meanwhile ask for nothing more. */
  private waiting = false
  private saving: Promise<void> | undefined
  /** When the last save began (performance.now()); -Infinity: none yet. */
  private lastAt = -Infinity
  private stopped = false

  constructor(
    private readonly intervalMs: number,
    /** One save of the answer so far; never rejects. */
    private readonly save: () => Promise<void>,
  ) {}

  /** A save, `intervalMs` after the last one began (at once if that is past), unless one waits already. */
  schedule(): void {
    if (this.stopped || this.waiting) return
    this.waiting = true
    const wait = Math.max(0, this.lastAt + this.intervalMs - performance.now())
    this.timer = setTimeout(() => void this.saveNow(), wait)
    this.timer.unref()
  }

  /** No more saves; the one waiting is dropped. */
  stop(): void {
    this.stopped = true
    clearTimeout(this.timer)
    this.timer = undefined
  }

  /** Resolves once a save under way has landed (or failed); later ones may follow. */
  async idle(): Promise<void> {
    await this.saving
  }

  /** Stops, and resolves once a save under way has landed (or failed). */
  async settled(): Promise<void> {
    this.stop()
    await this.saving
  }

  private async saveNow(): Promise<void> {
    this.timer = undefined
    // One at a time: a save still under way delays this one until it is done.
    await this.saving
    this.waiting = false
    if (this.stopped) return
    this.lastAt = performance.now()
    const saving = this.save()
    this.saving = saving
    await saving
    if (this.saving === saving) this.saving = undefined
  }
}
