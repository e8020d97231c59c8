// The page's A2A client: the HTTP+JSON (REST) binding of A2A 1.0, on the server that serves the page.
import { readEvents } from "./sse.js"

/** A refusal or failure, with the server's own message when it sent one (google.rpc.Status). */
export class ApiError extends Error {
  /**
   * @param {string} message
   * @param {number} status HTTP status; 0 when the server could not be reached
   * @param {string} [reason] the A2A error's reason (ErrorInfo), e.g. TASK_NOT_FOUND
   */
  constructor(message, status, reason) {
    super(message)
    this.name = "ApiError"
    this.status = status
    this.reason = reason
  }
}

/** The A2A error a google.rpc.Status body holds, or one saying what the body was. */
function errorFrom(status, body, text) {
  const error = body && typeof body === "object" ? body.error : undefined
  if (error && typeof error.message === "string") {
    const info = Array.isArray(error.details) ? error.details.find((detail) => detail && typeof detail.reason === "string") : undefined
    return new ApiError(error.message, status, info?.reason)
  }
  const excerpt = text.trim().slice(0, 200)
  return new ApiError(`The server answered HTTP ${status}${excerpt ? `: ${excerpt}` : " with no body"}`, status)
}

/**
 * Calls one server's A2A routes. `base` is the URL the routes are under (the page lives at
 * `<base>inspector/`); `token()` gives the bearer token to send, or "" for none; `tenant()`
 * the tenant to name, or "" for none (sent in the query or body, so any tenant name works).
 */
export class A2ARest {
  constructor(base, { token, tenant }) {
    this.base = base
    this.token = token
    this.tenant = tenant
  }

  headers(json) {
    const headers = { "A2A-Version": "1.0", Accept: "application/a2a+json, application/json, text/event-stream" }
    if (json) headers["Content-Type"] = "application/a2a+json"
    const token = this.token()
    if (token) headers.Authorization = `Bearer ${token}`
    return headers
  }

  url(path, query = {}) {
    // "./" first: "message:stream" alone would read as a URL of scheme "message".
    const url = new URL(`./${path}`, this.base)
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== "") url.searchParams.set(key, String(value))
    }
    return url
  }

  /** One request; resolves to the parsed JSON answer (null for 204), rejects with an ApiError. */
  async call(method, path, { query, body, signal } = {}) {
    const response = await this.fetch(method, path, { query, body, signal })
    const text = await response.text()
    const parsed = text === "" ? null : parseJson(text)
    if (!response.ok) throw errorFrom(response.status, parsed, text)
    return parsed
  }

  /** The tenant goes in the body of a POST, in the query of a GET (a `/{tenant}/` path would collide with the page's own). */
  async fetch(method, path, { query, body, signal }) {
    const tenant = this.tenant() || undefined
    const payload = body === undefined ? undefined : JSON.stringify({ ...body, tenant })
    try {
      return await fetch(this.url(path, body === undefined ? { ...query, tenant } : {}), { method, headers: this.headers(payload !== undefined), body: payload, signal, cache: "no-store" })
    } catch (err) {
      if (signal?.aborted) throw err
      throw new ApiError(`The server could not be reached (${err.message}): check that it is running and the page's address is right`, 0)
    }
  }

  /** A streaming request: its StreamResponses (`{task}`, `{statusUpdate}`, `{artifactUpdate}`, `{message}`) as they come. */
  async *stream(method, path, { query, body, signal } = {}) {
    const response = await this.fetch(method, path, { query, body, signal })
    const type = response.headers.get("content-type") ?? ""
    if (!response.ok || !type.startsWith("text/event-stream")) {
      const text = await response.text()
      throw errorFrom(response.status, parseJson(text), text)
    }
    for await (const event of readEvents(response.body)) {
      const data = parseJson(event.data)
      if (event.event === "error") throw errorFrom(response.status, data, event.data)
      if (data !== undefined) yield data
    }
  }

  /** ListTasks: `{ tasks, nextPageToken, totalSize }`. */
  listTasks({ status, contextId, pageToken, pageSize, historyLength }, signal) {
    return this.call("GET", "tasks", { query: { status, contextId, pageToken, pageSize, historyLength }, signal })
  }

  getTask(id, signal) {
    return this.call("GET", `tasks/${encodeURIComponent(id)}`, { signal })
  }

  cancelTask(id) {
    return this.call("POST", `tasks/${encodeURIComponent(id)}:cancel`, { body: {} })
  }

  /** SendStreamingMessage: the Task it creates or continues, then its updates until it stops. */
  sendStreaming(message, signal) {
    return this.stream("POST", "message:stream", { body: { message }, signal })
  }

  /** SubscribeToTask: the Task, then its updates until it stops. */
  subscribe(id, signal) {
    return this.stream("GET", `tasks/${encodeURIComponent(id)}:subscribe`, { signal })
  }

  /** The public agent card. */
  card() {
    return this.call("GET", ".well-known/agent-card.json")
  }
}

function parseJson(text) {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
