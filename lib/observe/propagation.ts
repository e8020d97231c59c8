import { context, propagation, ROOT_CONTEXT, trace, type Context, type Span, type TextMapGetter } from "@opentelemetry/api"
import type { TraceContext } from "../stores/push-store.js"

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

/**
 * `span`'s `traceparent` (and `tracestate`), as data to keep: what a push
 * notification records of the save that enqueued it. Undefined for a span
 * with no valid context (no SDK: nothing is read or kept), and when the
 * propagator writes no traceparent (not W3C's). A span the sampler left out
 * is kept too, its flags saying so: the delivery is then left out alike,
 * rather than starting a trace the save's was not.
 */
export function traceContextOf(span: Span): TraceContext | undefined {
  if (!trace.isSpanContextValid(span.spanContext())) return undefined
  const carrier: Record<string, string> = {}
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier)
  const { traceparent, tracestate } = carrier
  if (traceparent === undefined) return undefined
  return tracestate ? { traceparent, tracestate } : { traceparent }
}

/** The context a kept trace context goes on in, its span a remote parent; without one (or one that does not parse), the root: a new trace. */
export function continuedContext(kept: TraceContext | undefined): Context {
  if (kept === null || typeof kept !== "object") return ROOT_CONTEXT
  return propagation.extract(ROOT_CONTEXT, kept, keptGetter)
}

const keptGetter: TextMapGetter<TraceContext> = {
  // Read from a store: only a string counts.
  get: (kept, key) => {
    const value = (kept as unknown as Record<string, unknown>)[key]
    return typeof value === "string" ? value : undefined
  },
  keys: (kept) => Object.keys(kept),
}
