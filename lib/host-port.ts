/**
 * A listen address, "host:port", "[v6]:port" or ":port", as serve() and the
 * gRPC listener read it: the host (127.0.0.1 when left out; an IPv6 one
 * without its brackets, and `bracketed` saying it had them) and the port,
 * 0-65535. Undefined when it is not one: each caller words its own refusal.
 */
export function splitHostPort(address: unknown): { host: string; bracketed: boolean; port: number } | undefined {
  const match = typeof address === "string" ? /^(?:\[([0-9a-fA-F:.%a-zA-Z]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(address.trim()) : null
  const port = match ? Number(match[3]) : NaN
  if (!match || port > 65535) return undefined
  return match[1] !== undefined ? { host: match[1], bracketed: true, port } : { host: match[2] || "127.0.0.1", bracketed: false, port }
}
