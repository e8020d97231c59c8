import { injectTraceHeaders } from "../observe/propagation.js"
import { noteHttpStatus } from "../observe/telemetry.js"
import type { PushClaim } from "../stores/push-store.js"
import { checkWebhookUrl, WebhookRefusedError, type AllowList } from "./guard.js"
import { post, PostTimeoutError, type PostAgents } from "./http-post.js"
import { renderPayload } from "./payload.js"
import { outcomeOfStatus, type AttemptOutcome } from "./retry.js"
import { SIGNATURE_HEADER, type PushSigner } from "./signer.js"

/** Sent on every notification, so a receiver's logs say who posted. */
export const PUSH_USER_AGENT = "toolnexus-push/1"

export interface AttemptOptions {
  allow: AllowList
  timeoutMs: number
  agents: PostAgents
  signer?: PushSigner
  signal: AbortSignal
}

/**
 * One attempt to deliver a claimed notification: the URL checked again (the
 * connection goes to the address checked), the body rendered in the config's
 * version, the headers from the config, one POST. Never rejects: every
 * failure is an outcome, and no outcome carries a credential or the URL's
 * path (a webhook may hide a secret there).
 */
export async function attemptDelivery(claim: PushClaim, opts: AttemptOptions): Promise<AttemptOutcome> {
  const { item, config } = claim
  let checked
  let timer: NodeJS.Timeout | undefined
  try {
    // The lookup is bounded like the POST: a slow resolver must not outlive the claim's lease.
    const tooSlow = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no DNS answer within ${opts.timeoutMs} ms`)), opts.timeoutMs)
      timer.unref()
    })
    checked = await Promise.race([checkWebhookUrl(config.url, opts.allow), tooSlow])
  } catch (err) {
    if (err instanceof WebhookRefusedError) {
      // A name that does not resolve may be a DNS hiccup; an address the guard refuses stays refused.
      if (err.reason === "unresolved") return { kind: "retry", error: err.message }
      return { kind: "final", reason: `the webhook URL is refused: ${err.message}` }
    }
    return { kind: "retry", error: `the webhook URL could not be checked: ${(err as Error).message}` }
  } finally {
    clearTimeout(timer)
  }
  let payload: ReturnType<typeof renderPayload>
  try {
    payload = renderPayload(item.event, config.version)
  } catch (err) {
    // A stored event that cannot be rendered never will be: no retry can help.
    return { kind: "final", reason: `the stored notification cannot be rendered: ${(err as Error).message}` }
  }
  const headers: Record<string, string> = {
    "Content-Type": payload.contentType,
    "User-Agent": PUSH_USER_AGENT,
    "Idempotency-Key": item.key,
  }
  if (config.authentication) {
    const { scheme, credentials } = config.authentication
    headers.Authorization = credentials ? `${scheme} ${credentials}` : scheme
  }
  if (config.token !== undefined) headers["X-A2A-Notification-Token"] = config.token
  if (opts.signer) {
    const jwt = await opts.signer.sign({ url: config.url, key: item.key, taskId: item.taskId, body: payload.body })
    // The config's own credentials keep Authorization; the signature then travels beside them.
    if (config.authentication) headers[SIGNATURE_HEADER] = jwt
    else headers.Authorization = `Bearer ${jwt}`
  }
  // The delivery's span goes on at the receiver.
  injectTraceHeaders(headers)
  try {
    const answer = await post({ url: checked.url, lookup: checked.lookup, headers, body: payload.body, timeoutMs: opts.timeoutMs, agents: opts.agents, signal: opts.signal })
    noteHttpStatus(answer.status)
    return outcomeOfStatus(answer.status, answer.retryAfter, Date.now())
  } catch (err) {
    if (err instanceof PostTimeoutError) return { kind: "retry", error: `timed out: ${err.message}` }
    const code = (err as { code?: unknown }).code
    return { kind: "retry", error: `connection failed: ${typeof code === "string" ? code : (err as Error).message.slice(0, 200)}` }
  }
}
