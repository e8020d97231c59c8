/**
 * "toolnexus/client": toolkits, builtin tools and the tool-calling client over OpenAI- and Anthropic-style models or any Vercel AI SDK language model; no web server.
 *
 * @module toolnexus/client
 */
export { createToolkit } from "../tools/toolkit.js"
export type { A2AAgentOptions, AnthropicTool, JsonSchema, OpenAITool, Tool, ToolContext, Toolkit, ToolkitOptions, ToolkitServedAgent, ToolkitServeOptions, ToolResult, ToolSource } from "../tools/types.js"
export type { ModelCallObservation, RunObserver, ToolCallObservation } from "../observe/telemetry.js"
export type { McpHttpServerConfig, McpServerConfig, McpServerOptions, McpServers, McpStdioServerConfig } from "../tools/mcp/config.js"
export { readMcpConfig } from "../tools/mcp/config-file.js"
export { createClient, createLocalClient, type Client, type ClientOptions, type LanguageModelClientOptions, type ModelClientOptions, type ModelFunction, type ModelReply, type RunOptions, type RunResult, type TextInfo, type ToolCallRecord } from "./client.js"
export type { ChatMessage, ToolCall, Usage } from "../models/model.js"
export type {
  AiSdkCallOptions,
  AiSdkFunctionTool,
  AiSdkGenerateResult,
  AiSdkLanguageModel,
  AiSdkMessage,
  AiSdkPart,
  AiSdkPartStream,
  AiSdkSpecificationVersion,
  AiSdkStreamResult,
  AiSdkTextPart,
  AiSdkToolCallPart,
  AiSdkToolResultPart,
} from "../models/ai-sdk-types.js"
