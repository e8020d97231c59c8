/**
 * Every span name, span attribute and metric name the server sets, in one
 * place: docs/guides/observability.md and docs/reference/metrics.md list the same. Attribute keys
 * follow the OpenTelemetry semantic conventions where one exists (RPC, GenAI,
 * HTTP, database, `error.type`); the others are ours, under `a2a.` or `toolnexus.`.
 */

/** The instrumentation scope our tracer is got under. */
export const TRACER_NAME = "toolnexus"

/** The gRPC service the spec names: A2A operations' spans are named `<service>/<operation>` on every binding, as RPC spans are. */
export const RPC_SERVICE = "lf.a2a.v1.A2AService"

export const SPAN = {
  /** `lf.a2a.v1.A2AService/<operation>`: one A2A request, kind SERVER. */
  request: (operation: string) => `${RPC_SERVICE}/${operation}`,
  /** `invoke_agent <agent>`: one run of a Task (GenAI's agent invocation), kind INTERNAL. */
  taskRun: (agent: string) => `invoke_agent ${agent}`,
  /** `chat <model>`: one model call (GenAI's inference span), kind CLIENT. */
  modelCall: (model: string) => `chat ${model}`,
  /** `execute_tool <tool>`: one tool call (GenAI's tool span), kind INTERNAL. */
  toolCall: (tool: string) => `execute_tool ${tool}`,
  /** `<operation> task_store`: one store operation, kind INTERNAL. */
  storeOperation: (operation: string) => `${operation} task_store`,
  /** `POST`: one push delivery attempt (HTTP client span), kind CLIENT. */
  pushDelivery: "POST",
} as const

/** The span attributes we set. */
export const ATTR = {
  rpcSystem: "rpc.system",
  rpcService: "rpc.service",
  rpcMethod: "rpc.method",
  errorType: "error.type",
  a2aBinding: "a2a.binding",
  a2aVersion: "a2a.version",
  a2aTaskId: "a2a.task.id",
  a2aTaskState: "a2a.task.state",
  genAiOperation: "gen_ai.operation.name",
  genAiProvider: "gen_ai.provider.name",
  genAiRequestModel: "gen_ai.request.model",
  genAiInputTokens: "gen_ai.usage.input_tokens",
  genAiOutputTokens: "gen_ai.usage.output_tokens",
  genAiAgentName: "gen_ai.agent.name",
  genAiConversationId: "gen_ai.conversation.id",
  genAiToolName: "gen_ai.tool.name",
  genAiToolCallId: "gen_ai.tool.call.id",
  timeToFirstTokenMs: "toolnexus.model.time_to_first_token_ms",
  dbOperation: "db.operation.name",
  store: "toolnexus.store",
  httpMethod: "http.request.method",
  httpStatus: "http.response.status_code",
  serverAddress: "server.address",
  serverPort: "server.port",
  pushOutcome: "toolnexus.push.outcome",
} as const

/** The span event a model call gets when its first piece of text arrives. */
export const FIRST_TOKEN_EVENT = "gen_ai.first_token"

/** Each binding's `rpc.system`: JSON-RPC and gRPC have registered values; HTTP+JSON has none, and is named as the spec names it. */
export const RPC_SYSTEM = { jsonrpc: "jsonrpc", grpc: "grpc", rest: "http_json" } as const

/** The `method` label of a request refused before it reached an operation (its `outcome` says why): the name it asked for is the peer's, unbounded. */
export const NO_OPERATION = "none"

/** The Prometheus metrics, by name; label values are bounded (docs/reference/metrics.md says which). */
export const METRIC = {
  requests: "toolnexus_a2a_requests_total",
  requestDuration: "toolnexus_a2a_request_duration_seconds",
  openStreams: "toolnexus_a2a_open_streams",
  taskTransitions: "toolnexus_task_transitions_total",
  tasksRunning: "toolnexus_tasks_running",
  tasksQueued: "toolnexus_tasks_queued",
  modelCallDuration: "toolnexus_model_call_duration_seconds",
  modelTimeToFirstToken: "toolnexus_model_time_to_first_token_seconds",
  modelTokens: "toolnexus_model_tokens_total",
  toolCalls: "toolnexus_tool_calls_total",
  toolCallDuration: "toolnexus_tool_call_duration_seconds",
  storeOperationDuration: "toolnexus_store_operation_duration_seconds",
  pushNotifications: "toolnexus_push_notifications_total",
  pushOldestPendingAge: "toolnexus_push_oldest_pending_age_seconds",
} as const
