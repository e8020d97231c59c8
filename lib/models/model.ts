import type { JsonObject } from "../types.js"
import type { Toolkit } from "../tools/types.js"

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool"
  content: string
  /** On an assistant message: the tools it asked for. */
  toolCalls?: ToolCall[]
  /** On a tool message: the call it answers. */
  toolCallId?: string
  /** On a tool message: the tool failed (Anthropic tells the model so with `is_error`). */
  isError?: boolean
}

export interface ToolCall {
  id: string
  name: string
  args: JsonObject
}

export interface Usage {
  inputTokens: number
  outputTokens: number
  totalTokens: number
}

/** What the tool-calling loop needs from a model: one turn of the conversation. */
export interface Model {
  readonly name: string
  /** Who serves it, as traces name it: "openai", "anthropic", "local". */
  readonly provider?: string
  turn(request: ModelRequest): Promise<ModelTurn>
}

export interface ModelRequest {
  /** The whole conversation so far, system prompt first. */
  messages: readonly ChatMessage[]
  toolkit?: Toolkit
  signal?: AbortSignal
  /**
   * Asks for the answer as a stream: each piece of its text, in order, as it
   * arrives. Without it, the model is asked for the whole answer at once.
   */
  onText?: (delta: string) => void
}

export interface ModelTurn {
  text: string
  /** Empty when the model is done; `text` is then its answer. */
  toolCalls: ModelToolCall[]
  usage: Usage
  /** The model's `text` is a question for the user: the run ends waiting for an answer. */
  inputRequired?: boolean
}

export interface ModelToolCall extends ToolCall {
  /** Why the call could not be decoded; the loop hands this to the model as an error result instead of running the tool. */
  invalid?: string
}

/** Token counts from whatever a provider reported; a missing count is 0 and a missing total is the sum. */
export function usageFrom(input: unknown, output: unknown, total?: unknown): Usage {
  const inputTokens = count(input)
  const outputTokens = count(output)
  return { inputTokens, outputTokens, totalTokens: total === undefined || total === null ? inputTokens + outputTokens : count(total) }
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0
}
