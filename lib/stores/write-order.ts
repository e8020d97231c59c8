/**
 * Saves and deletes of one id, one after another in call order, each
 * whether the one before it succeeded or failed; writes of different ids
 * run side by side. A store's writes go through one of these, so two
 * writes of one Task never overtake each other.
 */
export class WriteOrder {
  /** The tail of each id's chain, dropped once it settles with nothing queued after it. */
  private readonly tails = new Map<string, Promise<void>>()

  /** Runs `write` after the writes of `id` already called (at once when there are none); settles as `write` does. */
  run<T = void>(id: string, write: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(id)
    const result = previous === undefined ? start(write) : previous.then(write)
    const tail = result.then(ignore, ignore)
    this.tails.set(id, tail)
    void tail.then(() => {
      if (this.tails.get(id) === tail) this.tails.delete(id)
    })
    return result
  }

  /** Settles once every write already called has settled. */
  async idle(): Promise<void> {
    await Promise.all(this.tails.values())
  }
}

function ignore(): void {}

/** `write()`, with a synchronous throw as a rejection. */
function start<T>(write: () => Promise<T>): Promise<T> {
  try {
    return write()
  } catch (err) {
    return Promise.reject(err)
  }
}
