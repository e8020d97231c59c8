/** Which bound of a store a refused save would have passed. */
export type StoreLimit = "maxTasks" | "maxBytes" | "maxTasksPerOwner" | "maxBytesPerOwner"

/**
 * A store refused a new Task: it holds all it may, and what it holds cannot
 * make room (finished Tasks are dropped first; unfinished ones are kept).
 * Saves of Tasks the store already holds are never refused this way.
 */
export class StoreFullError extends Error {
  constructor(
    /** The store's class name, e.g. "InMemoryTaskStore". */
    readonly store: string,
    /** The option that bounds what was full. */
    readonly limit: StoreLimit,
    /** Its value. */
    readonly value: number,
    /** For a per-owner limit, the owner whose share is full (null: Tasks created without authentication). */
    readonly owner?: string | null,
  ) {
    const whose = owner === undefined ? "" : owner === null ? " for Tasks created without authentication" : ` for principal ${JSON.stringify(owner.slice(0, 128))}`
    const unit = limit === "maxBytes" || limit === "maxBytesPerOwner" ? " bytes" : " Tasks"
    super(
      `${store} is at capacity${whose}: the unfinished Tasks it holds and this new one would pass ${limit} (${value}${unit}), ` +
        `and only finished Tasks are dropped to make room; retry once some finish, or raise opts.${limit}`,
    )
    this.name = "StoreFullError"
  }

  /** Whether only the owner's share is full (others can still create Tasks). */
  get perOwner(): boolean {
    return this.limit === "maxTasksPerOwner" || this.limit === "maxBytesPerOwner"
  }
}
