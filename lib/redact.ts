/**
 * Keeping our credentials out of what an endpoint answers. A model, an MCP
 * server or another A2A agent may echo the headers it received into an
 * error or an answer; before such text is logged, saved in a Task or shown
 * to the model, every credential we sent it is blanked out.
 */

/** Header names that carry a credential: Authorization, x-api-key, a token or secret of any name. */
const CREDENTIAL_HEADER = /auth|key|token|secret/i

/**
 * A function that replaces each credential of `headers` in a text with
 * "[redacted]": the whole value, and the bare token of "Bearer <key>".
 * Longer secrets are replaced first, so one that holds another goes whole.
 */
export function credentialRedactor(headers: Readonly<Record<string, string>>): (text: string) => string {
  const secrets = Object.entries(headers)
    .filter(([name]) => CREDENTIAL_HEADER.test(name))
    .flatMap(([, value]) => [value, value.trim().split(/\s+/).at(-1) ?? ""])
    .filter((secret) => secret.length > 0)
  if (secrets.length === 0) return (text) => text
  return blankOut(secrets)
}

/** Replaces each of `secrets` in a text with "[redacted]", the longer first, so one that holds another goes whole. */
function blankOut(secrets: string[]): (text: string) => string {
  const longestFirst = [...secrets].sort((a, b) => b.length - a.length)
  return (text) => longestFirst.reduce((redacted, secret) => redacted.split(secret).join("[redacted]"), text)
}

/** Environment variable names that say they hold a credential. */
const CREDENTIAL_VARIABLE = /auth|key|token|secret|passw|credential/i
/** A value shorter than this is not taken for a credential (it would blank out common words). */
const MIN_SECRET_LENGTH = 8

/**
 * Blanks out of an error of code we did not write (an agent of the host's
 * own) what looks like a credential: the value of every environment
 * variable whose name says it holds one, a URL's password, a Bearer token.
 * The same care as a model's error gets, without knowing the headers sent.
 */
export function redactCredentials(text: string, env: NodeJS.ProcessEnv = process.env): string {
  const secrets = Object.entries(env)
    .filter(([name, value]) => value !== undefined && value.length >= MIN_SECRET_LENGTH && CREDENTIAL_VARIABLE.test(name))
    .map(([, value]) => value!)
  return blankOut(secrets)(text)
    .replace(/(\/\/[^/\s:@]*):[^/\s@]+@/g, "$1:[redacted]@")
    .replace(/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi, "$1 [redacted]")
}
