import type { Tool } from "./types.js"

/**
 * The tools a toolkit has unless the host says `builtins: false`. They are
 * pure: none reads files, opens sockets or runs commands, so serving them to
 * a remote peer gives it nothing of the host's.
 */
export function builtinTools(): Tool[] {
  return [currentTime, calculate]
}

const currentTime: Tool = {
  name: "current_time",
  description: "The current date and time as ISO-8601 UTC, optionally also in an IANA time zone.",
  inputSchema: {
    type: "object",
    properties: { timeZone: { type: "string", description: "IANA zone such as Europe/Paris" } },
    additionalProperties: false,
  },
  execute(args) {
    const now = new Date()
    const timeZone = args.timeZone as string | undefined
    if (timeZone === undefined) return { utc: now.toISOString() }
    const local = now.toLocaleString("sv-SE", { timeZone }) // throws RangeError on an unknown zone
    return { utc: now.toISOString(), timeZone, local }
  },
}

const calculate: Tool = {
  name: "calculate",
  description: "Evaluates an arithmetic expression with + - * / % ^ and parentheses, e.g. (2+3)*4.",
  inputSchema: {
    type: "object",
    properties: { expression: { type: "string", maxLength: 1000 } },
    required: ["expression"],
    additionalProperties: false,
  },
  execute(args) {
    return String(evaluate(args.expression as string))
  },
}

/** A recursive-descent evaluator: no eval, no names, only numbers and operators. */
function evaluate(expression: string): number {
  let pos = 0
  const peek = () => expression[pos]
  const skipSpaces = () => {
    while (peek() === " " || peek() === "\t") pos++
  }
  const fail = (what: string): never => {
    throw new Error(`${what} at position ${pos} in ${JSON.stringify(expression)}`)
  }

  const primary = (depth: number): number => {
    if (depth > 100) fail("Expression nested too deeply")
    skipSpaces()
    const c = peek()
    if (c === "(") {
      pos++
      const value = sum(depth + 1)
      skipSpaces()
      if (peek() !== ")") fail("Expected )")
      pos++
      return value
    }
    if (c === "-" || c === "+") {
      pos++
      const value = power(depth + 1)
      return c === "-" ? -value : value
    }
    const match = /^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/.exec(expression.slice(pos))
    if (!match) return fail(c === undefined ? "Unexpected end" : `Unexpected ${JSON.stringify(c)}`)
    pos += match[0].length
    return Number(match[0])
  }
  const power = (depth: number): number => {
    const base = primary(depth)
    skipSpaces()
    if (peek() === "^") {
      pos++
      return base ** power(depth + 1)
    }
    return base
  }
  const product = (depth: number): number => {
    let value = power(depth)
    for (;;) {
      skipSpaces()
      const op = peek()
      if (op !== "*" && op !== "/" && op !== "%") return value
      pos++
      const right = power(depth)
      value = op === "*" ? value * right : op === "/" ? value / right : value % right
    }
  }
  const sum = (depth: number): number => {
    let value = product(depth)
    for (;;) {
      skipSpaces()
      const op = peek()
      if (op !== "+" && op !== "-") return value
      pos++
      const right = product(depth)
      value = op === "+" ? value + right : value - right
    }
  }

  const value = sum(0)
  skipSpaces()
  if (pos < expression.length) fail(`Unexpected ${JSON.stringify(peek())}`)
  if (!Number.isFinite(value)) throw new Error(`${JSON.stringify(expression)} has no finite value`)
  return value
}
