import type { CallToolResult, ContentBlock } from "@modelcontextprotocol/sdk/types.js"

/**
 * An MCP tool's result as the text the model reads: the text blocks joined by newlines, the
 * structured content as JSON when no block is text, images and audio as a short description (the
 * model APIs' tool results carry text only), embedded resources as their text or their URI. A result
 * the server marked `isError` throws its text, so the toolkit answers the model with an error result.
 */
export function resultText(result: CallToolResult | { toolResult: unknown }, tool: string): string {
  // The 2024-10-07 protocol's form, which the SDK still accepts.
  if (!("content" in result)) return typeof result.toolResult === "string" ? result.toolResult : (JSON.stringify(result.toolResult) ?? "")
  const blocks = result.content ?? []
  const parts = blocks.map(describe)
  if (result.structuredContent !== undefined && !blocks.some((block) => block.type === "text")) {
    parts.unshift(JSON.stringify(result.structuredContent))
  }
  const text = parts.join("\n")
  if (result.isError === true) throw new Error(text || `the tool ${tool} reported an error without saying what`)
  return text
}

function describe(block: ContentBlock): string {
  switch (block.type) {
    case "text":
      return block.text
    case "image":
    case "audio":
      return `[${block.type}: ${block.mimeType}, ${base64Bytes(block.data)} bytes, not shown]`
    case "resource":
      return "text" in block.resource ? block.resource.text : `[resource ${block.resource.uri}${block.resource.mimeType ? `: ${block.resource.mimeType}` : ""}, ${base64Bytes(block.resource.blob)} bytes, not shown]`
    case "resource_link":
      return `[resource link ${block.uri}${block.description ? `: ${block.description}` : ""}]`
    default:
      return `[${String((block as { type: unknown }).type)} content, not shown]`
  }
}

/** The size of the bytes a base64 text encodes. */
function base64Bytes(data: string): number {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding)
}
