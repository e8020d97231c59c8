/**
 * The gRPC listen address, read once for the server, serve() and the CLI: in a file of its own, so
 * checking an address loads no gRPC module.
 */

import { splitHostPort } from "../host-port.js"

/** "host:port", "[v6]:port" or ":port" (host 127.0.0.1), as serve() reads its address, an IPv6 host kept in brackets as gRPC dials it; a TypeError naming it otherwise. */
export function splitAddress(address: string): { host: string; port: number } {
  const split = splitHostPort(address)
  if (split === undefined) throw new TypeError(`toolnexus: the gRPC address ${JSON.stringify(address)} should be "host:port" with a port 0-65535, e.g. "127.0.0.1:50051" or "[::1]:0"`)
  return { host: split.bracketed ? `[${split.host}]` : split.host, port: split.port }
}
