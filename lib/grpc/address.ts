/**
 * The gRPC listen address, read once for the server, serve() and the CLI: in a file of its own, so
 * checking an address loads no gRPC module.
 */

/** "host:port", "[v6]:port" or ":port" (host 127.0.0.1), as serve() reads its address; a TypeError naming it otherwise. */
export function splitAddress(address: string): { host: string; port: number } {
  const match = typeof address === "string" ? /^(?:(\[[0-9a-fA-F:.%a-zA-Z]+\])|([^:[\]]*)):(\d{1,5})$/.exec(address.trim()) : null
  const port = match ? Number(match[3]) : NaN
  if (!match || port > 65535) throw new TypeError(`toolnexus: the gRPC address ${JSON.stringify(address)} should be "host:port" with a port 0-65535, e.g. "127.0.0.1:50051" or "[::1]:0"`)
  return { host: match[1] ?? (match[2] || "127.0.0.1"), port }
}
