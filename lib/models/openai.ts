import type { ChatMessage } from "./model.js"
import type { JsonObject } from "../types.js"
import { isObject, joinUrl, jsonEventData, postJson, postStreamed, StreamFault, type Endpoint, type EndpointOptions, type StreamReader } from "./http.js"
import { usageFrom, type Model, type ModelToolCall, type ModelTurn, type Usage } from "./model.js"
import { toolCallFrom } from "./tool-arguments.js"

/** A model behind an OpenAI-style `POST /chat/completions` (OpenAI, vLLM, Ollama, LM Studio, ...). */
export function openAIModel(opts: EndpointOptions): Model {
  const endpoint: Endpoint = {
    provider: "openai",
    url: joinUrl(opts.baseUrl, "/chat/completions"),
    headers: {
      "content-type": "application/json",
      ...(opts.apiKey !== undefined && { authorization: `Bearer ${opts.apiKey}` }),
      ...opts.headers,
    },
    timeoutMs: opts.timeoutMs,
    retry: opts.retry,
    limits: opts.limits,
    expects: "a chat completion",
  }
  return {
    name: opts.model,
    provider: "openai",
    turn({ messages, toolkit, signal, onText }) {
      const tools = toolkit?.toOpenAI() ?? []
      const body: JsonObject = { model: opts.model, messages: messages.map(toOpenAIMessage) }
      if (tools.length > 0) body.tools = tools
      if (!onText) return postJson(endpoint, body, signal, readCompletion)
      // Without include_usage a stream reports no token counts at all.
      const streamBody = { ...body, stream: true, stream_options: { include_usage: true } }
      return postStreamed(endpoint, streamBody, body, signal, readCompletion, { onText, reader: completionStream })
    },
  }
}

function toOpenAIMessage(message: ChatMessage): JsonObject {
  const { role, content, toolCalls, toolCallId } = message
  if (role === "tool") return { role, tool_call_id: toolCallId, content }
  if (role === "assistant" && toolCalls && toolCalls.length > 0) {
    return {
      role,
      content: content === "" ? null : content,
      tool_calls: toolCalls.map((call) => ({
        id: call.id,
        type: "function",
        function: { name: call.name, arguments: JSON.stringify(call.args) },
      })),
    }
  }
  return { role, content }
}

/** Only `choices[0].message` is required; `content` is null when the model calls tools. */
function readCompletion(answer: unknown): ModelTurn | undefined {
  if (!isObject(answer) || !Array.isArray(answer.choices)) return undefined
  const choice: unknown = answer.choices[0]
  const message = isObject(choice) ? choice.message : undefined
  if (!isObject(message)) return undefined
  const calls: unknown[] = Array.isArray(message.tool_calls) ? message.tool_calls : []
  return { text: typeof message.content === "string" ? message.content : "", toolCalls: calls.map(readToolCall), usage: readUsage(answer.usage) }
}

function readUsage(usage: unknown): Usage {
  const counts = isObject(usage) ? usage : {}
  return usageFrom(counts.prompt_tokens, counts.completion_tokens, counts.total_tokens)
}

function readToolCall(call: unknown, index: number): ModelToolCall {
  const fn = isObject(call) && isObject(call.function) ? call.function : {}
  const id = isObject(call) && typeof call.id === "string" ? call.id : `call_${index}`
  return toolCallFrom(id, typeof fn.name === "string" ? fn.name : "", fn.arguments)
}

/**
 * A streamed chat completion: `choices[0].delta` carries pieces of the text
 * and of the tool calls, each call's pieces tagged with its `index` (its id
 * and name come once, its arguments in many pieces); the usage comes in a last
 * chunk with no choices, and `data: [DONE]` ends the stream.
 */
function completionStream(): StreamReader<ModelTurn> {
  let text = ""
  let usage = usageFrom(0, 0)
  let last: number | undefined // the index of the call the latest piece belonged to
  const calls = new Map<number, { id?: string; name: string; arguments: string }>() // by the index the deltas name
  return {
    terminal: "[DONE]",
    take({ data }, emit) {
      if (data.trim() === "[DONE]") {
        const byIndex = [...calls].sort(([a], [b]) => a - b)
        const toolCalls = byIndex.map(([index, { id, name, arguments: args }]) => readToolCall({ id, function: { name, arguments: args } }, index))
        return { text, toolCalls, usage }
      }
      const chunk = parseChunk(data)
      if (isObject(chunk.usage)) usage = readUsage(chunk.usage)
      const choice: unknown = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined
      const delta = isObject(choice) && isObject(choice.delta) ? choice.delta : {}
      if (typeof delta.content === "string" && delta.content !== "") {
        text += delta.content
        emit(delta.content)
      }
      const pieces: unknown[] = Array.isArray(delta.tool_calls) ? delta.tool_calls : []
      for (const piece of pieces) {
        if (!isObject(piece)) continue
        const index = pieceIndex(piece, calls, last)
        const call = calls.get(index) ?? { name: "", arguments: "" }
        calls.set(index, call)
        last = index
        if (typeof piece.id === "string" && piece.id !== "") call.id = piece.id
        const fn = isObject(piece.function) ? piece.function : {}
        if (typeof fn.name === "string") call.name += fn.name
        if (typeof fn.arguments === "string") call.arguments += fn.arguments
      }
      return undefined
    },
  }
}

/** The call a piece belongs to. A server that leaves out `index` sends one call at a time: a piece with a new id starts the next one. */
function pieceIndex(piece: JsonObject, calls: Map<number, { id?: string }>, last: number | undefined): number {
  if (typeof piece.index === "number") return piece.index
  if (last === undefined) return 0
  const startsAnother = typeof piece.id === "string" && piece.id !== "" && piece.id !== calls.get(last)?.id
  return startsAnother ? last + 1 : last
}

function parseChunk(data: string): JsonObject {
  const chunk = jsonEventData(data)
  // OpenAI and compatible servers report a failure after the 200 as a chunk of its own.
  if (chunk.error !== undefined && chunk.error !== null) throw new StreamFault("it sent an error", data)
  return chunk
}
