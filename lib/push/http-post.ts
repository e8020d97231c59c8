import http from "node:http"
import https from "node:https"
import type { LookupFunction } from "node:net"

/** What a POST got back: the status, and the Retry-After header if any. The body is read and dropped. */
export interface PostAnswer {
  status: number
  retryAfter?: string
}

/** A POST that did not get an answer in time. */
export class PostTimeoutError extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`)
    this.name = "PostTimeoutError"
  }
}

/**
 * Keep-alive connections for notifications, one pool per scheme, so a busy
 * webhook is not paid a new connection (and TLS handshake) per request. A
 * pooled connection went to an address the guard checked when it was made.
 */
export class PostAgents {
  readonly http: http.Agent
  readonly https: https.Agent

  constructor(maxSocketsPerOrigin: number) {
    const options = { keepAlive: true, maxSockets: maxSocketsPerOrigin, maxFreeSockets: maxSocketsPerOrigin, scheduling: "lifo" as const }
    this.http = new http.Agent(options)
    this.https = new https.Agent(options)
  }

  /** Closes every pooled connection; a request still under way is ended by its own abort. */
  destroy(): void {
    this.http.destroy()
    this.https.destroy()
  }
}

export interface PostRequest {
  url: URL
  /** Connects to the addresses the guard checked, never a fresh DNS answer. */
  lookup: LookupFunction
  headers: Record<string, string>
  body: string
  timeoutMs: number
  agents: PostAgents
  /** Ends the request early (the sender stopping). */
  signal: AbortSignal
}

/**
 * One POST with node's http(s), which never follows a redirect: resolves
 * with the answer once its body has been read (so the connection can be
 * reused), rejects on a connection error, the timeout or the abort.
 */
export function post(request: PostRequest): Promise<PostAnswer> {
  const { url, lookup, headers, body, timeoutMs, agents, signal } = request
  return new Promise<PostAnswer>((resolve, reject) => {
    const secure = url.protocol === "https:"
    const req = (secure ? https : http).request(url, {
      method: "POST",
      headers: { ...headers, "Content-Length": String(Buffer.byteLength(body)) },
      lookup,
      agent: secure ? agents.https : agents.http,
      signal,
    })
    const timer = setTimeout(() => req.destroy(new PostTimeoutError(timeoutMs)), timeoutMs)
    timer.unref()
    const fail = (err: Error) => {
      clearTimeout(timer)
      reject(err)
    }
    req.on("error", fail)
    req.on("response", (res) => {
      const retryAfter = res.headers["retry-after"]
      res.on("error", fail)
      res.on("end", () => {
        clearTimeout(timer)
        resolve({ status: res.statusCode ?? 0, ...(retryAfter !== undefined ? { retryAfter } : {}) })
      })
      res.resume()
    })
    req.end(body)
  })
}
