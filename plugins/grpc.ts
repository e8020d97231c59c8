import type { FastifyInstance, FastifyRequest } from "fastify"
import { Authenticator } from "../lib/a2a/auth.js"
import type { A2AOperations } from "../lib/a2a/operations.js"
import type { A2AGrpcServer, GrpcRequest, GrpcTlsOptions } from "../lib/grpc/server.js"
import { DEFAULT_BODY_LIMIT, DEFAULT_STREAM_HEARTBEAT_MS, type ToolnexusA2AOptions } from "./options.js"

/** The gRPC binding of a registered agent, as the plugin decorates the app with it. */
export interface ToolnexusGrpc {
  /**
   * Serves the agent's A2AService (the spec's gRPC binding, lf.a2a.v1) on an address of its own,
   * over the same tasks, store, auth and limits as the HTTP routes; `tls` serves it over TLS.
   * Call it once the app is ready (after `await app.ready()` or `app.listen()`); again for more
   * addresses. Resolves to the address bound, "host:port" (port 0 picks one): what a gRPC client
   * dials and the card's GRPC interface gives. The app's close() ends it.
   */
  listen(address: string, options?: { tls?: GrpcTlsOptions }): Promise<string>
  /** Every address listen() bound, in order. */
  readonly addresses: readonly string[]
}

declare module "fastify" {
  interface FastifyInstance {
    /** The agent's gRPC binding: `await app.toolnexusGrpc.listen("127.0.0.1:50051")`. */
    toolnexusGrpc: ToolnexusGrpc
  }
}

interface GrpcWiring {
  operations: A2AOperations
  /** Aborts when the plugin's close starts ending streams. */
  closing: AbortSignal
}

/**
 * Decorates the app with `toolnexusGrpc` and closes what it started in onClose (add it after the
 * agent's own onClose: Fastify runs them last first, so gRPC stops before the store closes). The gRPC
 * modules load at the first listen(), so an app that never serves gRPC never loads them.
 * With `opts.auth`, a call's `authorization` / `x-api-key` metadata is checked against the
 * same tokens; `auth.verify` gets a GrpcRequest (`headers`, `ip`, `url`, `method`), not a FastifyRequest.
 */
export function decorateGrpc(fastify: FastifyInstance, opts: ToolnexusA2AOptions, { operations, closing }: GrpcWiring): void {
  const verify = opts.auth?.verify
  // The HTTP routes checked the settings at registration: the same tokens, and the host's verify given the gRPC call.
  const authenticator = opts.auth && new Authenticator<GrpcRequest>({ ...opts.auth, verify: verify && ((request) => verify(request as unknown as FastifyRequest)) })
  let ready = false
  let server: Promise<A2AGrpcServer> | undefined
  const addresses: string[] = []
  const start = async () => {
    const { A2AGrpcServer } = await import("../lib/grpc/server.js")
    return new A2AGrpcServer({
      operations,
      log: fastify.log,
      closing,
      ...(authenticator && { authenticator }),
      maxMessageBytes: opts.bodyLimit ?? DEFAULT_BODY_LIMIT,
      keepaliveMs: opts.streamHeartbeatMs ?? DEFAULT_STREAM_HEARTBEAT_MS,
    })
  }

  const grpc: ToolnexusGrpc = {
    async listen(address, options = {}) {
      if (!ready) throw new Error("toolnexus: app.toolnexusGrpc.listen() serves once the app is ready: call it after await app.ready() or app.listen()")
      server ??= start()
      const bound = await (await server).listen(address, options.tls)
      addresses.push(bound)
      return bound
    },
    addresses,
  }
  fastify.decorate("toolnexusGrpc", grpc)
  fastify.addHook("onReady", async () => {
    ready = true
  })
  fastify.addHook("onClose", async () => {
    // A server that could not be built (a broken install) has nothing to close: listen() reported it.
    const running = await server?.catch(() => undefined)
    await running?.close()
  })
}
