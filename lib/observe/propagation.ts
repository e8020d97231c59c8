import { context, propagation, trace, type Context, type TextMapGetter } from "@opentelemetry/api"

/**
 * W3C trace context in and out, through the OpenTelemetry API's propagator:
 * with none registered (no SDK), extracting and injecting do nothing.
 */

/** Reads one incoming header (HTTP) or metadata key (gRPC), by its lowercase name. */
export type HeaderLookup = (name: string) => string | string[] | undefined

const lookupGetter: TextMapGetter<HeaderLookup> = {
  get: (lookup, key) => lookup(key),
  // The W3C propagator asks for its two headers by name; nothing here lists every header.
  keys: () => [],
}

/**
 * The context a request's span continues: the active one when it already
 * holds a span (an HTTP or gRPC instrumentation's server span, which read the
 * peer's headers itself), else the peer's `traceparent` / `tracestate`.
 */
export function incomingContext(lookup: HeaderLookup | undefined): Context {
  const active = context.active()
  if (lookup === undefined || trace.getSpan(active) !== undefined) return active
  return propagation.extract(active, lookup, lookupGetter)
}

/** Adds the active span's `traceparent` (and `tracestate`) to headers of our own making. */
export function injectTraceHeaders(headers: Record<string, string>): void {
  propagation.inject(context.active(), headers)
}

/** `headers`, plus the active span's `traceparent` (and `tracestate`) when there is one: a copy then, the same object otherwise. */
export function withTraceHeaders(headers: Record<string, string>): Record<string, string> {
  const carrier: Record<string, string> = {}
  propagation.inject(context.active(), carrier)
  return Object.keys(carrier).length === 0 ? headers : { ...headers, ...carrier }
}
