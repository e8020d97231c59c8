import { createPrivateKey } from "node:crypto"
import * as grpc from "@grpc/grpc-js"
import type protobuf from "protobufjs"
import type { Authenticator } from "../a2a/auth.js"
import { A2AError, ErrorCode, grpcStatusName } from "../a2a/errors.js"
import type { A2AOperations, OperationName, OperationResult } from "../a2a/operations.js"
import { OpenStreams } from "../streams/open-streams.js"
import type { StreamItem } from "../streams/task-streams.js"
import { negotiateVersion } from "../a2a/wire.js"
import { errorFields, type Logger } from "../log.js"
import { splitAddress } from "./address.js"
import { fromProtoJson, ProtoJsonError, toProtoJson } from "./convert.js"
import { a2aService } from "./proto.js"
import { grpcErrorStatus, STATUS_DETAILS_KEY } from "./status.js"

/**
 * The gRPC binding: the spec's A2AService (lf.a2a.v1, from a2a.proto) on a
 * @grpc/grpc-js server of its own, over the same A2AOperations as
 * JSON-RPC. Free of any web framework: a host builds it with the operations
 * and listens where it likes. A call's metadata carries what HTTP headers
 * carry elsewhere (`a2a-version`, `authorization` / `x-api-key`,
 * `last-event-id`); streaming methods are server streams; errors are gRPC
 * statuses with a google.rpc.Status in `grpc-status-details-bin`.
 */

/** What a gRPC call shows a host's `auth.verify`: the HTTP/2 request it came as. */
export interface GrpcRequest {
  binding: "grpc"
  /** Always "POST": every gRPC call is one. */
  method: "POST"
  /** The call's path, e.g. `/lf.a2a.v1.A2AService/GetTask`. */
  url: string
  /** The call's text metadata, keys lowercase. */
  headers: Record<string, string>
  /** The peer's address. */
  ip: string
}

/** The certificate and key to serve gRPC over TLS with (the HTTPS server's, as serve() passes them). */
export interface GrpcTlsOptions {
  key: string | Buffer
  cert: string | Buffer
  /** Decrypts an encrypted `key`. */
  passphrase?: string
}

export interface GrpcServerOptions {
  operations: A2AOperations
  /** Gets one line per call (`binding: "grpc"`), and the operations' own. */
  log: Logger
  /** Checks each call's `authorization` / `x-api-key` metadata; a call without a principal ends UNAUTHENTICATED. Omitted: no authentication. */
  authenticator?: Authenticator<GrpcRequest>
  /** Serve over TLS with this key and certificate (listen() may give another per address); omitted, plaintext (h2c). */
  tls?: GrpcTlsOptions
  /** Aborts when the host starts closing: open streams end then, as the HTTP ones do. */
  closing?: AbortSignal
  /** Largest request message in bytes; larger ones end RESOURCE_EXHAUSTED (default 1 MiB, as the JSON-RPC body limit). */
  maxMessageBytes?: number
  /** How often the server pings a connection to find dead peers, which ends their streams (default 15000 ms, as the SSE heartbeat). */
  keepaliveMs?: number
}

const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024
const DEFAULT_KEEPALIVE_MS = 15_000
/** How long close() waits for calls still running before it cuts them. */
const CLOSE_WAIT_MS = 5000

type Call = grpc.ServerUnaryCall<Buffer, Buffer> | grpc.ServerWritableStream<Buffer, Buffer>

/** A failure the call ends with: an A2AError, or a refusal before any operation (unauthenticated, cut off, closing). */
type Failure = A2AError | { code: grpc.status; details: string }

/** A stream ended by the server's close: the peer may subscribe again (on another server, or this one once back). */
const SHUTTING_DOWN: Failure = { code: grpc.status.UNAVAILABLE, details: "The server is shutting down; the task goes on: subscribe again with SubscribeToTask" }

export class A2AGrpcServer {
  private readonly server: grpc.Server
  /** The open streams: the host's closing, or this server's, ends them. */
  private readonly streams: OpenStreams
  private closing: Promise<void> | undefined
  private calls = 0

  constructor(private readonly opts: GrpcServerOptions) {
    this.streams = new OpenStreams(opts.closing)
    this.server = new grpc.Server({
      "grpc.max_receive_message_length": opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
      "grpc.keepalive_time_ms": opts.keepaliveMs ?? DEFAULT_KEEPALIVE_MS,
    })
    const service = a2aService()
    const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {}
    const handlers: grpc.UntypedServiceImplementation = {}
    for (const method of service.methodsArray) {
      method.resolve()
      const name = method.name as OperationName
      definition[name] = {
        path: `/${service.fullName.slice(1)}/${name}`,
        requestStream: false,
        responseStream: method.responseStream === true,
        // Messages pass as bytes: decoding and encoding happen in the handler, where a failure becomes a status.
        requestSerialize: asIs,
        requestDeserialize: asIs,
        responseSerialize: asIs,
        responseDeserialize: asIs,
      }
      const types = { request: method.resolvedRequestType!, response: method.resolvedResponseType! }
      handlers[name] = method.responseStream
        ? (call: grpc.ServerWritableStream<Buffer, Buffer>) => this.guard(name, this.stream(name, types, call), (status) => call.emit("error", status))
        : (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => this.guard(name, this.unary(name, types, call, callback), callback)
    }
    this.server.addService(definition, handlers)
  }

  /**
   * Listens on `address` ("host:port", "[::1]:port"; port 0 picks a free one) and
   * resolves to the address bound, as "host:port": the form a gRPC client dials and
   * the agent card's GRPC interface gives. May be called again for more addresses; `tls`
   * (default: the server's) serves this one over TLS.
   */
  async listen(address: string, tls = this.opts.tls): Promise<string> {
    const { host, port } = splitAddress(address)
    const credentials = tls ? tlsCredentials(tls) : grpc.ServerCredentials.createInsecure()
    const bound = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(`${host}:${port}`, credentials, (err, chosen) => (err ? reject(err) : resolve(chosen)))
    }).catch((err: unknown) => {
      throw new Error(`toolnexus: gRPC could not listen on ${address}: ${(err as Error).message}`, { cause: err })
    })
    return `${host}:${bound}`
  }

  /** Takes no new calls, ends open streams, waits for the calls still running (up to 5 s, then cuts them). Idempotent. */
  close(): Promise<void> {
    return (this.closing ??= new Promise<void>((resolve) => {
      const cut = setTimeout(() => this.server.forceShutdown(), CLOSE_WAIT_MS)
      cut.unref()
      this.server.tryShutdown(() => {
        clearTimeout(cut)
        resolve()
      })
      this.streams.endAll()
    }))
  }

  private async unary(name: OperationName, types: MessageTypes, call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>): Promise<void> {
    const started = performance.now()
    const log = this.callLog()
    const called = await this.run(name, types, call, log)
    if ("failure" in called) {
      callback(this.statusOf(called.failure))
      this.logLine(log, name, called, started)
      return
    }
    const { answer } = called
    let bytes: Buffer
    try {
      bytes = encode(types.response, resultOf(answer))
    } catch (err) {
      const failure = this.unanswerable(err, name, log)
      callback(this.statusOf(failure))
      this.logLine(log, name, { ...called, failure }, started)
      return
    }
    callback(null, bytes)
    this.logLine(log, name, called, started)
  }

  private async stream(name: OperationName, types: MessageTypes, call: grpc.ServerWritableStream<Buffer, Buffer>): Promise<void> {
    const started = performance.now()
    const log = this.callLog()
    // Ended by the peer's cancel, or the host's closing or this server's; a stream opened while the host closes is ended at once.
    const ended = this.streams.add((end) => call.once("cancelled", end))
    // Such a stream is refused before it starts a task.
    const called = ended.signal.aborted ? { failure: this.refused(SHUTTING_DOWN) } : await this.run(name, types, call, log, ended.signal)
    let failure: Failure | undefined
    if ("failure" in called) failure = called.failure
    else {
      const { stream, cutOff } = called.answer as { stream: AsyncIterable<StreamItem>; cutOff?: AbortSignal }
      failure = await this.write(call, stream, types.response, ended.signal, cutOff, name, log)
    }
    ended.end()
    if (failure === undefined) call.end()
    else call.emit("error", this.statusOf(failure))
    this.logLine(log, name, { ...called, failure }, started, true)
  }

  /** Writes the stream's results as they come, waiting while the peer reads slowly; the failure it ended with, if any. */
  private async write(
    call: grpc.ServerWritableStream<Buffer, Buffer>,
    stream: AsyncIterable<StreamItem>,
    type: protobuf.Type,
    ended: AbortSignal,
    cutOff: AbortSignal | undefined,
    name: OperationName,
    log: Logger,
  ): Promise<Failure | undefined> {
    try {
      // A stream ended (peer gone, server closing) or cut off (its reader fell too far behind: its queue was dropped) runs dry by itself.
      for await (const item of stream) {
        if (!call.write(encode(type, item.result))) await drained(call, ended, cutOff)
      }
    } catch (err) {
      return err instanceof A2AError ? err : this.unanswerable(err, name, log)
    }
    if (cutOff?.aborted) {
      log.warn({}, "a2a stream reader fell too far behind; its call was ended")
      return { code: grpc.status.RESOURCE_EXHAUSTED, details: "The stream's reader fell too far behind and the stream was ended; subscribe again with SubscribeToTask" }
    }
    if (ended.aborted && !call.cancelled) return SHUTTING_DOWN
    return undefined
  }

  /** Checks the version and the caller, decodes the request, runs the operation: its answer, or why the call fails. */
  private async run(
    name: OperationName,
    types: MessageTypes,
    call: Call,
    log: Logger,
    ended?: AbortSignal,
  ): Promise<{ answer: OperationResult; taskId?: string } | { failure: Failure; taskId?: string; refused?: boolean }> {
    const metadata = call.metadata
    const first = (key: string) => metadata.get(key).map(String)
    try {
      checkVersion(first("a2a-version"))
    } catch (err) {
      return { failure: this.refused(err as A2AError) }
    }
    const ip = peerAddress(call.getPeer())
    let principal: string | undefined
    if (this.opts.authenticator) {
      const headers = textMetadata(metadata)
      try {
        principal = await this.opts.authenticator.principalOf({ binding: "grpc", method: "POST", url: call.getPath(), headers, ip }, headers)
      } catch (err) {
        log.error(errorFields(err), "opts.auth.verify threw")
      }
      if (principal === undefined) {
        return { failure: this.refused({ code: grpc.status.UNAUTHENTICATED, details: "Unauthorized: send authorization: Bearer <token> or x-api-key: <key> metadata" }), refused: true }
      }
    }
    let params: unknown
    try {
      params = toProtoJson(types.request, types.request.decode(call.request))
    } catch (err) {
      // Named as the operations name fields, so a peer reads one form on every binding.
      if (err instanceof ProtoJsonError) return { failure: this.refused(A2AError.invalidParams(`params.${err.field}`, err.wanted)) }
      return { failure: this.refused(new A2AError(ErrorCode.ParseError, `Parse error: the request is not a valid ${types.request.name} message`)) }
    }
    const lastEventId = first("last-event-id")
    const outcome = await this.opts.operations.run(name, params, {
      binding: "grpc",
      version: "1.0",
      traceHeaders: (key) => first(key),
      log,
      ...(ended && { endSignal: () => ended }),
      principal,
      address: ip,
      ...(lastEventId.length > 0 && { lastEventId }),
    })
    return outcome.error ? { failure: outcome.error, taskId: outcome.taskId } : { answer: outcome.answer!, taskId: outcome.taskId }
  }

  /** A call refused before its operation ran, counted as one (an A2AError by its reason, another failure by its gRPC status's name); returns the failure. */
  private refused(failure: Failure): Failure {
    this.opts.operations.refused("grpc", failure instanceof A2AError ? failure : grpc.status[failure.code])
    return failure
  }

  /** A call's handler, whatever goes wrong in it: logged and answered INTERNAL, never a crash of the process or a call left hanging. */
  private guard(method: string, handling: Promise<void>, end: (status: Partial<grpc.StatusObject>) => void): void {
    handling.catch((err: unknown) => {
      this.opts.log.error({ binding: "grpc", method, ...errorFields(err) }, "grpc call failed")
      end(this.statusOf(new A2AError(ErrorCode.InternalError, `Internal error in ${method}: its log has the details`)))
    })
  }

  /** A failure the peer is told in general terms; the log gets the whole of it. */
  private unanswerable(err: unknown, method: string, log: Logger): A2AError {
    log.error({ method, ...errorFields(err) }, "grpc answer could not be encoded")
    return new A2AError(ErrorCode.InternalError, `Internal error in ${method}: the server could not encode its answer; its log has the details`)
  }

  private statusOf(failure: Failure): Partial<grpc.StatusObject> {
    if (!(failure instanceof A2AError)) return failure
    const status = grpcErrorStatus(failure)
    const trailers = new grpc.Metadata()
    trailers.set(STATUS_DETAILS_KEY, status.statusDetails)
    return { code: status.code, details: status.details, metadata: trailers }
  }

  private callLog(): Logger {
    return this.opts.log.child({ binding: "grpc", reqId: `grpc-${++this.calls}` })
  }

  /** One line per call, with the JSON-RPC route's fields; a refusal before any operation is logged as one. */
  private logLine(log: Logger, method: string, called: { failure?: Failure; taskId?: string; refused?: boolean }, started: number, stream = false): void {
    const { failure } = called
    const status = failure === undefined ? "OK" : failure instanceof A2AError ? grpcStatusName(failure) : grpc.status[failure.code]
    const fields = {
      method,
      taskId: called.taskId,
      version: "1.0",
      outcome: failure instanceof A2AError ? failure.code : failure === undefined ? "ok" : status,
      status,
      durationMs: Math.round(performance.now() - started),
      ...(stream && { stream: true }),
    }
    log.info(fields, called.refused ? "a2a request refused" : "a2a request")
  }
}

interface MessageTypes {
  request: protobuf.Type
  response: protobuf.Type
}

/** gRPC is 1.0 only: the 0.3 gRPC service is another (a2a.v1), so no version means 1.0 here, and 0.3 is refused. */
function checkVersion(values: string[]): void {
  if (values.length === 0) return
  let version: string
  try {
    version = negotiateVersion(values[0])
  } catch {
    // negotiateVersion's own message offers 0.3, which this service refuses.
    throw new A2AError(ErrorCode.VersionNotSupported, `A2A version ${JSON.stringify(values[0].slice(0, 32))} is not supported over gRPC; send a2a-version: 1.0 (or none)`, {
      supportedVersions: "1.0",
    })
  }
  if (version === "0.3") {
    throw new A2AError(ErrorCode.VersionNotSupported, "A2A version 0.3 is not served over gRPC: this service (lf.a2a.v1.A2AService) speaks 1.0; send a2a-version: 1.0", {
      supportedVersions: "1.0",
    })
  }
}

const asIs = (bytes: Buffer) => bytes

/** An operation's result as the message bytes to send. */
function resultOf(answer: OperationResult): unknown {
  if ("resultJson" in answer) return JSON.parse(answer.resultJson)
  return (answer as { result: unknown }).result ?? {} // DeleteTaskPushNotificationConfig's null is an Empty
}

function encode(type: protobuf.Type, json: unknown): Buffer {
  return Buffer.from(type.encode(fromProtoJson(type, json)).finish())
}

/** Resolves when the peer can take more, or when the stream ends or is cut. */
function drained(call: grpc.ServerWritableStream<Buffer, Buffer>, ended: AbortSignal, cutOff: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      call.off("drain", done)
      ended.removeEventListener("abort", done)
      cutOff?.removeEventListener("abort", done)
      resolve()
    }
    call.once("drain", done)
    ended.addEventListener("abort", done, { once: true })
    cutOff?.addEventListener("abort", done, { once: true })
  })
}

/** The metadata a host's verify() reads as headers: text values only (binary `-bin` ones are left out), a repeated key's values joined as HTTP joins them. */
function textMetadata(metadata: grpc.Metadata): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const [key, values] of Object.entries(metadata.toJSON())) {
    if (!key.endsWith("-bin")) headers[key] = values.map(String).join(", ")
  }
  return headers
}

/** The peer's IP from grpc-js's "address:port". */
function peerAddress(peer: string): string {
  return peer.replace(/:\d+$/, "")
}

/** The key (decrypted when it has a passphrase: grpc-js takes plain PEM) and certificate chain, without client certificates. */
function tlsCredentials(tls: GrpcTlsOptions): grpc.ServerCredentials {
  const key = tls.passphrase === undefined ? Buffer.from(tls.key) : Buffer.from(createPrivateKey({ key: tls.key, passphrase: tls.passphrase }).export({ type: "pkcs8", format: "pem" }))
  return grpc.ServerCredentials.createSsl(null, [{ private_key: key, cert_chain: Buffer.from(tls.cert) }], false)
}
