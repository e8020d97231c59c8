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
    .sort((a, b) => b.length - a.length)
  if (secrets.length === 0) return (text) => text
  return (text) => secrets.reduce((redacted, secret) => redacted.split(secret).join("[redacted]"), text)
}
