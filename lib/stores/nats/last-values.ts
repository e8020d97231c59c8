import type { NatsDriver, NatsKv, NatsKvEntry, NatsKvWatch } from "./nats-driver.js"

/** How long a listing of last values goes without an entry before it asks the stream whether any is left to come. */
const STALLED_LISTING_CHECK_MS = 250

/**
 * Every key's last value (headers only, or with the values), in stream
 * order, ending once all were delivered: the watch's initialized callback
 * fires then, maybe before watch() returns, and what was queued is still
 * read. The watch counts the messages it has to deliver when it starts and
 * waits for that many; one purged before it came (a delete marker a
 * retention sweep removed, here or on another server) never comes. So when
 * no entry came for a while, `anyAfter(seq)` asks the stream whether a
 * message after the last entry is left, and with none the listing ends.
 * Leaving the loop early stops the watch.
 */
export async function* lastValues(kv: NatsKv, driver: NatsDriver, headersOnly: boolean, anyAfter: (seq: number) => Promise<boolean>): AsyncGenerator<NatsKvEntry> {
  let initialized = false
  let entries: NatsKvWatch | undefined = undefined
  const initializedFn = () => {
    initialized = true
    entries?.stop()
  }
  entries = await kv.watch({ include: driver.KvWatchInclude.LastValue, ...(headersOnly && { headers_only: true }), initializedFn })
  const watch = entries
  if (initialized) watch.stop()
  let last = 0
  let arrived = false
  const stalled = setInterval(() => {
    if (arrived) {
      arrived = false
      return
    }
    const at = last
    // A failed check stops nothing: the next one asks again.
    void anyAfter(at).then(
      (more) => {
        if (!more && last === at) watch.stop()
      },
      () => {},
    )
  }, STALLED_LISTING_CHECK_MS)
  try {
    for await (const entry of watch) {
      last = entry.revision
      arrived = true
      yield entry
    }
  } finally {
    clearInterval(stalled)
    watch.stop()
  }
}
