import { A2AError } from "./errors.js"

/** How many levels of arrays and objects a request's params may nest: copying or serializing deeper values would overflow the stack. */
export const MAX_DEPTH = 64

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d

/**
 * The offset of the first `[` or `{` that opens level `limit + 1` of the
 * JSON text, or -1 when nothing nests that deep. One pass over the
 * characters, stopping at that bracket, so refusing a deep body costs no
 * more than the bytes read up to it; brackets inside strings do not count.
 * The text is not validated: JSON.parse still does that.
 */
export function firstTooDeep(text: string, limit: number): number {
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      i = closingQuote(text, i)
      if (i === -1) return -1 // an unterminated string: JSON.parse refuses it
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > limit) return i
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      depth--
    }
  }
  return -1
}

/**
 * The offset of the quote closing the string opened at `open`, or -1. It
 * jumps quote to quote with indexOf (about 3x faster than a character loop
 * on typical bodies); a quote after an odd run of backslashes is escaped.
 * Each backslash run is looked at once, so the cost stays linear.
 */
function closingQuote(text: string, open: number): number {
  let at = open
  for (;;) {
    at = text.indexOf('"', at + 1)
    if (at === -1) return -1
    let before = at - 1
    while (text.charCodeAt(before) === BACKSLASH) before--
    if ((at - before) % 2 === 1) return at
  }
}

/**
 * The refusal for a request body whose params would nest deeper than
 * MAX_DEPTH (the envelope object is one level more), or undefined; the same
 * -32602 the parsed-params check answers, found before any parsing.
 */
export function bodyTooDeep(text: string): A2AError | undefined {
  return firstTooDeep(text, MAX_DEPTH + 1) === -1 ? undefined : A2AError.invalidParams("params", `nests deeper than ${MAX_DEPTH} levels`)
}
