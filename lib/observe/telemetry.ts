import { context, SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from "@opentelemetry/api"
import type { Usage } from "../models/model.js"
import type { TraceContext } from "../stores/push-store.js"
import type { A2AMetrics } from "./metrics.js"
import { ATTR, FIRST_TOKEN_EVENT, NO_OPERATION, RPC_SERVICE, RPC_SYSTEM, SPAN, TRACER_NAME } from "./names.js"
import { continuedContext, incomingContext, traceContextOf, type HeaderLookup } from "./propagation.js"

/**
 * The one instrumentation layer: a call site says once that an operation
 * started, and how it ended; the span (through the OpenTelemetry API, a no-op
 * until an SDK is registered) and the metrics (when on) both hear it. Span
 * attributes are built only for a span that records; without metrics no clock is read.
 */

/** The binding a request came in on. */
export type Binding = keyof typeof RPC_SYSTEM

/** Got once: a ProxyTracer, which turns into the SDK's tracer whenever one is registered, before or after. */
const tracer: Tracer = trace.getTracer(TRACER_NAME)

/** Runs `fn` with `span` active under `parent`, so what it starts nests under it; a span that can have no children (no SDK, no incoming trace) skips the context switch. */
// We pick no context manager: context.with goes to whichever the user's SDK registered, the Node SDK's being an
// AsyncLocalStorage one. On Node 20-22 entering it turns on promise hooks, so every later promise pays to carry the
// context; Node 24 builds AsyncLocalStorage on AsyncContextFrame, and that per-promise tax goes (bench/README.md,
// issue 29, has the measured difference).
function within<T>(parent: Context, span: Span, fn: () => T): T {
  return trace.isSpanContextValid(span.spanContext()) ? context.with(trace.setSpan(parent, span), fn) : fn()
}

const seconds = (since: number): number => (performance.now() - since) / 1000

/** A value a peer or a model chose (a Task id, a tool name the toolkit lacks), cut to a size a span carries. */
const PEER_TEXT_MAX = 128
const short = (text: string): string => (text.length <= PEER_TEXT_MAX ? text : `${text.slice(0, PEER_TEXT_MAX)}…`)

/** How a request failed, as its span and metrics say it: the error's reason (`TASK_NOT_FOUND`), whether it is the server's own fault, and its message. */
export interface RequestFailure {
  reason: string
  serverFault: boolean
  message: string
}

/** Hears each model call and tool call of a client's run: how a server's metrics learn of them (RunOptions.observer). */
export interface RunObserver {
  /** A model call starts: `model` as configured, `provider` ("openai", "anthropic") when known. */
  modelCall(model: string, provider?: string): ModelCallObservation
  /** A tool call starts: `known` false for a name the toolkit does not have (counted as "unknown", so a model cannot invent label values). */
  toolCall(tool: string, callId: string, known: boolean): ToolCallObservation
}

export interface ModelCallObservation {
  /** Runs the call with its span active: the HTTP request it makes carries its traceparent. */
  within<T>(fn: () => T): T
  /** The first piece of a streamed answer arrived. */
  firstToken(): void
  /** The call answered with `usage`, or failed with `error`. */
  end(usage: Usage | undefined, error?: unknown): void
}

export interface ToolCallObservation {
  within<T>(fn: () => T): T
  /** The tool answered (`isError`: with an error result), or threw `error`. */
  end(isError: boolean, error?: unknown): void
}

/** A failure on a span: its type as `error.type`, and the span's status ERROR with its message when `serverFault`. */
function failed(span: Span, type: string, error: unknown, serverFault = true): void {
  if (!span.isRecording()) return
  span.setAttribute(ATTR.errorType, type)
  if (serverFault) span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) })
}

export class Telemetry implements RunObserver {
  /**
   * `metrics` when on; `agent` names Task runs' spans (the agent card's name).
   */
  constructor(
    readonly metrics?: A2AMetrics,
    private readonly agent = "toolnexus",
  ) {}

  /** The context active now: a Task run started now is continued under it later. */
  here(): Context {
    return context.active()
  }

  /** An A2A request reached its operation; `incoming` reads the peer's trace headers. */
  request(operation: string, binding: Binding, version: string, incoming?: HeaderLookup): RequestObservation {
    const parent = incomingContext(incoming)
    const span = tracer.startSpan(SPAN.request(operation), { kind: SpanKind.SERVER }, parent)
    if (span.isRecording()) {
      span.setAttributes({
        [ATTR.rpcSystem]: RPC_SYSTEM[binding],
        [ATTR.rpcService]: RPC_SERVICE,
        [ATTR.rpcMethod]: operation,
        [ATTR.a2aBinding]: binding,
        [ATTR.a2aVersion]: version,
      })
    }
    return new RequestObservation(this.metrics, parent, span, operation, binding)
  }

  /** An A2A request was refused before it reached an operation: counted under method NO_OPERATION, with `reason` as its outcome (no span: nothing ran). */
  refused(binding: Binding, reason: string): void {
    this.metrics?.requests.inc({ method: NO_OPERATION, binding, outcome: reason })
  }

  /** A Task's run begins, under the context its request had (`parent`). */
  taskRun(taskId: string, contextId: string | undefined, parent: Context): TaskRunObservation {
    const span = tracer.startSpan(SPAN.taskRun(this.agent), { kind: SpanKind.INTERNAL }, parent)
    if (span.isRecording()) {
      span.setAttributes({ [ATTR.genAiOperation]: "invoke_agent", [ATTR.genAiAgentName]: this.agent, [ATTR.a2aTaskId]: taskId })
      if (contextId !== undefined) span.setAttribute(ATTR.genAiConversationId, contextId)
    }
    return new TaskRunObservation(parent, span)
  }

  /** A Task's state was saved by the runner. */
  taskState(state: string): void {
    this.metrics?.taskTransitions.inc({ state })
  }

  modelCall(model: string, provider?: string): ModelCallObservation {
    const span = tracer.startSpan(SPAN.modelCall(model), { kind: SpanKind.CLIENT })
    if (span.isRecording()) {
      span.setAttributes({ [ATTR.genAiOperation]: "chat", [ATTR.genAiRequestModel]: model })
      if (provider !== undefined) span.setAttribute(ATTR.genAiProvider, provider)
    }
    return new ModelCall(this.metrics, context.active(), span, model)
  }

  toolCall(tool: string, callId: string, known: boolean): ToolCallObservation {
    // A name the toolkit lacks is the model's invention: kept out of the span's name, cut short in its attribute.
    const span = tracer.startSpan(known ? SPAN.toolCall(tool) : SPAN.toolCall("unknown"), { kind: SpanKind.INTERNAL })
    if (span.isRecording()) span.setAttributes({ [ATTR.genAiOperation]: "execute_tool", [ATTR.genAiToolName]: short(tool), [ATTR.genAiToolCallId]: short(callId) })
    return new ToolCall(this.metrics, context.active(), span, known ? tool : "unknown")
  }

  /**
   * Times one store operation: `store` is the store's kind (memory, file, postgres, nats, custom). Its
   * span is a leaf (no context switch around the store's call) and the store's own promise is returned,
   * observed beside the caller's await rather than wrapped in another. `work` may ask for the span's
   * trace context, to hand to what continues the operation's trace later (a push save's notifications).
   */
  storeOperation<T>(store: string, operation: string, work: (traceContext: () => TraceContext | undefined) => Promise<T>): Promise<T> {
    const span = tracer.startSpan(SPAN.storeOperation(operation), { kind: SpanKind.INTERNAL })
    if (span.isRecording()) span.setAttributes({ [ATTR.store]: store, [ATTR.dbOperation]: operation })
    const started = this.metrics === undefined ? 0 : performance.now()
    let pending: Promise<T>
    try {
      pending = work(() => traceContextOf(span))
    } catch (err) {
      this.storeEnded(span, store, operation, started, err)
      throw err
    }
    pending.then(
      () => this.storeEnded(span, store, operation, started, undefined),
      (err: unknown) => this.storeEnded(span, store, operation, started, err),
    )
    return pending
  }

  private storeEnded(span: Span, store: string, operation: string, started: number, err: unknown): void {
    let outcome = "ok"
    if (err !== undefined) {
      // A conflict is the shared stores' answer to a save that lost a race, not a store failing.
      outcome = (err as Error)?.name === "TaskConflictError" ? "conflict" : "error"
      failed(span, outcome, err, outcome === "error")
    }
    span.end()
    this.metrics?.storeOperationDuration.observe({ store, operation, outcome }, seconds(started))
  }

  /**
   * One push delivery attempt to `url` for Task `taskId`: a child of the save that enqueued it, by the
   * trace context its notification kept (`enqueuedBy`), on whichever instance and however late it runs;
   * without one (saved untraced, or before notifications kept it), a new trace.
   */
  pushDelivery(url: string, taskId: string, enqueuedBy?: TraceContext): PushObservation {
    const parent = continuedContext(enqueuedBy)
    const span = tracer.startSpan(SPAN.pushDelivery, { kind: SpanKind.CLIENT }, parent)
    if (span.isRecording()) {
      span.setAttributes({ [ATTR.httpMethod]: "POST", [ATTR.a2aTaskId]: taskId })
      try {
        // Host and port only: a webhook's path or query may hold a secret.
        const { hostname, port, protocol } = new URL(url)
        span.setAttributes({ [ATTR.serverAddress]: hostname, [ATTR.serverPort]: Number(port || (protocol === "https:" ? 443 : 80)) })
      } catch {
        // Not a URL: the attempt refuses it, and says so in the outcome.
      }
    }
    return new PushObservation(parent, span)
  }

  /** A notification's attempt settled: sent (2xx), retried, or dead-lettered. */
  pushSettled(outcome: "sent" | "retried" | "dead_lettered"): void {
    this.metrics?.pushNotifications.inc({ outcome })
  }
}

/** An A2A request: counted and timed when it answers; its span ends then, or with its stream. */
export class RequestObservation {
  private readonly started: number

  constructor(
    private readonly metrics: A2AMetrics | undefined,
    private readonly parent: Context,
    private readonly span: Span,
    private readonly operation: string,
    private readonly binding: Binding,
  ) {
    this.started = metrics === undefined ? 0 : performance.now()
  }

  /** Runs the operation with the request's span active: store calls and a Task it starts nest under it. */
  within<T>(fn: () => T): T {
    return within(this.parent, this.span, fn)
  }

  /** The operation answered (an error, a result, or a stream that goes on: its end is `streamEnded`). */
  answered(taskId: string | undefined, error: RequestFailure | undefined, stream: boolean): void {
    if (this.metrics !== undefined) {
      const outcome = error === undefined ? "ok" : error.reason
      this.metrics.requests.inc({ method: this.operation, binding: this.binding, outcome })
      this.metrics.requestDuration.observe({ method: this.operation, binding: this.binding }, seconds(this.started))
    }
    if (taskId !== undefined && this.span.isRecording()) this.span.setAttribute(ATTR.a2aTaskId, short(taskId))
    if (error !== undefined || !stream) this.streamEnded(error)
  }

  /** The request is over: its stream ended, with `error` when it failed midway. */
  streamEnded(error?: RequestFailure): void {
    // A peer's mistake (not found, invalid params) is the peer's: only a server fault marks the span as an error.
    if (error !== undefined) failed(this.span, error.reason, error.message, error.serverFault)
    this.span.end()
  }
}

/** One run of a Task: its span ends with the state the run left the Task in. */
export class TaskRunObservation {
  constructor(
    private readonly parent: Context,
    private readonly span: Span,
  ) {}

  within<T>(fn: () => T): T {
    return within(this.parent, this.span, fn)
  }

  end(state: string): void {
    if (this.span.isRecording()) {
      this.span.setAttribute(ATTR.a2aTaskState, state)
      if (state === "failed") this.span.setStatus({ code: SpanStatusCode.ERROR, message: "the task failed" })
    }
    this.span.end()
  }
}

class ModelCall implements ModelCallObservation {
  private readonly started = performance.now()
  private firstAt: number | undefined

  constructor(
    private readonly metrics: A2AMetrics | undefined,
    private readonly parent: Context,
    private readonly span: Span,
    private readonly model: string,
  ) {}

  within<T>(fn: () => T): T {
    return within(this.parent, this.span, fn)
  }

  firstToken(): void {
    if (this.firstAt !== undefined) return
    this.firstAt = performance.now()
    const ms = this.firstAt - this.started
    if (this.span.isRecording()) {
      this.span.addEvent(FIRST_TOKEN_EVENT)
      this.span.setAttribute(ATTR.timeToFirstTokenMs, Math.round(ms))
    }
    this.metrics?.modelTimeToFirstToken.observe({ model: this.model }, ms / 1000)
  }

  end(usage: Usage | undefined, error?: unknown): void {
    if (usage !== undefined && this.span.isRecording()) this.span.setAttributes({ [ATTR.genAiInputTokens]: usage.inputTokens, [ATTR.genAiOutputTokens]: usage.outputTokens })
    if (error !== undefined) failed(this.span, errorName(error), error)
    this.span.end()
    const metrics = this.metrics
    if (metrics === undefined) return
    metrics.modelCallDuration.observe({ model: this.model, outcome: error === undefined ? "ok" : "error" }, seconds(this.started))
    if (usage !== undefined) {
      if (usage.inputTokens > 0) metrics.modelTokens.inc({ model: this.model, type: "input" }, usage.inputTokens)
      if (usage.outputTokens > 0) metrics.modelTokens.inc({ model: this.model, type: "output" }, usage.outputTokens)
    }
  }
}

class ToolCall implements ToolCallObservation {
  private readonly started: number

  constructor(
    private readonly metrics: A2AMetrics | undefined,
    private readonly parent: Context,
    private readonly span: Span,
    /** The tool's label: its name, or "unknown". */
    private readonly tool: string,
  ) {
    this.started = metrics === undefined ? 0 : performance.now()
  }

  within<T>(fn: () => T): T {
    return within(this.parent, this.span, fn)
  }

  end(isError: boolean, error?: unknown): void {
    if (error !== undefined) failed(this.span, errorName(error), error)
    else if (isError) failed(this.span, "tool_error", "the tool answered with an error result")
    this.span.end()
    if (this.metrics === undefined) return
    this.metrics.toolCalls.inc({ tool: this.tool, outcome: isError || error !== undefined ? "error" : "ok" })
    this.metrics.toolCallDuration.observe({ tool: this.tool }, seconds(this.started))
  }
}

/** One push delivery attempt. */
export class PushObservation {
  constructor(
    private readonly parent: Context,
    private readonly span: Span,
  ) {}

  /** Runs the attempt with its span active: the POST carries its traceparent. */
  within<T>(fn: () => T): T {
    return within(this.parent, this.span, fn)
  }

  /** The attempt's outcome: delivered, retry (`why`), or final (`why`). */
  end(outcome: "delivered" | "retry" | "final", why?: string): void {
    if (this.span.isRecording()) {
      this.span.setAttribute(ATTR.pushOutcome, outcome)
      if (outcome !== "delivered") failed(this.span, outcome === "retry" ? "push_retry" : "push_final", why)
    }
    this.span.end()
  }
}

/** The HTTP status a request made under the active span (a push delivery's POST) was answered with. */
export function noteHttpStatus(status: number): void {
  const span = trace.getActiveSpan()
  if (span?.isRecording()) span.setAttribute(ATTR.httpStatus, status)
}

/** An error's class name, a bounded `error.type`. */
function errorName(error: unknown): string {
  return error instanceof Error ? error.name : "Error"
}

/**
 * Whether an OpenTelemetry SDK has registered a tracer provider: the API's
 * global proxy then has a delegate (read by its shape, as the application's copy
 * of the API may not be ours). Decides whether the store is wrapped for tracing.
 */
export function tracingRegistered(): boolean {
  const provider = trace.getTracerProvider() as { getDelegateTracer?: (name: string) => Tracer | undefined }
  return typeof provider.getDelegateTracer !== "function" || provider.getDelegateTracer(TRACER_NAME) !== undefined
}

/** Spans only, no metrics: what a client run standalone reports to. */
export const tracesOnly = new Telemetry()
