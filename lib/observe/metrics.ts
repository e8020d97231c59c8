import { Gauge, Registry } from "prom-client"
import { CounterFamily, HistogramFamily } from "./families.js"
import { METRIC } from "./names.js"

/**
 * The server's Prometheus metrics, in a registry of its own (never
 * prom-client's global one), so two servers in one process count apart.
 * Loaded only when metrics are on: an agent without them never loads prom-client.
 * What requests update is counted by families.ts (prom-client's own counters
 * cost a GetTask a tenth of its time); the gauges, read at a scrape, are prom-client's.
 */

/** What the gauges read at each scrape: they cost nothing between scrapes. */
export interface MetricSources {
  /** Tasks running in this process, and those waiting for a slot. */
  tasks?: () => { running: number; queued: number }
  /** Streams open on every binding. */
  openStreams?: () => number
  /** When the oldest undelivered push notification was enqueued (ms since the epoch), if the push store can tell; undefined: none pending. */
  oldestPendingPush?: () => Promise<number | undefined>
}

const STORE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
const MODEL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]
/** prom-client's default buckets, which the tool histogram had before it was counted here. */
const TOOL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

export class A2AMetrics {
  readonly registry = new Registry()
  readonly requests: CounterFamily<"method" | "binding" | "outcome">
  readonly requestDuration: HistogramFamily<"method" | "binding">
  readonly taskTransitions: CounterFamily<"state">
  readonly modelCallDuration: HistogramFamily<"model" | "outcome">
  readonly modelTimeToFirstToken: HistogramFamily<"model">
  readonly modelTokens: CounterFamily<"model" | "type">
  readonly toolCalls: CounterFamily<"tool" | "outcome">
  readonly toolCallDuration: HistogramFamily<"tool">
  readonly storeOperationDuration: HistogramFamily<"store" | "operation" | "outcome">
  readonly pushNotifications: CounterFamily<"outcome">
  private sources: MetricSources = {}

  constructor() {
    const registers = [this.registry]
    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) => new CounterFamily(name, help, labelNames).registerIn(this.registry)
    const histogram = <L extends string>(name: string, help: string, labelNames: readonly L[], buckets: readonly number[]) =>
      new HistogramFamily(name, help, labelNames, buckets).registerIn(this.registry)
    this.requests = counter(
      METRIC.requests,
      "A2A requests, by operation (none: refused before reaching one), binding and outcome (ok, or the error's or refusal's reason)",
      ["method", "binding", "outcome"],
    )
    this.requestDuration = histogram(
      METRIC.requestDuration,
      "Time from an A2A request reaching its operation to its answer (a stream: to its first frame), in seconds",
      ["method", "binding"],
      REQUEST_BUCKETS,
    )
    this.taskTransitions = counter(METRIC.taskTransitions, "Task states saved by this server's runner, by the state entered", ["state"])
    this.modelCallDuration = histogram(METRIC.modelCallDuration, "Model calls (one turn of the tool-calling loop, retries included), in seconds, by model and outcome", ["model", "outcome"], MODEL_BUCKETS)
    this.modelTimeToFirstToken = histogram(METRIC.modelTimeToFirstToken, "Time from a streamed model call's start to its first piece of text, in seconds", ["model"], MODEL_BUCKETS)
    this.modelTokens = counter(METRIC.modelTokens, "Tokens the model endpoints reported, by model and type (input, output)", ["model", "type"])
    this.toolCalls = counter(METRIC.toolCalls, "Tool calls, by tool (unknown: a name the toolkit lacks) and outcome (ok, error)", ["tool", "outcome"])
    this.toolCallDuration = histogram(METRIC.toolCallDuration, "Tool calls, in seconds, by tool", ["tool"], TOOL_BUCKETS)
    this.storeOperationDuration = histogram(
      METRIC.storeOperationDuration,
      "Task store operations, in seconds, by store (memory, file, postgres, nats, custom), operation and outcome (ok, error)",
      ["store", "operation", "outcome"],
      STORE_BUCKETS,
    )
    this.pushNotifications = counter(METRIC.pushNotifications, "Push notification attempts settled, by outcome: sent (2xx), retried, dead_lettered", ["outcome"])
    const sources = () => this.sources
    new Gauge({
      name: METRIC.tasksRunning,
      help: "Tasks running in this process now",
      registers,
      collect() {
        this.set(sources().tasks?.().running ?? 0)
      },
    })
    new Gauge({
      name: METRIC.tasksQueued,
      help: "Tasks waiting for a slot in this process now (still submitted)",
      registers,
      collect() {
        this.set(sources().tasks?.().queued ?? 0)
      },
    })
    new Gauge({
      name: METRIC.openStreams,
      help: "Streams (SendStreamingMessage, SubscribeToTask) open now, every binding",
      registers,
      collect() {
        this.set(sources().openStreams?.() ?? 0)
      },
    })
  }

  /** Where the gauges read from, once the agent's parts exist; the push age gauge exists only when the push store can tell it. */
  watch(sources: MetricSources): void {
    this.sources = sources
    const oldest = sources.oldestPendingPush
    if (oldest === undefined) return
    new Gauge({
      name: METRIC.pushOldestPendingAge,
      help: "Age of the oldest push notification not yet delivered, in seconds (0: none pending)",
      registers: [this.registry],
      async collect() {
        const at = await oldest()
        this.set(at === undefined ? 0 : Math.max(0, (Date.now() - at) / 1000))
      },
    })
  }

  /** The Prometheus text exposition of every metric. */
  text(): Promise<string> {
    return this.registry.metrics()
  }

  /** The content type of `text()`. */
  get contentType(): string {
    return this.registry.contentType
  }
}
