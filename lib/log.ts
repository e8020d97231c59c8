/**
 * The logging the core needs: a pino logger (and Fastify's `request.log`)
 * fits it, and so does a silent stub in tests. Fields go in the object,
 * never into the message.
 */
export interface Logger {
  debug(fields: object, message: string): void
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
  error(fields: object, message: string): void
  child(bindings: Record<string, unknown>): Logger
}

/** An error as log fields: message and stack, never the object's other properties (they may hold request data). */
export function errorFields(err: unknown): { err: { message: string; name?: string; stack?: string } } {
  if (err instanceof Error) return { err: { name: err.name, message: err.message, stack: err.stack } }
  return { err: { message: String(err) } }
}
