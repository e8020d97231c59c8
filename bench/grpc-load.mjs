// Load over gRPC, as autocannon gives it over HTTP (load.mjs): unary calls of the A2AService (lf.a2a.v1, the spec's
// a2a.proto), `concurrency` of them kept in flight for `seconds` over `channels` HTTP/2 connections, each answer
// checked to be a completed Task. The messages are encoded and decoded with the official SDK's generated code (the
// same for every server): the request once, before the run, every answer as it comes.
import * as grpc from "@grpc/grpc-js"
import { Role, TaskState } from "@a2a-js/sdk"
import { A2AService } from "@a2a-js/sdk/server/grpc"
import { errorMessage } from "./child.mjs"

/** @typedef {import("@a2a-js/sdk").Task} SdkTask */
/** @typedef {{ path: string, encode: (arg?: string) => Buffer, task: (bytes: Buffer) => SdkTask | undefined }} Method */

const SERVICE_PATH = "/lf.a2a.v1.A2AService"
/** @param {Buffer} bytes */
const raw = (bytes) => bytes

/** The calls the bench makes: the request's encoding, and a check that an answer holds a completed Task. */
/** @type {Record<string, Method>} */
const METHODS = {
  GetTask: {
    path: `${SERVICE_PATH}/GetTask`,
    encode: (id = "") => A2AService.getTask.requestSerialize({ tenant: "", id }),
    task: (bytes) => A2AService.getTask.responseDeserialize(bytes),
  },
  SendMessage: {
    path: `${SERVICE_PATH}/SendMessage`,
    // The JSON-RPC and REST rows' message: messageId "m", a user's "hi", no configuration (1.0: blocking).
    encode: () =>
      A2AService.sendMessage.requestSerialize({
        tenant: "",
        message: {
          messageId: "m",
          contextId: "",
          taskId: "",
          role: Role.ROLE_USER,
          parts: [{ content: { $case: "text", value: "hi" }, metadata: undefined, filename: "", mediaType: "" }],
          metadata: undefined,
          extensions: [],
          referenceTaskIds: [],
        },
        configuration: undefined,
        metadata: undefined,
      }),
    task: (bytes) => {
      const answer = A2AService.sendMessage.responseDeserialize(bytes)
      return answer.payload?.$case === "task" ? answer.payload.value : undefined
    },
  },
}

/** The request metadata every call carries: A2A 1.0, as the HTTP rows' A2A-Version header. */
function a2aMetadata() {
  const metadata = new grpc.Metadata()
  metadata.set("a2a-version", "1.0")
  return metadata
}

/**
 * `count` clients on `address`, each on its own HTTP/2 connection (a local subchannel pool: no sharing between them).
 * @param {string} address
 * @param {number} count
 */
function openClients(address, count) {
  return Array.from({ length: count }, () => new grpc.Client(address, grpc.credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 }))
}

/**
 * @param {grpc.Client} client
 * @param {Method} method
 * @param {Buffer} request
 * @param {grpc.Metadata} metadata
 * @returns {Promise<Buffer>}
 */
function unary(client, method, request, metadata) {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(method.path, raw, raw, request, metadata, (err, bytes) => (err ? reject(err) : bytes === undefined ? reject(new Error(`${method.path}: no answer`)) : resolve(bytes)))
  })
}

/**
 * @param {SdkTask | undefined} task
 * @returns {task is SdkTask}
 */
const completed = (task) => task?.status?.state === TaskState.TASK_STATE_COMPLETED

/**
 * One call's answer as it came, undecoded (the bare gRPC ceiling answers with these bytes).
 * @param {string} address
 * @param {string} name
 * @param {string} [arg]
 */
export async function grpcAnswerBytes(address, name, arg) {
  const method = METHODS[name]
  const [client] = openClients(address, 1)
  try {
    return await unary(client, method, method.encode(arg), a2aMetadata())
  } finally {
    client.close()
  }
}

/**
 * One call, its answer decoded; throws unless it is a completed Task, which it resolves with (the SDK's form).
 * @param {string} address
 * @param {string} name
 * @param {string} [arg]
 * @returns {Promise<SdkTask>}
 */
export async function grpcCall(address, name, arg) {
  const method = METHODS[name]
  const [client] = openClients(address, 1)
  try {
    const task = method.task(await unary(client, method, method.encode(arg), a2aMetadata()))
    if (!completed(task)) throw new Error(`${address}: gRPC ${name} did not answer a completed task: ${JSON.stringify(task)?.slice(0, 300)}`)
    return task
  } finally {
    client.close()
  }
}

/**
 * `concurrency` calls of `name` (GetTask with `arg` as the Task id, SendMessage) in flight for `seconds`: as one
 * answers, the next goes. Resolves with figures shaped as load.mjs's: rps (answers in time over `seconds`), p50 and
 * p99 (ms), requests (every answer, the few after the clock stopped too: the server's CPU is divided by it), bad
 * (answers that were not a completed Task, and failed calls), the first failure's message if any, and the load
 * generator's own CPU per answer.
 * @param {{ address: string, name: string, arg?: string, seconds: number, concurrency?: number, channels?: number }} opts
 */
export async function grpcLoad({ address, name, arg, seconds, concurrency = 32, channels = 4 }) {
  const method = METHODS[name]
  const request = method.encode(arg)
  const metadata = a2aMetadata()
  const clients = openClients(address, Math.max(1, Math.min(channels, concurrency)))
  // Connected before the clock starts, as autocannon's sockets are opened before its first request.
  await Promise.all(clients.map((client) => new Promise((/** @type {(value?: undefined) => void} */ resolve, reject) => client.waitForReady(Date.now() + 10_000, (err) => (err ? reject(err) : resolve())))))
  /** @type {number[]} */
  const latencies = []
  // Every answer cost the server its CPU (withChildCpu divides by `requests`); only those in time count for the rate.
  let requests = 0
  let inTime = 0
  let bad = 0
  /** @type {unknown} */
  let failure
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  const ends = started + seconds * 1000
  /** @param {grpc.Client} client */
  const worker = async (client) => {
    while (performance.now() < ends) {
      const sent = performance.now()
      try {
        const bytes = await unary(client, method, request, metadata.clone())
        if (!completed(method.task(bytes))) bad++
      } catch (err) {
        bad++
        failure ??= err
      }
      const answered = performance.now()
      requests++
      // An answer that came after the clock stopped is left out of the rate and the latencies.
      if (answered > ends) break
      inTime++
      latencies.push(answered - sent)
    }
  }
  try {
    await Promise.all(Array.from({ length: concurrency }, (_, i) => worker(clients[i % clients.length])))
  } finally {
    for (const client of clients) client.close()
  }
  const cpu = process.cpuUsage(cpuBefore)
  latencies.sort((a, b) => a - b)
  /** @param {number} p */
  const at = (p) => (latencies.length === 0 ? NaN : latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)])
  return {
    rps: inTime / seconds,
    p50: at(50),
    p99: at(99),
    requests,
    bad,
    // This process's CPU (the load generator's, process and kernel) per answer.
    clientCpuUsPerRequest: requests > 0 ? (cpu.user + cpu.system) / requests : NaN,
    ...(failure !== undefined && { firstFailure: errorMessage(failure).slice(0, 300) }),
  }
}
