import type { ChatMessage } from "./model.js"
import type { JsonObject } from "../types.js"
import { isObject, joinUrl, jsonEventData, postJson, postStreamed, StreamFault, type Endpoint, type EndpointOptions, type StreamReader } from "./http.js"
import { usageFrom, type Model, type ModelToolCall, type ModelTurn, type Usage } from "./model.js"
import { toolCallFrom } from "./tool-arguments.js"

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
    limits: opts.limits,
    expects: "a Messages API response",
  }
  return {
    name: opts.model,
    provider: "anthropic",
    turn({ messages, toolkit, signal, onText }) {
      const { system, turns } = toAnthropicMessages(messages)
      const tools = toolkit?.toAnthropic() ?? []
      const body: JsonObject = { model: opts.model, max_tokens: opts.maxTokens, messages: turns }
      if (system !== undefined) body.system = system
      if (tools.length > 0) body.tools = tools
      if (!onText) return postJson(endpoint, body, signal, readMessage)
      return postStreamed(endpoint, { ...body, stream: true }, body, signal, readMessage, { onText, reader: messageStream })
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

/** A block of a streamed message as it fills: text, a tool call whose input comes as pieces of JSON text, or a kind we skip (thinking). */
type OpenBlock = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; json: string; input: unknown } | { type: "other" }

/**
 * A streamed Messages API answer: message_start (input tokens), then per
 * content block a content_block_start, its deltas (text_delta, input_json_delta)
 * and a content_block_stop; message_delta (output tokens) and message_stop,
 * which ends it. ping and events we do not know are skipped; an error event fails the turn.
 */
function messageStream(): StreamReader<ModelTurn> {
  const blocks = new Map<number, OpenBlock>() // by the index the events name
  let inputTokens: unknown
  let outputTokens: unknown
  return {
    terminal: "message_stop",
    take({ event, data }, emit) {
      if (event === "ping") return undefined
      if (event === "error") throw new StreamFault("it sent an error", data)
      if (event === "message_stop") return finish(blocks, usageFrom(inputTokens, outputTokens))
      const known = ["message_start", "content_block_start", "content_block_delta", "message_delta"]
      if (!known.includes(event)) return undefined // content_block_stop, and events added after this was written
      const payload = jsonEventData(data)
      const index = typeof payload.index === "number" ? payload.index : 0
      if (event === "message_start") {
        const usage = isObject(payload.message) && isObject(payload.message.usage) ? payload.message.usage : {}
        inputTokens = usage.input_tokens
        outputTokens = usage.output_tokens
      } else if (event === "message_delta") {
        // Its counts are totals so far, not increments; it may repeat input_tokens, or leave it out.
        const usage = isObject(payload.usage) ? payload.usage : {}
        if (typeof usage.output_tokens === "number") outputTokens = usage.output_tokens
        if (typeof usage.input_tokens === "number") inputTokens = usage.input_tokens
      } else if (event === "content_block_start") {
        const block = openBlock(payload.content_block)
        blocks.set(index, block)
        if (block.type === "text") emit(block.text)
      } else {
        const block = blocks.get(index)
        const delta = isObject(payload.delta) ? payload.delta : {}
        if (block?.type === "text" && delta.type === "text_delta" && typeof delta.text === "string") {
          block.text += delta.text
          emit(delta.text)
        }
        if (block?.type === "tool_use" && delta.type === "input_json_delta" && typeof delta.partial_json === "string") block.json += delta.partial_json
      }
      return undefined
    },
  }
}

function openBlock(block: unknown): OpenBlock {
  if (!isObject(block)) return { type: "other" }
  if (block.type === "text") return { type: "text", text: typeof block.text === "string" ? block.text : "" }
  if (block.type === "tool_use") return { type: "tool_use", id: String(block.id), name: String(block.name), json: "", input: block.input }
  return { type: "other" }
}

/** The turn the blocks make, in their order: the text blocks joined, each tool call's pieces of JSON read as one. */
function finish(blocks: Map<number, OpenBlock>, usage: Usage): ModelTurn {
  let text = ""
  const toolCalls: ModelToolCall[] = []
  for (const [, block] of [...blocks].sort(([a], [b]) => a - b)) {
    if (block.type === "text") text += block.text
    // Anthropic starts input at {} and sends it all as deltas; a server that sends it whole in the start sends no deltas.
    if (block.type === "tool_use") toolCalls.push(toolCallFrom(block.id, block.name, block.json === "" ? block.input : block.json))
  }
  return { text, toolCalls, usage }
}
