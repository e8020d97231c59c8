import type { Server } from "node:http"
import type { Socket } from "node:net"
import type { FastifyInstance } from "fastify"

/**
 * Ends, once the app starts closing (after the agent's own preClose: Tasks finished, streams ended), the HTTP/1
 * connections with no request under way, those that never sent one included. Node's close ends only connections
 * that finished a request: one a client opened ahead and left unused (undici does, after a fetch is aborted)
 * kept the close waiting until the client dropped it, 4 s later by undici's keep-alive timeout.
 */
export function endUnusedConnectionsOnClose(app: FastifyInstance): void {
  const inFlight = new Map<Socket, number>()
  const server: Server = app.server
  server.on("connection", (socket: Socket) => {
    inFlight.set(socket, 0)
    socket.once("close", () => inFlight.delete(socket))
  })
  server.on("request", (request, response) => {
    const socket = request.socket
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1)
    response.once("close", () => {
      if (inFlight.has(socket)) inFlight.set(socket, inFlight.get(socket)! - 1)
    })
  })
  app.addHook("preClose", (done) => {
    for (const [socket, requests] of inFlight) if (requests === 0) socket.destroy()
    done()
  })
}
