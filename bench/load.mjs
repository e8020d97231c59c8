// Load from autocannon on loopback, and the request bodies every server gets alike (A2A 1.0, PascalCase methods).
import autocannon from "autocannon"

export const A2A_HEADERS = { "content-type": "application/json", "a2a-version": "1.0" }

export const sendMessageBody = () =>
  JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }] } } })

/** @param {string} id */
export const getTaskBody = (id) => JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id } })

/** The HTTP+JSON (REST) SendMessage body: the JSON-RPC params alone, for `POST /message:send`. */
export const restSendMessageBody = () => JSON.stringify({ message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }] } })

/**
 * The parts of a JSON-RPC answer the bench reads (a Task in 1.0 form, or an error).
 * @typedef {{ result?: { task?: WireTask } & Partial<WireTask>, error?: { code: number, message: string } }} JsonRpcAnswer
 * @typedef {{ id: string, contextId?: string, status?: { state?: string } }} WireTask
 */

/**
 * One JSON-RPC call, parsed; throws on an HTTP error.
 * @param {string} url
 * @param {string} body
 * @returns {Promise<JsonRpcAnswer>}
 */
export async function call(url, body) {
  const res = await fetch(url + "/", { method: "POST", headers: A2A_HEADERS, body })
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`)
  return res.json()
}

/**
 * A blocking SendMessage whose answer must be a completed Task; resolves with that Task (1.0 form).
 * @param {string} url
 * @returns {Promise<WireTask>}
 */
export async function sendAndComplete(url) {
  const answer = await call(url, sendMessageBody())
  const task = answer.result?.task
  if (task?.status?.state !== "TASK_STATE_COMPLETED") throw new Error(`${url}: SendMessage did not answer a completed task: ${JSON.stringify(answer).slice(0, 300)}`)
  return task
}

/**
 * A blocking SendMessage over HTTP+JSON (`POST <base>/message:send`) whose answer must be a completed Task; resolves with it.
 * @param {string} base
 * @returns {Promise<WireTask>}
 */
export async function restSendAndComplete(base) {
  const res = await fetch(`${base.replace(/\/$/, "")}/message:send`, { method: "POST", headers: A2A_HEADERS, body: restSendMessageBody() })
  const text = await res.text()
  /** @type {WireTask | undefined} */
  let task
  try {
    task = JSON.parse(text).task
  } catch {
    // Not JSON: the message below says what came.
  }
  if (!res.ok || task?.status?.state !== "TASK_STATE_COMPLETED") throw new Error(`${base}: POST /message:send answered HTTP ${res.status}: ${text.slice(0, 300)}`)
  return task
}

/**
 * One load run's numbers: rate, latency in ms, answers seen, bad answers, the load generator's CPU per answer.
 * @typedef {{ rps: number, p50: number, p99: number, requests: number, bad: number, clientCpuUsPerRequest: number }} LoadResult
 */

/**
 * Runs autocannon against `url` and returns its numbers. Every answer is checked to be
 * HTTP 200 holding a completed Task, so a server answering JSON-RPC errors fast cannot win.
 * `bodies` (optional) are cycled through, one per request. `method` and `path` default to
 * JSON-RPC's POST / (the HTTP+JSON rows give theirs: a GET goes without a body or content-type).
 * @param {{ url: string, body?: string, bodies?: string[], seconds: number, connections?: number, pipelining?: number, method?: string, path?: string }} opts
 * @returns {Promise<LoadResult>}
 */
export async function load({ url, body, bodies, seconds, connections = 32, pipelining = 1, method = "POST", path = "/" }) {
  let wrong = 0
  let next = 0
  /** @type {import("autocannon").Request} */
  const request = {
    method,
    path,
    headers: method === "GET" ? { "a2a-version": A2A_HEADERS["a2a-version"] } : A2A_HEADERS,
    ...(method !== "GET" && { body: body ?? bodies?.[0] }),
    onResponse: (status, text) => {
      if (status !== 200 || !text.includes("TASK_STATE_COMPLETED")) wrong++
    },
    ...(bodies && { setupRequest: (req) => ({ ...req, body: bodies[next++ % bodies.length] }) }),
  }
  const cpuBefore = process.cpuUsage()
  const result = await autocannon({ url, connections, pipelining, duration: seconds, requests: [request] })
  const cpu = process.cpuUsage(cpuBefore)
  const seen = result.requests.total
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: seen,
    // Answers that were not a completed Task, connection errors and timeouts.
    bad: wrong + result.errors + result.timeouts,
    // This process's CPU (autocannon's, process and kernel) per answer: what the load generator costs.
    clientCpuUsPerRequest: seen > 0 ? (cpu.user + cpu.system) / seen : NaN,
  }
}
