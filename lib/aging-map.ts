/**
 * A Map that finds its oldest entry (least recently set) in amortized
 * constant time, for bounded caches and expiry queues.
 *
 * A plain Map keeps a hole for each deleted entry until its table is
 * rebuilt, so `map.keys().next()` on a Map that keeps dropping its oldest
 * entries walks every hole left at the front: at 100k entries that is tens
 * of microseconds per call, growing until the next rebuild. Here one
 * iterator is kept across calls and passes each hole once. (The language
 * defines how a live Map iterator behaves as entries come and go: it goes
 * on in insertion order, skips deleted entries and reaches new ones.)
 */
export class AgingMap<K, V> {
  /** Each value in a box of its own, so an entry set again is told apart from the one the cursor passed. */
  private readonly map = new Map<K, { value: V }>()
  private cursor: Iterator<[K, { value: V }]> = this.map.entries()
  /** The entry the cursor gave last: the oldest, unless deleted or set again since. */
  private head: [K, { value: V }] | undefined

  get size(): number {
    return this.map.size
  }

  get(key: K): V | undefined {
    return this.map.get(key)?.value
  }

  /** Sets `key` as the newest entry, wherever it was before. */
  set(key: K, value: V): void {
    this.map.delete(key)
    this.map.set(key, { value })
  }

  /** The keys, least recently set first. */
  keys(): IterableIterator<K> {
    return this.map.keys()
  }

  delete(key: K): boolean {
    return this.map.delete(key)
  }

  /** The least recently set entry, or undefined when the map is empty. */
  oldest(): { key: K; value: V } | undefined {
    if (this.map.size === 0) return undefined
    for (;;) {
      if (this.head !== undefined && this.map.get(this.head[0]) === this.head[1]) return { key: this.head[0], value: this.head[1].value }
      const next = this.cursor.next()
      // A finished iterator stays finished: entries set after it ended need a new one.
      if (next.done) this.cursor = this.map.entries()
      else this.head = next.value
    }
  }

  /** Removes and returns the least recently set entry. */
  shift(): { key: K; value: V } | undefined {
    const oldest = this.oldest()
    if (oldest !== undefined) this.map.delete(oldest.key)
    return oldest
  }
}
