import { A2AError, ErrorCode } from "../a2a/errors.js"

/**
 * How many streams (SendStreamingMessage, SubscribeToTask) may be open at
 * once, in total and per caller. A stream holds a socket and ~20 KB of
 * memory for as long as its Task runs, so an uncapped peer could hold
 * thousands; past a cap a new stream is refused before anything is created.
 */
export interface StreamLimits {
  /** Streams open at once on the server (default 1000, about 20 MB). */
  maxStreams?: number
  /** Streams open at once per principal, or per client address without authentication (default 100, about 2 MB). */
  maxStreamsPerPrincipal?: number
}

export const DEFAULT_MAX_STREAMS = 1000
export const DEFAULT_MAX_STREAMS_PER_PRINCIPAL = 100

/** Who a stream is counted against: the principal, or the client address when the server has no authentication. */
export interface StreamCaller {
  principal?: string
  address?: string
}

/** Gives the slot back; calling it again does nothing, so every way a stream ends may call it. */
export type ReleaseSlot = () => void

/** The open-stream counts, framework-free: a binding reserves a slot before a stream's Task is created. */
export class StreamSlots {
  private total = 0
  private readonly perCaller = new Map<string, number>()
  private readonly maxStreams: number
  private readonly maxPerCaller: number

  constructor(limits: StreamLimits = {}) {
    this.maxStreams = limits.maxStreams ?? DEFAULT_MAX_STREAMS
    this.maxPerCaller = limits.maxStreamsPerPrincipal ?? DEFAULT_MAX_STREAMS_PER_PRINCIPAL
  }

  /** Takes a slot for `caller`, or throws -32603 naming the cap it would pass. */
  reserve(caller: StreamCaller): ReleaseSlot {
    const key = keyOf(caller)
    const held = this.perCaller.get(key) ?? 0
    if (held >= this.maxPerCaller) {
      const who = caller.principal === undefined ? "this client address" : "this principal"
      throw new A2AError(
        ErrorCode.InternalError,
        `Too many open streams: ${who} has ${held} open, the most maxStreamsPerPrincipal (${this.maxPerCaller}) allows; close one, or poll GetTask instead of streaming, then retry`,
        { retryable: true },
      )
    }
    if (this.total >= this.maxStreams) {
      throw new A2AError(
        ErrorCode.InternalError,
        `The agent is at capacity for streams (${this.total} open, maxStreams ${this.maxStreams}); poll GetTask instead of streaming, or retry later`,
        { retryable: true },
      )
    }
    this.total++
    this.perCaller.set(key, held + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      this.total--
      const left = this.perCaller.get(key)! - 1
      if (left === 0) this.perCaller.delete(key)
      else this.perCaller.set(key, left)
    }
  }

  /** Streams open now, in total, or for one caller. */
  open(caller?: StreamCaller): number {
    return caller === undefined ? this.total : (this.perCaller.get(keyOf(caller)) ?? 0)
  }
}

/** Principals and addresses in separate name spaces, so a principal named like an address shares nothing with it. */
function keyOf(caller: StreamCaller): string {
  return caller.principal !== undefined ? `principal:${caller.principal}` : `address:${caller.address ?? ""}`
}
