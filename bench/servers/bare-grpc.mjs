// The gRPC rows' ceiling: a bare @grpc/grpc-js server whose A2AService GetTask and SendMessage answer fixed bytes
// (a completed Task as ours answered it, given by the parent), nothing decoded, encoded, stored or checked: what
// grpc-js itself costs per unary call on this machine, as server D is for HTTP.
import * as grpc from "@grpc/grpc-js"
import { reportStartFailure, serveParent } from "../child.mjs"

const raw = (bytes) => bytes
const answers = { GetTask: Buffer.alloc(0), SendMessage: Buffer.alloc(0) }

try {
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
    GetTask: (_call, callback) => callback(null, answers.GetTask),
    SendMessage: (_call, callback) => callback(null, answers.SendMessage),
  })
  const port = await new Promise((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  )
  serveParent(
    {
      // { GetTask, SendMessage }: base64 of the answers to give.
      payload: async (given) => {
        for (const name of Object.keys(answers)) if (given[name] !== undefined) answers[name] = Buffer.from(given[name], "base64")
        return {}
      },
    },
    () => new Promise((resolve) => server.tryShutdown(() => resolve())),
  )
  process.send({ ready: true, grpc: `127.0.0.1:${port}` })
} catch (err) {
  reportStartFailure(err)
}
