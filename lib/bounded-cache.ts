import { AgingMap } from "./aging-map.js"

/** How much a cache may hold: entries and (estimated heap) bytes; past either, the least recently set go. */
export interface CacheBounds {
  maxEntries: number
  maxBytes: number
}

/**
 * A cache bounded in entries and in bytes: each value is weighed once, when
 * set, by `sizeOf`; past either bound the least recently set entries are
 * dropped. A value heavier than the whole byte budget is not kept at all.
 */
export class BoundedCache<K, V> {
  private readonly entries = new AgingMap<K, { value: V; bytes: number }>()
  private heldBytes = 0

  constructor(
    readonly bounds: CacheBounds,
    private readonly sizeOf: (value: V) => number,
  ) {}

  get size(): number {
    return this.entries.size
  }

  /** The bytes the entries held weigh, as `sizeOf` counted them. */
  get bytes(): number {
    return this.heldBytes
  }

  get(key: K): V | undefined {
    return this.entries.get(key)?.value
  }

  /** Keeps `value` as the newest entry (weighed anew); false when it alone is over the byte budget, and then `key` is not held at all. */
  set(key: K, value: V): boolean {
    this.delete(key)
    const bytes = this.sizeOf(value)
    if (bytes > this.bounds.maxBytes) return false
    this.entries.set(key, { value, bytes })
    this.heldBytes += bytes
    while (this.entries.size > this.bounds.maxEntries || this.heldBytes > this.bounds.maxBytes) {
      this.heldBytes -= this.entries.shift()!.value.bytes
    }
    return true
  }

  delete(key: K): void {
    const held = this.entries.get(key)
    if (held === undefined) return
    this.entries.delete(key)
    this.heldBytes -= held.bytes
  }
}
