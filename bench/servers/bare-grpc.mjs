// The gRPC rows' ceiling: a bare @grpc/grpc-js server whose A2AService GetTask and SendMessage answer fixed bytes
// (a completed Task as ours answered it, given by the parent), nothing decoded, encoded, stored or checked: what
// grpc-js itself costs per unary call on this machine, as server D is for HTTP.
import * as grpc from "@grpc/grpc-js"
import { reportStartFailure, serveParent } from "../child.mjs"

/** @param {Buffer} bytes */
const raw = (bytes) => bytes
/** @type {Record<string, Buffer>} */
const answers = { GetTask: Buffer.alloc(0), SendMessage: Buffer.alloc(0) }


try {
  /**
   * @param {string} name
   * @returns {grpc.MethodDefinition<Buffer, Buffer>}
   */
  const unary = (name) => ({
    path: `/lf.a2a.v1.A2AService/${name}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  })
  const server = new grpc.Server()
  server.addService({ GetTask: unary("GetTask"), SendMessage: unary("SendMessage") }, {
    /** @type {grpc.handleUnaryCall<Buffer, Buffer>} */
    GetTask: (_call, callback) => callback(null, answers.GetTask),
    /** @type {grpc.handleUnaryCall<Buffer, Buffer>} */
    SendMessage: (_call, callback) => callback(null, answers.SendMessage),
  })
  const port = await new Promise((/** @type {(port: number) => void} */ resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  )
  serveParent(
    {
      // { GetTask, SendMessage }: base64 of the answers to give.
      payload: async (/** @type {Record<string, string | undefined>} */ given) => {
        for (const name of Object.keys(answers)) {
          const text = given[name]
          if (text !== undefined) answers[name] = Buffer.from(text, "base64")
        }
        return {}
      },
    },
    () => new Promise((resolve) => server.tryShutdown(() => resolve())),
  )
  process.send?.({ ready: true, grpc: `127.0.0.1:${port}` })
} catch (err) {
  reportStartFailure(err)
}
