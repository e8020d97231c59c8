/**
 * The part of a Vercel AI SDK language model (the `LanguageModelV3` and
 * `LanguageModelV4` types of `@ai-sdk/provider`) that the `languageModel`
 * adapter uses, declared here rather than imported: the package builds, and
 * an application type-checks, without the AI SDK installed.
 *
 * What differs between the two versions, and how the adapter takes it:
 *
 * | | v3: ai 6, `@ai-sdk/*` 3.x | v4: ai 7, `@ai-sdk/*` 4.x |
 * |---|---|---|
 * | stream parts | text, reasoning, tool-input, tool-call, tool-result, file, source, stream-start, response-metadata, finish, raw, error | the same, plus `ping`, `custom` and `reasoning-file`: ignored like every part the loop does not need |
 * | `finishReason.unified` | stop, length, content-filter, tool-calls, error, other | the same, plus `interrupted` (the provider's stream ended without its end): the turn fails as a cut stream does |
 * | `tool-input-start` | input deltas are JSON | `inputEncoding: "text"` may make them raw text: the adapter reads only the final `tool-call` part, whose `input` is JSON text in both |
 * | usage | `{ inputTokens: { total, ... }, outputTokens: { total, ... } }` | the same |
 * | prompt and function tools | what the adapter sends is read the same by both | |
 *
 * Earlier versions (v2: ai 5; v1: ai 4) had other usage and tool-call shapes
 * (flat token counts, `args`); createClient refuses them by their
 * `specificationVersion`, naming the packages to upgrade.
 *
 * @module
 */

/** The specification versions the adapter speaks. */
export type AiSdkSpecificationVersion = "v3" | "v4"

/**
 * A Vercel AI SDK language model: what `createOpenAI({ baseURL, apiKey }).chat("model")`,
 * `anthropic("model")`, `google("model")` and `new MockLanguageModelV4()` from `ai/test` return,
 * for providers built on `@ai-sdk/provider` 3.x (ai 6) or 4.x (ai 7).
 */
export interface AiSdkLanguageModel {
  readonly specificationVersion: AiSdkSpecificationVersion
  /** The provider's id, such as "openai.chat" or "anthropic.messages": traces name the provider from it. */
  readonly provider: string
  /** The model's id, such as "gpt-4o-mini": the client's `model`, and `gen_ai.request.model` in traces. */
  readonly modelId: string
  /** One whole answer: a turn run without `onText`. */
  doGenerate(options: AiSdkCallOptions): PromiseLike<AiSdkGenerateResult>
  /** One streamed answer: a turn run with `onText` (a served agent always streams). */
  doStream(options: AiSdkCallOptions): PromiseLike<AiSdkStreamResult>
}

/** What the adapter passes to `doGenerate` and `doStream`: the fields v3 and v4 call options share. */
export interface AiSdkCallOptions {
  prompt: AiSdkMessage[]
  /** The toolkit's tools; left out when there are none. */
  tools?: AiSdkFunctionTool[]
  /** `createClient`'s `maxTokens`, when given; else the provider's default. */
  maxOutputTokens?: number
  /** Aborted on the caller's cancel, a timeout or a limit passed: providers cancel their request with it. */
  abortSignal: AbortSignal
  /** `createClient`'s `headers` and the trace context (`traceparent`): sent by HTTP providers. */
  headers?: Record<string, string>
}

/** A tool offered to the model, with the JSON schema of its input. */
export interface AiSdkFunctionTool {
  type: "function"
  name: string
  description?: string
  inputSchema: Record<string, unknown>
}

/** The conversation as the AI SDK's prompt: one message per chat message, a tool message per run of tool results. */
export type AiSdkMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: AiSdkTextPart[] }
  | { role: "assistant"; content: Array<AiSdkTextPart | AiSdkToolCallPart> }
  | { role: "tool"; content: AiSdkToolResultPart[] }

export interface AiSdkTextPart {
  type: "text"
  text: string
}

/** A call the model made, sent back with the conversation; `input` is the arguments object. */
export interface AiSdkToolCallPart {
  type: "tool-call"
  toolCallId: string
  toolName: string
  input: unknown
}

/** A tool's result; `error-text` tells the model the tool failed. */
export interface AiSdkToolResultPart {
  type: "tool-result"
  toolCallId: string
  toolName: string
  output: { type: "text" | "error-text"; value: string }
}

/** `doGenerate`'s answer. `content` is read part by part: `text` and `tool-call` are used, every other part is skipped. */
export interface AiSdkGenerateResult {
  content: ReadonlyArray<AiSdkPart>
  usage?: unknown
  finishReason?: unknown
}

/** `doStream`'s answer: a ReadableStream of parts. */
export interface AiSdkStreamResult {
  stream: AiSdkPartStream
}

/** The ReadableStream methods the adapter calls; each part read is checked before use. */
export interface AiSdkPartStream {
  getReader(): {
    read(): Promise<{ done: boolean; value?: unknown }>
    cancel(reason?: unknown): Promise<void>
  }
}

/**
 * A content or stream part, as the adapter first sees it: a `type` and
 * fields it checks before use (an in-process object may hold anything). The
 * shapes it reads are the Aisdk*Part types below.
 */
export interface AiSdkPart {
  readonly type: string
}

/** A piece of the answer's text, in a stream. */
export interface AiSdkTextDeltaPart extends AiSdkPart {
  type: "text-delta"
  delta: string
}

/** A whole text part, in doGenerate's content. */
export interface AiSdkTextContent extends AiSdkPart {
  type: "text"
  text: string
}

/** A finished tool call, in both: `input` is the arguments as JSON text in v3 and v4 alike. */
export interface AiSdkToolCall extends AiSdkPart {
  type: "tool-call"
  toolCallId: string
  toolName: string
  input: string
  /** Run by the provider itself (a hosted tool); the loop neither runs nor answers it. */
  providerExecuted?: boolean
}

/** The stream's last part: token counts and why it ended. */
export interface AiSdkFinishPart extends AiSdkPart {
  type: "finish"
  usage: AiSdkUsage
  finishReason: { unified: string; raw?: string } | string
}

/** A failure the provider reports inside the stream, after its answer began. */
export interface AiSdkErrorPart extends AiSdkPart {
  type: "error"
  error: unknown
}

/** Token counts in v3 and v4: `total` of each side; the parts (cached, reasoning) are not used. */
export interface AiSdkUsage {
  inputTokens?: { total?: number }
  outputTokens?: { total?: number }
}
