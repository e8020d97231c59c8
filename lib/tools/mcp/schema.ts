import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import type { JsonSchemaType, jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js"
import type { JsonObject } from "../../types.js"
import { toolSchemaCompiler } from "../schema-compiler.js"

/* The JSON Schemas MCP servers send, made safe for the validators that read them: ours for input, the SDK's for output. */

/** Compiles as the toolkit does, to know beforehand whether the toolkit will take a schema; its warnings are the toolkit's to log. */
const ajv = toolSchemaCompiler()

/** A schema that takes any arguments object: the server still checks them. */
const ANY_OBJECT: JsonObject = { type: "object" }

/**
 * An MCP tool's inputSchema as the toolkit can take it. `$schema` is dropped (servers write draft
 * 2020-12's, which the toolkit's draft-07 Ajv would refuse to load; the keywords they use read the same),
 * a schema without a type gets `type: "object"` (both model APIs want one), and a schema Ajv still
 * cannot compile is replaced by one that takes any object, with `note` saying why, for the description.
 */
export function toolInputSchema(schema: unknown): { schema: JsonObject; note?: string } {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    return { schema: ANY_OBJECT, note: "the server gave no input schema object, so its arguments are not checked here" }
  }
  const { $schema: _dialect, ...rest } = schema as JsonObject
  const usable: JsonObject = rest.type === undefined ? { type: "object", ...rest } : rest
  try {
    ajv.compile(usable)
  } catch (err) {
    return { schema: ANY_OBJECT, note: `its input schema could not be compiled (${(err as Error).message}), so its arguments are not checked here` }
  } finally {
    ajv.removeSchema(usable) // only a check: the toolkit compiles its own
  }
  return { schema: usable }
}

/**
 * The SDK client's check of structured results against a tool's outputSchema, except that a schema it
 * cannot compile leaves that tool's results unchecked: the SDK compiles every outputSchema as it reads the
 * tools list, and one it cannot compile would otherwise fail the whole list, every tool of the server.
 */
export function lenientOutputValidator(): jsonSchemaValidator {
  const strict = new AjvJsonSchemaValidator()
  return {
    getValidator<T>(schema: JsonSchemaType) {
      try {
        return strict.getValidator<T>(schema)
      } catch {
        return (input: unknown) => ({ valid: true, data: input as T, errorMessage: undefined })
      }
    },
  }
}
