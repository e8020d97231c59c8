/** What a stream's end listens on: the response, which emits "close" when the peer's connection goes. */
export interface ClosableResponse {
  once(event: "close", listener: () => void): unknown
}

/** One open stream: its signal, and how its binding ends it when it is done. */
export interface OpenStream {
  /** Aborts when the peer goes, the stream is ended, or every stream is (endAll, the closing signal). */
  signal: AbortSignal
  /** Ends the stream: its signal aborts and it leaves the set. */
  end(): void
}

/**
 * The streams open on one binding. The server's closing signal gets a
 * single listener that ends every open stream, so any number of concurrent
 * streams adds no listener to it (one each passed Node's limit of 10 and warned).
 */
export class OpenStreams {
  private readonly open = new Set<AbortController>()

  constructor(private readonly closing?: AbortSignal) {
    closing?.addEventListener("abort", () => this.endAll(), { once: true })
  }

  /** A stream whose peer `onGone` reports gone (it is handed the stream's end); already ended when the server is closing. */
  add(onGone: (end: () => void) => void): OpenStream {
    const ended = new AbortController()
    const end = () => {
      this.open.delete(ended)
      ended.abort()
    }
    if (this.closing?.aborted) ended.abort()
    else {
      this.open.add(ended)
      onGone(end)
    }
    return { signal: ended.signal, end }
  }

  /** A signal that aborts when the peer's connection closes or the server starts closing, whichever comes first. */
  endedWhenGoneOrClosing(raw: ClosableResponse): AbortSignal {
    return this.add((end) => raw.once("close", end)).signal
  }

  /** How many streams are open: what the closing signal would end now. */
  get size(): number {
    return this.open.size
  }

  /** Ends every open stream. */
  endAll(): void {
    for (const ended of this.open) ended.abort()
    this.open.clear()
  }
}
