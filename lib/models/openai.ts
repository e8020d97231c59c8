import type { ChatMessage } from "./model.js"
import type { JsonObject } from "../types.js"
import { isObject, joinUrl, postJson, snippet, type Endpoint, type EndpointOptions } from "./http.js"
import { usageFrom, type Model, type ModelToolCall, type ModelTurn } from "./model.js"

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
    expects: "a chat completion",
  }
  return {
    name: opts.model,
    turn({ messages, toolkit, signal }) {
      const tools = toolkit?.toOpenAI() ?? []
      const body: JsonObject = { model: opts.model, messages: messages.map(toOpenAIMessage) }
      if (tools.length > 0) body.tools = tools
      return postJson(endpoint, body, signal, readCompletion)
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
  const usage = isObject(answer.usage) ? answer.usage : {}
  return {
    text: typeof message.content === "string" ? message.content : "",
    toolCalls: calls.map(readToolCall),
    usage: usageFrom(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens),
  }
}

function readToolCall(call: unknown, index: number): ModelToolCall {
  const fn = isObject(call) && isObject(call.function) ? call.function : {}
  const id = isObject(call) && typeof call.id === "string" ? call.id : `call_${index}`
  const name = typeof fn.name === "string" ? fn.name : ""
  const decoded = decodeArguments(fn.arguments, name)
  return decoded.invalid === undefined ? { id, name, args: decoded.args } : { id, name, args: {}, invalid: decoded.invalid }
}

/** OpenAI sends arguments as a JSON string, and models sometimes get it wrong. */
function decodeArguments(raw: unknown, name: string): { args: JsonObject; invalid?: string } {
  if (raw === undefined || raw === null || raw === "") return { args: {} }
  if (isObject(raw)) return { args: raw } // some compatible servers send the object itself
  const text = typeof raw === "string" ? raw : JSON.stringify(raw)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return { args: {}, invalid: `The arguments were not valid JSON (${snippet(text, 100)}); call ${name} again with a JSON object` }
  }
  if (isObject(parsed)) return { args: parsed }
  return { args: {}, invalid: `The arguments were not a JSON object (${snippet(text, 100)}); call ${name} again with a JSON object` }
}
