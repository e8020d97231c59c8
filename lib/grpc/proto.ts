import fs from "node:fs"
import { fileURLToPath } from "node:url"
import protobuf from "protobufjs"

/**
 * The spec's a2a.proto, loaded once: its A2AService and message types.
 * The file ships verbatim in the package's proto/ folder; its google/api
 * imports (HTTP paths, field behaviour, client hints) are skipped, as the
 * gRPC wire never carries them: their options stay unresolved text.
 */

/** The package and service the official clients dial: `/lf.a2a.v1.A2AService/<Method>`. */
export const A2A_PACKAGE = "lf.a2a.v1"
export const A2A_SERVICE = `${A2A_PACKAGE}.A2AService`

/** proto/a2a.proto from this module: two folders up in the sources, three in dist/. */
const PROTO_FILE = ["../../proto/a2a.proto", "../../../proto/a2a.proto"].map((rel) => fileURLToPath(new URL(rel, import.meta.url))).find((file) => fs.existsSync(file))

function loadRoot(): protobuf.Root {
  if (PROTO_FILE === undefined) throw new Error("toolnexus: proto/a2a.proto is missing from the package; reinstall toolnexus")
  const root = new protobuf.Root()
  const resolve = root.resolvePath.bind(root)
  // null skips the file: protobufjs ships the google/protobuf ones, and the google/api ones only annotate.
  root.resolvePath = (origin, target) => (target.startsWith("google/api/") ? null : resolve(origin, target))
  // Proto field names as written (snake_case): convert.ts derives each JSON name as protoc does.
  root.loadSync(PROTO_FILE, { keepCase: true })
  root.resolveAll()
  return root
}

let loaded: protobuf.Root | undefined

/** The loaded proto: read at the first use, so an app that never starts gRPC never parses it. */
export function a2aProto(): protobuf.Root {
  return (loaded ??= loadRoot())
}

/** The A2AService's methods, by name. */
export function a2aService(): protobuf.Service {
  return a2aProto().lookupService(A2A_SERVICE)
}

/** A message type of the proto by its name in the package (`Task`) or its full name (`google.protobuf.Struct`). */
export function messageType(name: string): protobuf.Type {
  return a2aProto().lookupType(name.includes(".") ? name : `${A2A_PACKAGE}.${name}`)
}
