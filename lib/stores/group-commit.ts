/**
 * Group commit: items added while a commit is under way wait, and go
 * together in the next one (at most `maxBatch` each). The same batching
 * saves round trips for reads: gets called while one is under way share
 * the next statement. An item added while
 * no commit is under way goes at once, alone: a quiet store adds no delay,
 * a busy one commits many items per flush. Each item's promise settles with
 * its own result, once the commit that carried it has returned.
 */
export class GroupCommit<Item, Result> {
  private queue: Array<{ item: Item; resolve: (result: Result) => void; reject: (err: unknown) => void }> = []
  private running = 0

  /**
   * `commit(items)` writes a batch and answers one result per item, in order (an Error in place of a
   * result fails that item alone); a rejection fails the whole batch. `inFlight` commits may run at once.
   */
  constructor(
    private readonly commit: (items: Item[]) => Promise<Array<Result | Error>>,
    private readonly opts: { maxBatch: number; inFlight: number },
  ) {}

  add(item: Item): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject })
      if (this.running < this.opts.inFlight) this.next()
    })
  }

  private next(): void {
    if (this.queue.length === 0) return
    const batch = this.queue.length <= this.opts.maxBatch ? this.queue : this.queue.slice(0, this.opts.maxBatch)
    this.queue = batch === this.queue ? [] : this.queue.slice(batch.length)
    this.running++
    let results: Promise<Array<Result | Error>>
    try {
      results = this.commit(batch.map((entry) => entry.item))
    } catch (err) {
      results = Promise.reject(err)
    }
    results
      .then(
        (answers) => {
          batch.forEach((entry, i) => {
            const answer = answers[i]
            if (answer instanceof Error) entry.reject(answer)
            else entry.resolve(answer)
          })
        },
        (err: unknown) => {
          for (const entry of batch) entry.reject(err)
        },
      )
      .finally(() => {
        this.running--
        this.next()
      })
  }
}
