import v8 from "node:v8"

/**
 * What a string costs in heap, for the byte budgets of the stores and
 * caches: V8 keeps a string of Latin-1 characters at 1 byte per character
 * and any other at 2, and a peer chooses which, so it is counted at 2. (A
 * stored Task measured at 1.0 byte per character of its JSON for ASCII text
 * and 2.0 for Cyrillic, plus about 520-830 bytes of entry around it.)
 */
export function textHeapBytes(text: string): number {
  return 2 * text.length
}

/** `fraction` of this process's heap limit (`--max-old-space-size` or V8's default for the machine), in bytes. */
export function heapShare(fraction: number): number {
  return Math.floor(v8.getHeapStatistics().heap_size_limit * fraction)
}
