/** What a stream's end listens on: the response, which emits "close" when the peer's connection goes. */
export interface ClosableResponse {
  once(event: "close", listener: () => void): unknown
}

/**
 * The streams open on one route. The server's closing signal gets a single
 * listener that ends every open stream, so any number of concurrent streams
 * adds no listener to it (one each passed Node's limit of 10 and warned).
 */
export class OpenStreams {
  private readonly open = new Set<AbortController>()

  constructor(private readonly closing: AbortSignal) {
    closing.addEventListener("abort", () => this.endAll(), { once: true })
  }

  /** A signal that aborts when the peer's connection closes or the server starts closing, whichever comes first. */
  endedWhenGoneOrClosing(raw: ClosableResponse): AbortSignal {
    const ended = new AbortController()
    if (this.closing.aborted) {
      ended.abort()
      return ended.signal
    }
    this.open.add(ended)
    raw.once("close", () => {
      this.open.delete(ended)
      ended.abort()
    })
    return ended.signal
  }

  /** How many streams are open: what the closing signal would end now. */
  get size(): number {
    return this.open.size
  }

  private endAll(): void {
    for (const ended of this.open) ended.abort()
    this.open.clear()
  }
}
