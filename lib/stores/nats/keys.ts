import { createHash } from "node:crypto"
import { assertTaskId } from "../task-checks.js"

const PLAIN_ID = /^[A-Za-z0-9_-]+$/
const MAX_KEY_LENGTH = 1024
/** A UTF-16 surrogate with no partner: it has no UTF-8 form, so two such ids could share a key. */
const LONE_SURROGATE = /\p{Cs}/u

/**
 * The KV key of a Task id (or lease instance). NATS keys allow only
 * `[-/_=.a-zA-Z0-9]`, and the bucket tells case apart, so:
 *
 * - ids of letters, digits, `-` and `_` are their own key: `abc-123`;
 * - any other id is `=` and the base64url of its UTF-8: `a/b` → `=YS9i`
 *   (no plain id has `=`, and no base64url starts with it);
 * - an id whose key would pass 1024 characters is `==` and its SHA-256 in
 *   hex, and the id stored inside tells it apart. Keys stay well under the
 *   4 KB protocol line the subject must fit in.
 */
export function natsKey(id: string): string {
  assertTaskId(id)
  if (id.length <= MAX_KEY_LENGTH && PLAIN_ID.test(id)) return id
  if (LONE_SURROGATE.test(id)) throw new TypeError("A Task id must be well-formed Unicode (it has a lone surrogate)")
  const encoded = "=" + Buffer.from(id, "utf8").toString("base64url")
  if (encoded.length <= MAX_KEY_LENGTH) return encoded
  return "==" + createHash("sha256").update(id, "utf8").digest("hex")
}

/** The id a key was made from, or `undefined` for hashed keys (read the entry) and foreign keys. */
export function idFromNatsKey(key: string): string | undefined {
  if (key.length <= MAX_KEY_LENGTH && PLAIN_ID.test(key)) return key
  if (!key.startsWith("=") || key.startsWith("==")) return undefined
  const id = Buffer.from(key.slice(1), "base64url").toString("utf8")
  // Buffer decoding forgives; only the one spelling natsKey makes counts.
  return id.length > 0 && natsKey(id) === key ? id : undefined
}
