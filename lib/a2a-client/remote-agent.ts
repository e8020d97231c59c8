import { randomUUID } from "node:crypto"
import { chooseEndpoint, fetchAgentCard, type AgentEndpoint, type Binding, type RemoteCard } from "./card.js"
import { RemoteAgentError, type HttpOptions } from "./http.js"
import { jsonRpcTransport } from "./jsonrpc.js"
import { isSettled, type RemoteMessage, type RemoteTask } from "./remote-task.js"
import { restTransport } from "./rest.js"
import type { AgentTransport } from "./transport.js"

/**
 * A remote A2A agent, reached through its card: `ask` sends a message and follows the Task it starts until
 * it ends or waits for us (input-required, auth-required), polling GetTask; an abort cancels that Task.
 */

export interface RemoteAgentOptions {
  /** The agent's base URL, or its card's URL. */
  url: string
  /** Sent with every call, the card's too (Authorization, an API key). */
  headers?: Record<string, string>
  /** How long one call may take, in ms (default 30000). */
  timeoutMs?: number
  /** How long a Task may run before it is canceled and the call fails, in ms (default 15 minutes). */
  taskTimeoutMs?: number
}

export const DEFAULT_CALL_TIMEOUT_MS = 30_000
export const DEFAULT_TASK_TIMEOUT_MS = 15 * 60_000
/** Polling starts quick (a short Task answers at once) and slows down to this. */
const FIRST_POLL_MS = 50
const MAX_POLL_MS = 1000
/** GetTask failures in a row a long Task survives (a dropped connection, a 5xx, a timeout): more, and the call fails. */
const POLL_FAILURES_TOLERATED = 3

/** A failure the next poll may not meet: no answer at all, or a 5xx. An error the agent answered (a 4xx, a JSON-RPC error) is not. */
const isTransient = (err: unknown) => err instanceof RemoteAgentError && (err.status === undefined || err.status >= 500)

const BINDINGS: readonly Binding[] = ["JSONRPC", "HTTP+JSON", "GRPC"]

export interface RemoteAgent {
  readonly card: RemoteCard
  readonly endpoint: AgentEndpoint
  /** Sends `text` and resolves with the settled Task, or the message the agent answered with. */
  ask(input: { text: string; contextId?: string; taskId?: string }, signal?: AbortSignal): Promise<RemoteTask | RemoteMessage>
  /** Waits for the cancels of abandoned Tasks still under way, then closes the connection. */
  close(): Promise<void>
}

/** Reads the card and picks the interface; throws saying what went wrong and what to do. */
export async function connectRemoteAgent(opts: RemoteAgentOptions, signal?: AbortSignal): Promise<RemoteAgent> {
  const http: HttpOptions = { headers: opts.headers ?? {}, timeoutMs: opts.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS }
  const { card, cardUrl } = await fetchAgentCard(opts.url, http, signal)
  const endpoint = chooseEndpoint(card, cardUrl, BINDINGS)
  const transport = await transportFor(endpoint, http)
  return followingAgent(card, endpoint, transport, opts.taskTimeoutMs ?? DEFAULT_TASK_TIMEOUT_MS)
}

async function transportFor(endpoint: AgentEndpoint, http: HttpOptions): Promise<AgentTransport> {
  if (endpoint.binding === "JSONRPC") return jsonRpcTransport(endpoint, http)
  if (endpoint.binding === "HTTP+JSON") return restTransport(endpoint, http)
  // gRPC's modules (grpc-js, the proto) load only for an agent reached over gRPC.
  const { grpcTransport } = await import("./grpc.js")
  return grpcTransport(endpoint, http)
}

/** Rejects with the signal's reason once it aborts; otherwise settles as `promise` does. */
function unlessAborted<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    if (signal.aborted) return onAbort()
    signal.addEventListener("abort", onAbort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort))
  })
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return unlessAborted(new Promise<void>((resolve) => setTimeout(resolve, ms)), signal)
}

export function followingAgent(card: RemoteCard, endpoint: AgentEndpoint, transport: AgentTransport, taskTimeoutMs: number): RemoteAgent {
  /** Cancels under way (and sends whose Task is to be canceled once it is known): close() waits for them. */
  const cleanups = new Set<Promise<unknown>>()
  const track = <T>(cleanup: Promise<T>): Promise<T> => {
    cleanups.add(cleanup)
    void cleanup.finally(() => cleanups.delete(cleanup))
    return cleanup
  }
  /** Cancels a Task we no longer follow; its own short deadline, not the aborted signal. A failure is the agent's to log. */
  const cancelQuietly = (id: string) =>
    track(
      transport.cancel(id, AbortSignal.timeout(5000)).then(
        () => undefined,
        () => undefined,
      ),
    )
  return {
    card,
    endpoint,
    async ask(input, signal) {
      signal?.throwIfAborted()
      const started = Date.now()
      // The send itself is not aborted: a Task it starts after our abort is canceled once its id is known.
      const sent = transport.send({ messageId: randomUUID(), ...input })
      let task: RemoteTask | RemoteMessage
      try {
        task = await unlessAborted(sent, signal)
      } catch (err) {
        if (signal?.aborted) {
          void track(
            sent.then(
              (late) => (late.kind === "task" && !isSettled(late.state) ? cancelQuietly(late.id) : undefined),
              () => undefined,
            ),
          )
        }
        throw err
      }
      if (task.kind === "message") return task
      let delay = FIRST_POLL_MS
      let failures = 0
      try {
        while (!isSettled(task.state)) {
          if (Date.now() - started > taskTimeoutMs) {
            throw new RemoteAgentError(`the agent's Task ${task.id} was still ${task.state} after ${taskTimeoutMs} ms; it was canceled`)
          }
          await sleep(delay, signal)
          delay = Math.min(delay * 2, MAX_POLL_MS)
          try {
            task = await transport.get(task.id, signal)
            failures = 0
          } catch (err) {
            if (signal?.aborted || !isTransient(err) || ++failures > POLL_FAILURES_TOLERATED) throw err
          }
        }
      } catch (err) {
        await cancelQuietly(task.id)
        throw err
      }
      return task
    },
    async close() {
      await Promise.allSettled([...cleanups])
      transport.close()
    },
  }
}
