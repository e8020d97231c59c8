import { unlessAborted } from "../abort.js"
import type { Tool, Toolkit, ToolResult } from "../tools/types.js"
import type { JsonObject } from "../types.js"
import { aiSdkModel } from "../models/ai-sdk.js"
import type { AiSdkLanguageModel } from "../models/ai-sdk-types.js"
import { anthropicModel } from "../models/anthropic.js"
import { DEFAULT_RETRY, DEFAULT_TURN_LIMITS, type RetryPolicy } from "../models/http.js"
import { openAIModel } from "../models/openai.js"
import { hasCredentials, isHttpUrl, withoutPassword } from "../url-credentials.js"
import { usageFrom, type ChatMessage, type Model, type ModelToolCall, type ModelTurn, type ToolCall, type Usage } from "../models/model.js"
import { tracesOnly, type RunObserver } from "../observe/telemetry.js"

export interface ToolCallRecord extends ToolCall {
  result: ToolResult
}

export interface RunOptions {
  /** The tools the model may call; without one, every call gets an error result. */
  toolkit?: Toolkit
  /** Aborts the request in flight and stops the loop. */
  signal?: AbortSignal
  /** Earlier turns, placed before the prompt; a previous `RunResult.messages` fits as is. */
  history?: ChatMessage[]
  /**
   * Every piece of text of every model turn, as it arrives, with the turn's
   * number from 1: a new number means a new turn began (text said before a tool
   * call belongs to an earlier turn; `RunResult.text` is the last turn's only).
   * Given, HTTP models are asked to stream. A model that answers whole (an
   * endpoint that does not stream, a local function returning a string) gives
   * its text here once, after the fact, with `whole: true`. What the listener throws is ignored.
   */
  onText?: (delta: string, info: TextInfo) => void
  /**
   * Hears each model call and tool call (a server passes its own, so its
   * metrics count them). Omitted: they are traced through the OpenTelemetry
   * API only, spans an application's registered SDK receives.
   */
  observer?: RunObserver
}

/** Where a piece of text given to `RunOptions.onText` stands. */
export interface TextInfo {
  /** The model turn it belongs to, from 1. */
  turn: number
  /** The turn's whole text, from a model that did not stream it: it comes once the turn is over. */
  whole?: true
}

export interface RunResult {
  /** The model's final answer. */
  text: string
  /** The conversation: history, prompt, then every assistant and tool message; without the system prompt. */
  messages: ChatMessage[]
  toolCalls: ToolCallRecord[]
  /** How many times the model was called. */
  turns: number
  /** Summed over all turns. */
  usage: Usage
  model: string
  /** The answer is a question for the user (an A2A task goes to input-required). */
  inputRequired?: boolean
}

export interface Client {
  readonly model: string
  run(prompt: string, opts?: RunOptions): Promise<RunResult>
}

/** What every model client takes: the loop's settings, retries and limits. */
export interface ModelClientOptions {
  /** Sent with every request (an AI SDK provider adds them to its own); credentials among them are redacted from errors. */
  headers?: Record<string, string>
  systemPrompt?: string
  /** Model calls per run before giving up; default 10. */
  maxTurns?: number
  /**
   * How long a model request may wait, in ms; default 60000. For a whole
   * answer, that is the wait for all of it. For a streamed one (run with
   * `onText`), it is an idle timeout: the wait for its first byte and for each
   * next chunk, not a cap on the length of a long answer. A request that
   * times out is not retried.
   */
  timeoutMs?: number
  /**
   * Retries of a model request that failed with 408, 409, 429 or 5xx, or
   * could not connect; default 3, 0 turns retrying off. Waits back off
   * exponentially with jitter, or as long as a `Retry-After` header asks.
   */
  maxRetries?: number
  /** No retry starts later than this many ms after a turn's first request; default 30000. */
  retryDeadlineMs?: number
  /** The first retry's backoff in ms, doubling each retry up to 16 times this; default 250. */
  retryBaseDelayMs?: number
  /**
   * The most bytes of one model answer read, streamed or whole; default 64 MiB. Past it the turn
   * fails saying so: a broken or hostile endpoint cannot fill the server's memory.
   */
  maxResponseBytes?: number
  /**
   * The longest one model turn may take in all, in ms, retries and every chunk of a stream included;
   * default 10 minutes. `timeoutMs` bounds each wait; this bounds a stream that never ends.
   */
  turnTimeoutMs?: number
}

/** A model behind an OpenAI- or Anthropic-style HTTP API, reached by toolnexus's own clients. */
export interface ClientOptions extends ModelClientOptions {
  /** Such as https://api.openai.com/v1 or https://api.anthropic.com */
  baseUrl: string
  style: "openai" | "anthropic"
  model: string
  apiKey?: string
  /** Anthropic's max_tokens; default 4096. */
  maxTokens?: number
  /** The longest line of a streamed answer, in characters (and the most data of one event); default 8 MiB. */
  maxLineLength?: number
  /** Only in LanguageModelClientOptions. */
  languageModel?: never
}

/**
 * A Vercel AI SDK language model in the built-in loop, in place of
 * `baseUrl`/`style`/`model`: any provider of ai 6 (`@ai-sdk/*` 3.x) or ai 7
 * (4.x), such as `createOpenAI({ baseURL, apiKey }).chat("gpt-4o-mini")`,
 * `google("gemini-2.5-flash")` or a model from `ai/test`. The provider holds
 * the key and the URL; `maxResponseBytes` counts the text and tool input the
 * model hands over, since the provider reads the HTTP answer itself.
 */
export interface LanguageModelClientOptions extends ModelClientOptions {
  /** The model, as an `@ai-sdk/*` provider makes it; its `modelId` names the client's model. */
  languageModel: AiSdkLanguageModel
  /** The model's `maxOutputTokens`; default: the provider's. */
  maxTokens?: number
  baseUrl?: never
  style?: never
  model?: never
  /** The provider holds the key: `createOpenAI({ apiKey })`. */
  apiKey?: never
  /** The provider reads the stream itself. */
  maxLineLength?: never
}

/** What a model function answers: its final text, or tools to call first. */
export type ModelReply =
  | string
  | {
      text?: string
      toolCalls?: Array<{ id?: string; name: string; args?: JsonObject }>
      usage?: Partial<Usage>
      /** `text` is a question for the user; an A2A task waits in input-required for the answer. */
      inputRequired?: boolean
    }

/**
 * Plays the model in-process: for tests, benchmarks and offline agents. It
 * may stream its answer as an async iterable of text chunks: each goes to
 * `RunOptions.onText` as it comes, and the answer is their concatenation (no tool calls).
 */
export type ModelFunction = (request: {
  messages: ChatMessage[]
  tools: readonly Tool[]
  signal?: AbortSignal
}) => ModelReply | AsyncIterable<string> | Promise<ModelReply | AsyncIterable<string>>

interface LoopSettings {
  systemPrompt?: string
  maxTurns: number
}

/**
 * A client running the tool-calling loop against a model behind an OpenAI- or
 * Anthropic-style HTTP API (`baseUrl`, `style`, `model`), or against a Vercel
 * AI SDK language model (`languageModel`).
 */
export function createClient(opts: ClientOptions): Client
export function createClient(opts: LanguageModelClientOptions): Client
export function createClient(opts: ClientOptions | LanguageModelClientOptions): Client {
  if (typeof opts === "object" && opts !== null && opts.languageModel !== undefined) return languageModelClient(opts)
  checkClientOptions(opts)
  const turn = turnSettings(opts)
  const endpoint = {
    baseUrl: opts.baseUrl,
    model: opts.model,
    apiKey: opts.apiKey,
    headers: opts.headers,
    ...turn,
    limits: { ...turn.limits, maxLineLength: opts.maxLineLength ?? DEFAULT_TURN_LIMITS.maxLineLength },
  }
  const model = opts.style === "openai" ? openAIModel(endpoint) : anthropicModel({ ...endpoint, maxTokens: opts.maxTokens ?? 4096 })
  return loopClient(model, opts)
}

function languageModelClient(opts: LanguageModelClientOptions): Client {
  checkLanguageModelOptions(opts)
  const model = aiSdkModel(opts.languageModel, { headers: opts.headers, maxOutputTokens: opts.maxTokens, ...turnSettings(opts) })
  return loopClient(model, opts)
}

/** What every model adapter reads of the options, defaults filled in: each wait, the retries, and one turn's bounds. */
function turnSettings(opts: ModelClientOptions): { timeoutMs: number; retry: RetryPolicy; limits: { maxResponseBytes: number; turnTimeoutMs: number } } {
  return {
    timeoutMs: opts.timeoutMs ?? 60_000,
    retry: {
      maxRetries: opts.maxRetries ?? DEFAULT_RETRY.maxRetries,
      deadlineMs: opts.retryDeadlineMs ?? DEFAULT_RETRY.deadlineMs,
      baseDelayMs: opts.retryBaseDelayMs ?? DEFAULT_RETRY.baseDelayMs,
    },
    limits: {
      maxResponseBytes: opts.maxResponseBytes ?? DEFAULT_TURN_LIMITS.maxResponseBytes,
      turnTimeoutMs: opts.turnTimeoutMs ?? DEFAULT_TURN_LIMITS.turnTimeoutMs,
    },
  }
}

/** A client whose model is `respond`, called once per turn. */
export function createLocalClient(respond: ModelFunction, opts: { model?: string; systemPrompt?: string; maxTurns?: number } = {}): Client {
  if (typeof respond !== "function") throw new TypeError("createLocalClient: respond should be a function that plays the model")
  if (opts.model !== undefined && (typeof opts.model !== "string" || opts.model === "")) {
    throw new TypeError("createLocalClient: opts.model should be a non-empty string")
  }
  checkOptionalString("createLocalClient", "systemPrompt", opts.systemPrompt)
  checkOptionalPositiveInteger("createLocalClient", "maxTurns", opts.maxTurns)
  return loopClient(localModel(respond, opts.model ?? "local"), opts)
}

/** The loop over `model`, with the options' system prompt and turn limit (default 10). */
function loopClient(model: Model, given: { systemPrompt?: string; maxTurns?: number }): Client {
  const settings: LoopSettings = { systemPrompt: given.systemPrompt, maxTurns: given.maxTurns ?? 10 }
  return {
    model: model.name,
    run: (prompt, opts = {}) => runLoop(model, settings, prompt, opts),
  }
}

/** The one tool-calling loop: ask the model, run the tools it asks for, repeat until it answers. */
async function runLoop(model: Model, settings: LoopSettings, prompt: string, opts: RunOptions): Promise<RunResult> {
  if (typeof prompt !== "string") throw new TypeError("run: prompt should be a string")
  if (opts.history !== undefined && !Array.isArray(opts.history)) throw new TypeError("run: opts.history should be an array of ChatMessage")
  if (opts.onText !== undefined && typeof opts.onText !== "function") throw new TypeError("run: opts.onText should be a function")
  const { toolkit, signal, onText } = opts
  const observer = opts.observer ?? tracesOnly
  const system: ChatMessage[] = settings.systemPrompt ? [{ role: "system", content: settings.systemPrompt }] : []
  const messages: ChatMessage[] = [...(opts.history ?? []), { role: "user", content: prompt }]
  const toolCalls: ToolCallRecord[] = []
  let usage: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 }

  for (let turn = 1; turn <= settings.maxTurns; turn++) {
    signal?.throwIfAborted()
    let streamed = false
    const modelCall = observer.modelCall(model.name, model.provider)
    const hear = onText
      ? (delta: string) => {
          if (!streamed) modelCall.firstToken()
          streamed = true
          tell(onText, delta, turn)
        }
      : undefined
    let reply: ModelTurn
    try {
      reply = await modelCall.within(() => unlessAborted(model.turn({ messages: [...system, ...messages], toolkit, signal, ...(hear && { onText: hear }) }), signal))
    } catch (err) {
      modelCall.end(undefined, err)
      throw err
    }
    modelCall.end(reply.usage)
    // A model that answered whole still shows its answer through onText, once.
    if (onText && !streamed && reply.text !== "") tell(onText, reply.text, turn, true)
    usage = addUsage(usage, reply.usage)
    const calls = reply.toolCalls.map(({ id, name, args }) => ({ id, name, args }))
    messages.push({ role: "assistant", content: reply.text, ...(calls.length > 0 && { toolCalls: calls }) })
    if (calls.length === 0) {
      return { text: reply.text, messages, toolCalls, turns: turn, usage, model: model.name, ...(reply.inputRequired && { inputRequired: true }) }
    }

    for (const call of reply.toolCalls) {
      signal?.throwIfAborted()
      const result = await observedTool(observer, call, toolkit, () => unlessAborted(runTool(call, toolkit, signal), signal))
      toolCalls.push({ id: call.id, name: call.name, args: call.args, result })
      messages.push({ role: "tool", content: result.output, toolCallId: call.id, isError: result.isError })
    }
  }
  throw new Error(`The model kept calling tools after ${settings.maxTurns} turns without giving an answer; raise maxTurns or make the prompt more specific`)
}

/**
 * Hands a piece of text to the caller's listener. What it throws (or an async
 * listener rejects with) is ignored: a slow or broken listener is the caller's
 * problem, not the model's, and must not fail a run whose model answered.
 */
function tell(listener: NonNullable<RunOptions["onText"]>, delta: string, turn: number, whole?: true): void {
  try {
    const returned: unknown = listener(delta, whole ? { turn, whole } : { turn })
    if (returned instanceof Promise) returned.catch(() => {})
  } catch {
    // ignored, as said above
  }
}

/** Runs a tool call, observed: its span, and its count by tool and outcome. */
async function observedTool(observer: RunObserver, call: ModelToolCall, toolkit: Toolkit | undefined, run: () => Promise<ToolResult>): Promise<ToolResult> {
  const observed = observer.toolCall(call.name, call.id, toolkit?.get(call.name) !== undefined)
  try {
    const result = await observed.within(run)
    observed.end(result.isError === true)
    return result
  } catch (err) {
    observed.end(true, err)
    throw err
  }
}

async function runTool(call: ModelToolCall, toolkit: Toolkit | undefined, signal: AbortSignal | undefined): Promise<ToolResult> {
  if (call.invalid !== undefined) return { output: call.invalid, isError: true }
  if (!toolkit) return { output: `There is no toolkit, so ${call.name} cannot run; answer without tools`, isError: true }
  return toolkit.execute(call.name, call.args, { signal })
}


function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    totalTokens: a.totalTokens + b.totalTokens,
  }
}

function localModel(respond: ModelFunction, name: string): Model {
  let nextCallId = 1 // ids the function leaves out must still pair each tool message with its call
  return {
    name,
    provider: "local",
    async turn({ messages, toolkit, signal, onText }): Promise<ModelTurn> {
      const reply = await respond({ messages: [...messages], tools: toolkit?.tools() ?? [], signal })
      if (typeof reply === "string") return { text: reply, toolCalls: [], usage: usageFrom(0, 0) }
      if (typeof reply !== "object" || reply === null) {
        throw new TypeError(`The local model function should return a string, { text, toolCalls, usage } or an async iterable of text chunks, got ${reply === null ? "null" : typeof reply}`)
      }
      if (Symbol.asyncIterator in reply) return { text: await readChunks(reply, onText, signal), toolCalls: [], usage: usageFrom(0, 0) }
      const toolCalls = (reply.toolCalls ?? []).map((call) => ({
        id: call.id ?? `local_call_${nextCallId++}`,
        name: call.name,
        args: call.args ?? {},
      }))
      const usage = usageFrom(reply.usage?.inputTokens, reply.usage?.outputTokens, reply.usage?.totalTokens)
      return { text: reply.text ?? "", toolCalls, usage, inputRequired: reply.inputRequired === true }
    },
  }
}

/** The text of a model function's chunks, each handed to `onText` as it comes; an abort stops the reading. */
async function readChunks(chunks: AsyncIterable<string>, onText: ((delta: string) => void) | undefined, signal: AbortSignal | undefined): Promise<string> {
  let text = ""
  for await (const chunk of chunks) {
    signal?.throwIfAborted()
    if (typeof chunk !== "string") throw new TypeError(`The local model function's chunks should be strings, got ${chunk === null ? "null" : typeof chunk}`)
    text += chunk
    if (chunk !== "") onText?.(chunk)
  }
  return text
}

function checkClientOptions(opts: ClientOptions): void {
  if (typeof opts !== "object" || opts === null) throw new TypeError("createClient: opts should be an object with baseUrl, style and model, or with languageModel")
  if (!isHttpUrl(opts.baseUrl)) {
    throw new TypeError(`createClient: opts.baseUrl should be an http(s) URL such as https://api.openai.com/v1, got ${JSON.stringify(typeof opts.baseUrl === "string" ? withoutPassword(opts.baseUrl) : opts.baseUrl)}`)
  }
  // fetch refuses such URLs with a message that quotes the password, which would reach peers and logs.
  if (hasCredentials(opts.baseUrl)) {
    throw new TypeError("createClient: opts.baseUrl should not carry a user or password (user:pass@host): pass the key as opts.apiKey (TOOLNEXUS_API_KEY for the CLI) or in opts.headers")
  }
  if (opts.style !== "openai" && opts.style !== "anthropic") {
    throw new TypeError(`createClient: opts.style should be "openai" or "anthropic", got ${JSON.stringify(opts.style)}`)
  }
  if (typeof opts.model !== "string" || opts.model.trim() === "") {
    throw new TypeError(`createClient: opts.model should be a non-empty string naming the model, such as "gpt-4o-mini"`)
  }
  // Never echo the key itself, not even a wrong one.
  if (opts.apiKey !== undefined && (typeof opts.apiKey !== "string" || opts.apiKey === "")) {
    throw new TypeError("createClient: opts.apiKey should be a non-empty string when given; leave it out for endpoints without keys")
  }
  checkModelClientOptions(opts)
  checkOptionalPositiveInteger("createClient", "maxLineLength", opts.maxLineLength)
}

/** The options both kinds of client take. */
function checkModelClientOptions(opts: ModelClientOptions & { maxTokens?: number }): void {
  if (opts.headers !== undefined && !isStringRecord(opts.headers)) {
    throw new TypeError("createClient: opts.headers should be an object of string header values")
  }
  checkOptionalString("createClient", "systemPrompt", opts.systemPrompt)
  checkOptionalPositiveInteger("createClient", "maxTurns", opts.maxTurns)
  checkOptionalPositiveInteger("createClient", "timeoutMs", opts.timeoutMs)
  checkOptionalPositiveInteger("createClient", "maxTokens", opts.maxTokens)
  checkOptionalNonNegativeInteger("createClient", "maxRetries", opts.maxRetries)
  checkOptionalNonNegativeInteger("createClient", "retryDeadlineMs", opts.retryDeadlineMs)
  checkOptionalNonNegativeInteger("createClient", "retryBaseDelayMs", opts.retryBaseDelayMs)
  checkOptionalPositiveInteger("createClient", "maxResponseBytes", opts.maxResponseBytes)
  checkOptionalPositiveInteger("createClient", "turnTimeoutMs", opts.turnTimeoutMs)
}

/** The HTTP endpoint's options, which a languageModel replaces (its provider holds the URL, the key and the stream). */
const ENDPOINT_OPTIONS = ["baseUrl", "style", "model", "apiKey", "maxLineLength"] as const

/** What the AI SDK's language model specification versions came with, for the error that refuses one. */
const OLDER_SPECIFICATIONS: Readonly<Record<string, string>> = { v1: "ai 4, @ai-sdk/* 1.x", v2: "ai 5, @ai-sdk/* 2.x" }

function checkLanguageModelOptions(opts: LanguageModelClientOptions): void {
  const endpoint = ENDPOINT_OPTIONS.filter((name) => (opts as unknown as Record<string, unknown>)[name] !== undefined)
  if (endpoint.length > 0) {
    const names = endpoint.map((name) => `opts.${name}`).join(", ")
    throw new TypeError(
      `createClient: give either opts.languageModel or opts.baseUrl/style/model, not both: ${names} ${endpoint.length > 1 ? "were" : "was"} given with opts.languageModel (the AI SDK provider holds the URL and the key: createOpenAI({ baseURL, apiKey }))`,
    )
  }
  const model: unknown = opts.languageModel
  if (typeof model !== "object" || model === null) {
    throw new TypeError(`createClient: opts.languageModel should be an AI SDK language model, such as createOpenAI({ apiKey }).chat("gpt-4o-mini"), got ${model === null ? "null" : typeof model}`)
  }
  const { specificationVersion, provider, modelId, doStream, doGenerate } = model as Record<string, unknown>
  if (specificationVersion !== "v3" && specificationVersion !== "v4") {
    const older = typeof specificationVersion === "string" ? OLDER_SPECIFICATIONS[specificationVersion] : undefined
    throw new TypeError(
      `createClient: opts.languageModel has specificationVersion ${JSON.stringify(specificationVersion)}${older ? ` (${older})` : ""}; toolnexus speaks "v3" (ai 6, @ai-sdk/* 3.x) and "v4" (ai 7, @ai-sdk/* 4.x): upgrade the provider package`,
    )
  }
  if (typeof provider !== "string" || provider === "" || typeof modelId !== "string" || modelId === "") {
    throw new TypeError("createClient: opts.languageModel should have a non-empty provider and modelId, as every AI SDK language model has")
  }
  if (typeof doStream !== "function" || typeof doGenerate !== "function") {
    throw new TypeError("createClient: opts.languageModel should have doStream and doGenerate methods, as every AI SDK language model has")
  }
  checkModelClientOptions(opts)
}

function checkOptionalString(fn: string, name: string, value: unknown): void {
  if (value !== undefined && typeof value !== "string") throw new TypeError(`${fn}: opts.${name} should be a string`)
}

function checkOptionalPositiveInteger(fn: string, name: string, value: unknown): void {
  if (value !== undefined && !(Number.isInteger(value) && (value as number) > 0)) {
    throw new TypeError(`${fn}: opts.${name} should be a positive integer, got ${JSON.stringify(value)}`)
  }
}

function checkOptionalNonNegativeInteger(fn: string, name: string, value: unknown): void {
  if (value !== undefined && !(Number.isInteger(value) && (value as number) >= 0)) {
    throw new TypeError(`${fn}: opts.${name} should be a non-negative integer, got ${JSON.stringify(value)}`)
  }
}

function isStringRecord(value: unknown): value is Record<string, string> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.values(value).every((v) => typeof v === "string")
}
