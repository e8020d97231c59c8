import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { splitHostPort } from "../host-port.js"
import type { A2AMetrics } from "./metrics.js"

/** The path metrics are served at, on the A2A routes' prefix or on an address of their own. */
export const METRICS_PATH = "/metrics"

/** Metrics served on an address of their own: where it is, and how to stop it. */
export interface MetricsListener {
  /** The address bound, "host:port" (an IPv6 host in brackets). */
  address: string
  close(): Promise<void>
}

/**
 * Serves `GET /metrics` (and nothing else) on `address` ("host:port",
 * "[v6]:port", ":port"; port 0 picks one), without authentication: bind it
 * where only the scraper reaches. Rejects naming the address when it cannot listen.
 */
export async function listenForMetrics(metrics: A2AMetrics, address: string): Promise<MetricsListener> {
  const split = splitHostPort(address)
  if (split === undefined) throw new TypeError(`toolnexus: the metrics address ${JSON.stringify(address)} should be "host:port" with a port 0-65535, e.g. "127.0.0.1:9464"`)
  const server = createServer((request, response) => {
    const path = (request.url ?? "").split("?")[0]
    if (path !== METRICS_PATH || (request.method !== "GET" && request.method !== "HEAD")) {
      response.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end(`Not found: metrics are at GET ${METRICS_PATH}\n`)
      return
    }
    metrics.text().then(
      (text) => response.writeHead(200, { "content-type": metrics.contentType }).end(request.method === "HEAD" ? undefined : text),
      (err: unknown) => response.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end(`Metrics could not be collected: ${(err as Error).message}\n`),
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(split.port, split.host, () => {
      server.off("error", reject)
      resolve()
    })
  }).catch((err: unknown) => {
    throw new Error(`toolnexus: metrics could not listen on ${address}: ${(err as Error).message}`, { cause: err })
  })
  const bound = server.address() as AddressInfo
  return { address: `${bound.family === "IPv6" ? `[${bound.address}]` : bound.address}:${bound.port}`, close: () => closeServer(server) }
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve())
    // A scraper's kept-alive connection must not hold the close.
    server.closeIdleConnections()
  })
}
