import type { LeaseBook } from "../task-store.js"
import { quote, withContext } from "./errors.js"
import { natsKey } from "./keys.js"
import type { NatsKv } from "./nats-driver.js"

/** Leases are dropped by the server this long after their last renewal, so dead instances leave nothing behind. */
export const LEASE_BUCKET_MAX_AGE_MS = 24 * 60 * 60_000
/** How often the offset between our clock and the server's is measured again when only isAlive is called. */
const CLOCK_RECHECK_MS = 60_000
/** A key no encoded id can have (those have no dot), written to read the server's clock. */
const CLOCK_KEY = "toolnexus.clock"

interface Lease {
  instance: string
  ttlMs: number
}

/**
 * The servers' leases in a KV bucket (`leases()` opens it), one key per
 * instance, judged by the server's clock. Our clock is only used to carry
 * the server's forward, corrected by the offset measured at each write:
 * hosts whose clocks disagree still agree on leases, within half a round trip.
 */
export function natsLeaseBook(leases: () => Promise<NatsKv>): LeaseBook {
  /** Server clock minus ours, in ms, as last measured. */
  let clockOffsetMs: number | undefined
  let clockMeasuredAt = 0

  /** Writes, then reads the server's timestamp of that write to learn how far our clock is from the server's. */
  async function putAndReadClock(kv: NatsKv, key: string, value: Uint8Array): Promise<void> {
    const sent = Date.now()
    const revision = await kv.put(key, value)
    const acked = Date.now()
    const entry = await kv.get(key, { revision })
    if (entry === null) return // already replaced by a newer write; measure next time
    clockOffsetMs = entry.created.getTime() - (sent + acked) / 2
    clockMeasuredAt = acked
  }

  return {
    async renew(instance: string, ttlMs: number): Promise<void> {
      const key = natsKey(instance)
      if (!(Number.isFinite(ttlMs) && ttlMs > 0 && ttlMs <= LEASE_BUCKET_MAX_AGE_MS)) {
        throw new TypeError(`NatsTaskStore.leases.renew: ttlMs should be a number of milliseconds > 0 and <= ${LEASE_BUCKET_MAX_AGE_MS}`)
      }
      const kv = await leases()
      const value = new TextEncoder().encode(JSON.stringify({ instance, ttlMs } satisfies Lease))
      await withContext(`renew the lease of ${quote(instance)}`, () => putAndReadClock(kv, key, value))
    },

    /** Alive while the server's clock is before the lease's last write (the server's time) plus its ttl. */
    async isAlive(instance: string): Promise<boolean> {
      const key = natsKey(instance)
      const kv = await leases()
      return withContext(`read the lease of ${quote(instance)}`, async () => {
        if (clockOffsetMs === undefined || Date.now() - clockMeasuredAt > CLOCK_RECHECK_MS) {
          await putAndReadClock(kv, CLOCK_KEY, new Uint8Array(0))
        }
        const entry = await kv.get(key)
        if (entry?.operation !== "PUT") return false
        let lease: Lease
        try {
          lease = JSON.parse(entry.string()) as Lease
        } catch {
          return false
        }
        if (lease?.instance !== instance || typeof lease.ttlMs !== "number") return false
        return entry.created.getTime() + lease.ttlMs > Date.now() + (clockOffsetMs ?? 0)
      })
    },

    async release(instance: string): Promise<void> {
      const key = natsKey(instance)
      const kv = await leases()
      await withContext(`release the lease of ${quote(instance)}`, () => kv.purge(key))
    },
  }
}
