import { Counter, Gauge, Histogram, Registry } from "prom-client"
import { METRIC } from "./names.js"

/**
 * The server's Prometheus metrics, in a registry of its own (never
 * prom-client's global one), so two servers in one process count apart.
 * Loaded only when metrics are on: an agent without them never loads prom-client.
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

export class A2AMetrics {
  readonly registry = new Registry()
  readonly requests: Counter<"method" | "binding" | "outcome">
  readonly requestDuration: Histogram<"method" | "binding">
  readonly taskTransitions: Counter<"state">
  readonly modelCallDuration: Histogram<"model" | "outcome">
  readonly modelTimeToFirstToken: Histogram<"model">
  readonly modelTokens: Counter<"model" | "type">
  readonly toolCalls: Counter<"tool" | "outcome">
  readonly toolCallDuration: Histogram<"tool">
  readonly storeOperationDuration: Histogram<"store" | "operation" | "outcome">
  readonly pushNotifications: Counter<"outcome">
  private sources: MetricSources = {}

  constructor() {
    const registers = [this.registry]
    this.requests = new Counter({
      name: METRIC.requests,
      help: "A2A requests, by operation (none: refused before reaching one), binding and outcome (ok, or the error's or refusal's reason)",
      labelNames: ["method", "binding", "outcome"],
      registers,
    })
    this.requestDuration = new Histogram({
      name: METRIC.requestDuration,
      help: "Time from an A2A request reaching its operation to its answer (a stream: to its first frame), in seconds",
      labelNames: ["method", "binding"],
      buckets: REQUEST_BUCKETS,
      registers,
    })
    this.taskTransitions = new Counter({ name: METRIC.taskTransitions, help: "Task states saved by this server's runner, by the state entered", labelNames: ["state"], registers })
    this.modelCallDuration = new Histogram({
      name: METRIC.modelCallDuration,
      help: "Model calls (one turn of the tool-calling loop, retries included), in seconds, by model and outcome",
      labelNames: ["model", "outcome"],
      buckets: MODEL_BUCKETS,
      registers,
    })
    this.modelTimeToFirstToken = new Histogram({
      name: METRIC.modelTimeToFirstToken,
      help: "Time from a streamed model call's start to its first piece of text, in seconds",
      labelNames: ["model"],
      buckets: MODEL_BUCKETS,
      registers,
    })
    this.modelTokens = new Counter({ name: METRIC.modelTokens, help: "Tokens the model endpoints reported, by model and type (input, output)", labelNames: ["model", "type"], registers })
    this.toolCalls = new Counter({ name: METRIC.toolCalls, help: "Tool calls, by tool (unknown: a name the toolkit lacks) and outcome (ok, error)", labelNames: ["tool", "outcome"], registers })
    this.toolCallDuration = new Histogram({ name: METRIC.toolCallDuration, help: "Tool calls, in seconds, by tool", labelNames: ["tool"], registers })
    this.storeOperationDuration = new Histogram({
      name: METRIC.storeOperationDuration,
      help: "Task store operations, in seconds, by store (memory, file, postgres, nats, custom), operation and outcome (ok, error)",
      labelNames: ["store", "operation", "outcome"],
      buckets: STORE_BUCKETS,
      registers,
    })
    this.pushNotifications = new Counter({
      name: METRIC.pushNotifications,
      help: "Push notification attempts settled, by outcome: sent (2xx), retried, dead_lettered",
      labelNames: ["outcome"],
      registers,
    })
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
