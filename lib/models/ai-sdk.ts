import { unlessAborted } from "../abort.js"
import { withTraceHeaders } from "../observe/propagation.js"
import { credentialRedactor } from "../redact.js"
import { parseRetryAfter } from "../retry-after.js"
import type { Toolkit } from "../tools/types.js"
import type {
  AiSdkCallOptions,
  AiSdkErrorPart,
  AiSdkFinishPart,
  AiSdkFunctionTool,
  AiSdkLanguageModel,
  AiSdkMessage,
  AiSdkPart,
  AiSdkStreamResult,
  AiSdkTextContent,
  AiSdkTextDeltaPart,
  AiSdkToolCall,
  AiSdkToolResultPart,
} from "./ai-sdk-types.js"
import { backoffMs, isObject, PROVIDER_MESSAGE_MAX, sleep, snippet, type RetryPolicy, type TurnLimits } from "./http.js"
import { usageFrom, type ChatMessage, type Model, type ModelRequest, type ModelToolCall, type ModelTurn, type Usage } from "./model.js"
import { toolCallFrom } from "./tool-arguments.js"

/**
 * The `languageModel` adapter: one turn of the tool-calling loop through a
 * Vercel AI SDK language model's `doStream` (with `onText`) or `doGenerate`
 * (without), called directly, so the loop, its tools, retries, limits and
 * spans stay ours whatever the provider. Nothing of the AI SDK is imported:
 * the model object brings its provider's code with it.
 *
 * What the client's options mean here:
 * - `timeoutMs`: the wait for `doGenerate`, or for `doStream` and then each
 *   next part (an idle timeout, as for a streamed HTTP answer).
 * - `turnTimeoutMs`: the whole turn, retries included.
 * - `maxRetries`, `retryDeadlineMs`, `retryBaseDelayMs`: a failure the
 *   provider marks `isRetryable` (the AI SDK's APICallError does for 408,
 *   409, 429, 5xx and a failed connection), or a stream that broke off, is
 *   tried again, after its `retry-after` header when it has one, unless
 *   text already went out.
 * - `maxResponseBytes`: the bytes of text and tool-call input the model
 *   object hands over. Its provider reads the HTTP answer itself, so the
 *   bytes on the wire cannot be counted here: give the provider a `fetch` of
 *   your own to bound those.
 * - Every stop (cancel, timeout, limit) aborts the `abortSignal` the model
 *   was given, and the adapter stops waiting even for a model that ignores it.
 */
export interface AiSdkModelOptions {
  /** Sent with each call (HTTP providers add them to their request), with the trace context. */
  headers?: Record<string, string>
  maxOutputTokens?: number
  timeoutMs: number
  retry: RetryPolicy
  limits: Pick<TurnLimits, "maxResponseBytes" | "turnTimeoutMs">
}

export function aiSdkModel(languageModel: AiSdkLanguageModel, opts: AiSdkModelOptions): Model {
  return {
    name: languageModel.modelId,
    provider: genAiProviderName(languageModel.provider),
    turn: (request) => runTurn(languageModel, opts, request),
  }
}

/**
 * The AI SDK's provider id ("openai.chat", "google.generative-ai") as the
 * GenAI semantic conventions' `gen_ai.provider.name`: their well-known value
 * where there is one, else the id's first segment.
 */
export function genAiProviderName(providerId: string): string {
  const family = providerId.split(".")[0]
  return WELL_KNOWN_PROVIDERS[providerId] ?? WELL_KNOWN_PROVIDERS[family] ?? family
}

const WELL_KNOWN_PROVIDERS: Readonly<Record<string, string>> = {
  "amazon-bedrock": "aws.bedrock",
  azure: "azure.ai.openai",
  google: "gcp.gemini",
  "google.vertex": "gcp.vertex_ai",
  "google.vertex.chat": "gcp.vertex_ai",
  mistral: "mistral_ai",
  xai: "x_ai",
}

/** A turn failed in a way that retrying cannot mend: a limit passed, or the caller's abort. Thrown as is. */
class TurnStop extends Error {
  constructor(message: string) {
    super(message)
    this.name = "TurnStop"
  }
}

/** What one call of the model came to, short of a TurnStop. */
type Attempt =
  | { kind: "turn"; turn: ModelTurn }
  | { kind: "timeout" }
  /** The model threw, or its stream failed or stopped short; `afterText`: some text had reached onText. */
  | { kind: "failed"; error: unknown; afterText: boolean }

async function runTurn(model: AiSdkLanguageModel, opts: AiSdkModelOptions, request: ModelRequest): Promise<ModelTurn> {
  const label = `${model.provider} model`
  const { turnTimeoutMs } = opts.limits
  const turn = new AbortController()
  const turnTimer = setTimeout(() => turn.abort(new TurnStop(`The ${label}'s turn took longer than ${turnTimeoutMs} ms in all; the limit is createClient's turnTimeoutMs`)), turnTimeoutMs)
  // Not unref()-ed, unlike the HTTP adapters' (whose sockets hold the process): an in-process model may hold nothing else open, and a turn under way is work to wait for.
  const bounded = request.signal ? AbortSignal.any([request.signal, turn.signal]) : turn.signal
  const call = {
    prompt: toPrompt(request.messages),
    tools: functionTools(request.toolkit),
    // Read inside the model call's span, so providers send its traceparent.
    headers: withTraceHeaders(opts.headers ?? {}),
  }
  const deadline = Date.now() + opts.retry.deadlineMs
  try {
    for (let attempt = 1; ; attempt++) {
      const result = await attemptOnce(model, opts, call, bounded, request.onText)
      if (result.kind === "turn") return result.turn
      const waitMs = retryWait(result, attempt, opts.retry, deadline)
      if (waitMs !== undefined) {
        await sleep(waitMs, bounded)
        continue
      }
      throw await failure(model, opts, result, attempt)
    }
  } finally {
    clearTimeout(turnTimer)
  }
}

/** One call of doStream or doGenerate; throws only the turn's abort (the caller's or a TurnStop) and limit errors. */
async function attemptOnce(
  model: AiSdkLanguageModel,
  opts: AiSdkModelOptions,
  call: { prompt: AiSdkMessage[]; tools: AiSdkFunctionTool[]; headers: Record<string, string> },
  bounded: AbortSignal,
  onText: ((delta: string) => void) | undefined,
): Promise<Attempt> {
  const idle = new AbortController()
  const stop = new AbortController() // this attempt ended early: the model's request is canceled
  const timer = setTimeout(() => idle.abort(), opts.timeoutMs)
  const signal = AbortSignal.any([bounded, idle.signal, stop.signal])
  const options: AiSdkCallOptions = {
    prompt: call.prompt,
    ...(call.tools.length > 0 && { tools: call.tools }),
    ...(opts.maxOutputTokens !== undefined && { maxOutputTokens: opts.maxOutputTokens }),
    abortSignal: signal,
    ...(Object.keys(call.headers).length > 0 && { headers: call.headers }),
  }
  const answer = new Answer(model.provider, opts.limits.maxResponseBytes)
  let done = false
  try {
    if (onText) await readStream(model, options, answer, onText, () => timer.refresh())
    else answer.takeGenerated(await unlessAborted(() => model.doGenerate(options), signal))
    done = true
    return answer.ended()
  } catch (err) {
    if (bounded.aborted) throw bounded.reason
    if (err instanceof TurnStop) throw err
    if (idle.signal.aborted) return { kind: "timeout" }
    return { kind: "failed", error: err, afterText: answer.afterText }
  } finally {
    clearTimeout(timer)
    if (!done) stop.abort()
  }
}

async function readStream(model: AiSdkLanguageModel, options: AiSdkCallOptions, answer: Answer, onText: (delta: string) => void, touch: () => void): Promise<void> {
  const signal = options.abortSignal
  const result: unknown = await unlessAborted(() => model.doStream(options), signal)
  const stream = isObject(result) ? (result as Partial<AiSdkStreamResult>).stream : undefined
  if (typeof stream?.getReader !== "function") throw new TypeError("doStream answered without a stream (a ReadableStream of parts)")
  const reader = stream.getReader()
  let finished = false
  try {
    for (;;) {
      touch()
      let read: { done: boolean; value?: unknown }
      try {
        read = await unlessAborted(() => reader.read(), signal)
      } catch (err) {
        if (signal.aborted) throw err
        // The stream itself failed (a connection cut mid-answer): a cut, retried like one when no text went out.
        throw new StreamEnd(errorWords(err), true)
      }
      if (read.done) break
      answer.takeStreamed(read.value, onText)
    }
    finished = true
  } finally {
    // A stream left early (an error part, a limit, an abort) is canceled, and its request with it.
    if (!finished) reader.cancel().catch(() => {})
  }
}

/** The answer being read: its text, tool calls and usage, and the bytes they came to. */
class Answer {
  text = ""
  afterText = false
  private readonly calls: ModelToolCall[] = []
  private usage: Usage = usageFrom(0, 0)
  private reason: string | undefined // finishReason.unified, once the stream's finish part came
  private bytes = 0

  constructor(
    private readonly provider: string,
    private readonly maxBytes: number,
  ) {}

  /** One stream part: text goes to onText, a finished call and the usage are kept, parts the loop does not need are skipped. */
  takeStreamed(part: unknown, onText: (delta: string) => void): void {
    if (!isPart(part)) throw new TypeError(`the stream held ${snippet(String(JSON.stringify(part)), 100)}, not a part with a type`)
    if (isTextDelta(part)) {
      if (part.delta === "") return
      this.count(part.delta)
      this.text += part.delta
      this.afterText = true
      onText(part.delta)
    } else if (part.type === "tool-call") {
      this.takeCall(part)
    } else if (part.type === "finish") {
      const finish = part as Partial<AiSdkFinishPart>
      this.usage = usageOf(finish.usage)
      this.reason = unifiedReason(finish.finishReason)
    } else if (part.type === "error") {
      throw new ModelStreamError((part as Partial<AiSdkErrorPart>).error)
    }
  }

  /** doGenerate's result: its text parts in order, its tool calls, its usage. */
  takeGenerated(result: unknown): void {
    if (!isObject(result) || !Array.isArray(result.content)) throw new TypeError("doGenerate answered without content (an array of parts)")
    for (const part of result.content as unknown[]) {
      if (!isPart(part)) continue
      if (isTextContent(part)) {
        this.count(part.text)
        this.text += part.text
      } else if (part.type === "tool-call") this.takeCall(part)
    }
    this.usage = usageOf(result.usage)
    this.reason = unifiedReason(result.finishReason) ?? "stop"
  }

  /** The turn, once the stream closed (or doGenerate answered): a StreamEnd when it stopped short of an answer. */
  ended(): Attempt {
    if (this.reason === undefined) throw new StreamEnd("the stream ended before its finish part", true)
    // v4's "interrupted": the provider's own stream ended without its end.
    if (this.reason === "interrupted") throw new StreamEnd("the provider's stream ended without its end (finishReason interrupted)", true)
    if (this.reason === "error") throw new StreamEnd("the model ended its answer with finishReason error", false)
    return { kind: "turn", turn: { text: this.text, toolCalls: this.calls, usage: this.usage } }
  }

  private takeCall(part: AiSdkPart): void {
    const call = part as Partial<AiSdkToolCall>
    if (call.providerExecuted === true) return // a hosted tool the provider ran itself
    const id = typeof call.toolCallId === "string" && call.toolCallId !== "" ? call.toolCallId : `call_${this.calls.length}`
    const name = typeof call.toolName === "string" ? call.toolName : ""
    if (typeof call.input === "string") this.count(call.input)
    this.calls.push(toolCallFrom(id, name, call.input))
  }

  private count(text: string): void {
    this.bytes += Buffer.byteLength(text)
    if (this.bytes > this.maxBytes) {
      throw new TurnStop(`The ${this.provider} model's answer ran past ${this.maxBytes} bytes of text and tool input; the limit is createClient's maxResponseBytes`)
    }
  }
}

/** An `error` part: the provider's failure inside the stream. */
class ModelStreamError extends Error {
  constructor(readonly error: unknown) {
    super(errorWords(error))
    this.name = "ModelStreamError"
  }
}

/** The stream stopped short of a whole answer; the message says how. `cut`: it broke off, and may be tried again if no text went out. */
class StreamEnd extends Error {
  constructor(
    message: string,
    readonly cut: boolean,
  ) {
    super(message)
    this.name = "StreamEnd"
  }
}

/**
 * Another try's wait, or undefined to stop: a failure the provider marks
 * retryable (never a timeout, never once text went out) within the retries
 * and the deadline, after the `retry-after` it asked for or a backoff.
 */
function retryWait(result: Attempt, attempt: number, policy: RetryPolicy, deadline: number): number | undefined {
  if (result.kind !== "failed" || result.afterText || attempt > policy.maxRetries) return undefined
  const error = result.error instanceof ModelStreamError ? result.error.error : result.error
  if (error instanceof StreamEnd) {
    if (!error.cut) return undefined
  } else if (!(isObject(error) && error.isRetryable === true)) return undefined
  const headers = isObject(error) ? error.responseHeaders : undefined
  const asked = isObject(headers) ? parseRetryAfter(headerValue(headers, "retry-after"), Date.now()) : undefined
  const waitMs = asked ?? backoffMs(attempt, policy.baseDelayMs)
  return Date.now() + waitMs < deadline ? waitMs : undefined
}

/** The turn's Error: what went wrong in the provider's words, after how many attempts, cut and without the credentials the adapter knows of. */
async function failure(model: AiSdkLanguageModel, opts: AiSdkModelOptions, result: Exclude<Attempt, { kind: "turn" }>, attempts: number): Promise<Error> {
  const label = `${model.provider} model`
  const after = attempts > 1 ? ` after ${attempts} attempts` : ""
  if (result.kind === "timeout") {
    return new Error(`The ${label} did not answer within ${opts.timeoutMs} ms${attempts > 1 ? ` on attempt ${attempts}` : ""}; raise opts.timeoutMs if it is just slow`)
  }
  const hide = credentialRedactor({ ...(await providerHeaders(model)), ...opts.headers })
  const error = result.error instanceof ModelStreamError ? result.error.error : result.error
  const words = snippet(hide(errorWords(error)), PROVIDER_MESSAGE_MAX)
  if (result.afterText) {
    return new Error(hide(`The ${label}'s answer broke off after streaming had begun (${words}); not retried, since the text already streamed would be said twice`))
  }
  const status = isObject(error) && typeof error.statusCode === "number" ? ` answered ${error.statusCode}` : " failed"
  return new Error(hide(`The ${label}${status}${after}: ${words}`))
}

/**
 * The headers an HTTP provider built on `@ai-sdk/provider-utils` sends (its
 * key among them), read from the model's `config.headers` where it has one,
 * so that an endpoint echoing the key into an error does not put it in a
 * failed Task. Best effort: a provider without it keeps its key to itself.
 */
async function providerHeaders(model: AiSdkLanguageModel): Promise<Record<string, string>> {
  try {
    const config: unknown = (model as unknown as { config?: unknown }).config
    if (!isObject(config) || typeof config.headers !== "function") return {}
    const headers: unknown = await (config.headers as () => unknown)()
    if (!isObject(headers)) return {}
    return Object.fromEntries(Object.entries(headers).filter((entry): entry is [string, string] => typeof entry[1] === "string"))
  } catch {
    return {}
  }
}

/** What an error says: its message, else the thing itself as text. */
function errorWords(error: unknown): string {
  if (error instanceof Error) return error.message || error.name
  if (typeof error === "string") return error
  if (isObject(error) && typeof error.message === "string") return error.message
  try {
    return JSON.stringify(error) ?? String(error)
  } catch {
    return String(error)
  }
}


/** The conversation as the AI SDK's prompt; a run of tool messages becomes one tool message, as the AI SDK itself sends them. */
export function toPrompt(messages: readonly ChatMessage[]): AiSdkMessage[] {
  const prompt: AiSdkMessage[] = []
  const toolNames = new Map<string, string>() // a tool result names its tool; ChatMessage keeps only the call id
  for (const message of messages) {
    if (message.role === "system") prompt.push({ role: "system", content: message.content })
    else if (message.role === "user") prompt.push({ role: "user", content: [{ type: "text", text: message.content }] })
    else if (message.role === "assistant") {
      const calls = message.toolCalls ?? []
      for (const call of calls) toolNames.set(call.id, call.name)
      const text = message.content === "" && calls.length > 0 ? [] : [{ type: "text" as const, text: message.content }]
      prompt.push({ role: "assistant", content: [...text, ...calls.map((call) => ({ type: "tool-call" as const, toolCallId: call.id, toolName: call.name, input: call.args }))] })
    } else {
      const id = message.toolCallId ?? ""
      const result: AiSdkToolResultPart = {
        type: "tool-result",
        toolCallId: id,
        toolName: toolNames.get(id) ?? "",
        output: { type: message.isError ? "error-text" : "text", value: message.content },
      }
      const last = prompt.at(-1)
      if (last?.role === "tool") last.content.push(result)
      else prompt.push({ role: "tool", content: [result] })
    }
  }
  return prompt
}

/** The toolkit's tools as function tools, with their JSON schemas. */
function functionTools(toolkit: Toolkit | undefined): AiSdkFunctionTool[] {
  return (toolkit?.tools() ?? []).map((tool) => ({ type: "function", name: tool.name, description: tool.description, inputSchema: tool.inputSchema }))
}

/** v3 and v4 usage: `{ inputTokens: { total }, outputTokens: { total } }`; a count missing is 0. */
function usageOf(usage: unknown): Usage {
  if (!isObject(usage)) return usageFrom(0, 0)
  const total = (side: unknown) => (isObject(side) ? side.total : undefined)
  return usageFrom(total(usage.inputTokens), total(usage.outputTokens))
}

/** `finishReason.unified` (v3, v4); a plain string as some hand-written models send it. */
function unifiedReason(reason: unknown): string | undefined {
  if (typeof reason === "string") return reason
  return isObject(reason) && typeof reason.unified === "string" ? reason.unified : undefined
}

function headerValue(headers: Record<string, unknown>, name: string): string | undefined {
  const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name)
  return typeof entry?.[1] === "string" ? entry[1] : undefined
}

function isPart(value: unknown): value is AiSdkPart {
  return isObject(value) && typeof value.type === "string"
}

function isTextDelta(part: AiSdkPart): part is AiSdkTextDeltaPart {
  return part.type === "text-delta" && typeof (part as Partial<AiSdkTextDeltaPart>).delta === "string"
}

function isTextContent(part: AiSdkPart): part is AiSdkTextContent {
  return part.type === "text" && typeof (part as Partial<AiSdkTextContent>).text === "string"
}
