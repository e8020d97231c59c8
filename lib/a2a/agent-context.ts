import { randomUUID } from "node:crypto"
import type { A2AArtifact, A2AMessage, A2APart } from "../types.js"
import type { AgentArtifact, AgentArtifactInput, AgentContext, AgentOutcome } from "./agent.js"

/** What a run of an agent does to its Task, as the runner carries it out: the context below is the agent's view of it. */
export interface RunChannel {
  /** A chunk of the answer; `anew` drops what was streamed before. */
  text(delta: string, anew: boolean): void
  /** A new artifact (checked, with its id). */
  addArtifact(artifact: A2AArtifact, lastChunk: boolean): void
  /** More parts (checked) for an artifact added before. */
  appendArtifact(artifactId: string, parts: A2APart[], lastChunk: boolean): void
  /** A working status with this message; never rejects. */
  status(text: string): Promise<void>
}

/** The Task as its agent is shown it. */
export interface AgentInput {
  taskId: string
  contextId: string
  message: A2AMessage
  history: A2AMessage[]
  signal: AbortSignal
}

/** The context an agent is called with: `input`, and its calls checked, then carried out by `channel`. */
export function agentContext(input: AgentInput, channel: RunChannel): AgentContext {
  return {
    ...input,
    text(delta, opts) {
      if (typeof delta !== "string") throw new TypeError(`ctx.text(delta) takes a string, got ${typeof delta}`)
      channel.text(delta, opts?.anew === true)
    },
    artifact(given) {
      const artifact = checkArtifact(given)
      const lastChunk = given.lastChunk !== false
      channel.addArtifact(artifact, lastChunk)
      return openArtifact(artifact.artifactId!, lastChunk, channel)
    },
    status(text) {
      if (typeof text !== "string" || text === "") throw new TypeError("ctx.status(text) takes the text of a status message, a non-empty string")
      return channel.status(text)
    },
  }
}

function openArtifact(artifactId: string, closed: boolean, channel: RunChannel): AgentArtifact {
  return {
    artifactId,
    append(parts, opts) {
      if (closed) throw new TypeError(`artifact ${artifactId} is complete (its last chunk was sent): add a new artifact, or pass lastChunk: false to ctx.artifact() to stream into it`)
      checkParts(parts, "append(parts)")
      closed = opts?.lastChunk === true
      channel.appendArtifact(artifactId, parts, closed)
    },
  }
}

/** The artifact as the Task keeps it; throws a TypeError naming what is wrong. */
function checkArtifact(given: AgentArtifactInput): A2AArtifact {
  if (typeof given !== "object" || given === null) throw new TypeError("ctx.artifact() takes { name?, description?, parts, metadata?, lastChunk? }")
  checkParts(given.parts, "ctx.artifact({ parts })")
  for (const key of ["name", "description"] as const) {
    if (given[key] !== undefined && typeof given[key] !== "string") throw new TypeError(`ctx.artifact({ ${key} }) should be a string`)
  }
  if (given.metadata !== undefined && !isPlainObject(given.metadata)) throw new TypeError("ctx.artifact({ metadata }) should be a JSON object")
  return {
    artifactId: randomUUID(),
    ...(given.name !== undefined && { name: given.name }),
    ...(given.description !== undefined && { description: given.description }),
    parts: [...given.parts],
    ...(given.metadata !== undefined && { metadata: given.metadata }),
  }
}

/** Throws a TypeError unless `parts` is a non-empty array of text, file or data parts as Tasks store them. */
function checkParts(parts: unknown, where: string): asserts parts is A2APart[] {
  if (!Array.isArray(parts) || parts.length === 0) throw new TypeError(`${where} should be a non-empty array of parts`)
  parts.forEach((part: unknown, i) => {
    const problem = partProblem(part)
    if (problem) throw new TypeError(`${where}[${i}] ${problem}`)
  })
}

function partProblem(part: unknown): string | undefined {
  if (!isPlainObject(part)) return "should be a part: { kind: \"text\", text }, { kind: \"file\", file: { bytes | uri } } or { kind: \"data\", data }"
  if (part.metadata !== undefined && !isPlainObject(part.metadata)) return "metadata should be a JSON object"
  switch (part.kind) {
    case "text":
      return typeof part.text === "string" ? undefined : "text should be a string"
    case "data":
      return isPlainObject(part.data) ? undefined : "data should be a JSON object"
    case "file": {
      const file = part.file
      if (!isPlainObject(file)) return "file should be { name?, mimeType?, bytes (base64) | uri }"
      if ((typeof file.bytes === "string") === (typeof file.uri === "string")) return "file should have either bytes (base64) or uri, a string"
      for (const key of ["name", "mimeType"]) if (file[key] !== undefined && typeof file[key] !== "string") return `file.${key} should be a string`
      return undefined
    }
    default:
      return `kind should be "text", "file" or "data", got ${JSON.stringify(part.kind)}`
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value)
}

/** An outcome read: the answer's rest (undefined: none), or the question for input-required. Throws a TypeError for anything else. */
export function readOutcome(outcome: AgentOutcome): { answer?: string; question?: string } {
  if (outcome === undefined) return {}
  if (typeof outcome === "string") return { answer: outcome }
  if (isPlainObject(outcome) && typeof outcome.inputRequired === "string") return { question: outcome.inputRequired }
  throw new TypeError(
    `the agent returned ${outcome === null ? "null" : typeof outcome === "object" ? JSON.stringify(outcome).slice(0, 100) : typeof outcome}: return nothing or a string to complete the Task, or { inputRequired: "a question" } to ask the peer`,
  )
}
