import type { ChatMessage } from "./model.js"
import type { JsonObject } from "../types.js"
import { isObject, joinUrl, postJson, type Endpoint, type EndpointOptions } from "./http.js"
import { usageFrom, type Model, type ModelToolCall, type ModelTurn } from "./model.js"

interface AnthropicOptions extends EndpointOptions {
  /** Anthropic requires a cap on the answer's length. */
  maxTokens: number
}

/** A model behind Anthropic's `POST /v1/messages`. */
export function anthropicModel(opts: AnthropicOptions): Model {
  const endpoint: Endpoint = {
    provider: "anthropic",
    url: messagesUrl(opts.baseUrl),
    headers: {
      "content-type": "application/json",
      "anthropic-version": "2023-06-01",
      ...(opts.apiKey !== undefined && { "x-api-key": opts.apiKey }),
      ...opts.headers,
    },
    timeoutMs: opts.timeoutMs,
    retry: opts.retry,
    expects: "a Messages API response",
  }
  return {
    name: opts.model,
    turn({ messages, toolkit, signal }) {
      const { system, turns } = toAnthropicMessages(messages)
      const tools = toolkit?.toAnthropic() ?? []
      const body: JsonObject = { model: opts.model, max_tokens: opts.maxTokens, messages: turns }
      if (system !== undefined) body.system = system
      if (tools.length > 0) body.tools = tools
      return postJson(endpoint, body, signal, readMessage)
    },
  }
}

/** Both "https://api.anthropic.com" and "https://api.anthropic.com/v1" are common spellings of the base URL. */
function messagesUrl(baseUrl: string): string {
  const base = joinUrl(baseUrl, "")
  return base.endsWith("/v1") ? `${base}/messages` : `${base}/v1/messages`
}

/**
 * Anthropic takes the system prompt apart from the turns, tool calls as
 * content blocks, and the results of one assistant turn in a single user turn.
 */
function toAnthropicMessages(messages: readonly ChatMessage[]): { system?: string; turns: JsonObject[] } {
  const system: string[] = []
  const turns: JsonObject[] = []
  let results: JsonObject[] | undefined // the tool_result blocks of the user turn being filled
  for (const { role, content, toolCalls, toolCallId, isError } of messages) {
    if (role === "tool") {
      const block = { type: "tool_result", tool_use_id: toolCallId, content, is_error: isError === true }
      if (!results) {
        results = []
        turns.push({ role: "user", content: results })
      }
      results.push(block)
      continue
    }
    results = undefined
    if (role === "system") system.push(content)
    else if (role === "assistant" && toolCalls && toolCalls.length > 0) {
      const text = content === "" ? [] : [{ type: "text", text: content }] // empty text blocks are rejected
      const uses = toolCalls.map((call) => ({ type: "tool_use", id: call.id, name: call.name, input: call.args }))
      turns.push({ role, content: [...text, ...uses] })
    } else turns.push({ role, content })
  }
  return { system: system.length > 0 ? system.join("\n\n") : undefined, turns }
}

function readMessage(answer: unknown): ModelTurn | undefined {
  if (!isObject(answer) || !Array.isArray(answer.content)) return undefined
  let text = ""
  const toolCalls: ModelToolCall[] = []
  for (const block of answer.content as unknown[]) {
    if (!isObject(block)) continue
    if (block.type === "text" && typeof block.text === "string") text += block.text
    if (block.type === "tool_use") {
      toolCalls.push({
        id: String(block.id),
        name: String(block.name),
        args: isObject(block.input) ? block.input : {},
      })
    }
  }
  const usage = isObject(answer.usage) ? answer.usage : {}
  return { text, toolCalls, usage: usageFrom(usage.input_tokens, usage.output_tokens) }
}
