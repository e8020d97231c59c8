import type { JsonObject } from "../types.js"
import { isObject, snippet } from "./http.js"
import type { ModelToolCall } from "./model.js"

/** A call the loop can run, or, when its arguments cannot be read, one it answers with `invalid` as an error result. */
export function toolCallFrom(id: string, name: string, rawArgs: unknown): ModelToolCall {
  const decoded = decodeArguments(rawArgs, name)
  return decoded.invalid === undefined ? { id, name, args: decoded.args } : { id, name, args: {}, invalid: decoded.invalid }
}

/**
 * A tool call's arguments as a JSON object, from the JSON text a model sent
 * (OpenAI's `function.arguments`, Anthropic's streamed `input_json_delta`
 * pieces put together), or why they cannot be: models sometimes get the JSON wrong.
 */
function decodeArguments(raw: unknown, name: string): { args: JsonObject; invalid?: string } {
  if (raw === undefined || raw === null || raw === "") return { args: {} }
  if (isObject(raw)) return { args: raw } // some compatible servers send the object itself
  const text = typeof raw === "string" ? raw : JSON.stringify(raw)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return { args: {}, invalid: `The arguments were not valid JSON (${snippet(text, 100)}); call ${name} again with a JSON object` }
  }
  if (isObject(parsed)) return { args: parsed }
  return { args: {}, invalid: `The arguments were not a JSON object (${snippet(text, 100)}); call ${name} again with a JSON object` }
}
