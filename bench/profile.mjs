// Reads a .cpuprofile (V8's call tree of nodes, plus samples and their time deltas) and says where the busy time went.
import fs from "node:fs"
import path from "node:path"

/** @typedef {{ functionName: string, url?: string, lineNumber: number }} CallFrame a frame as V8 writes it */
/** @typedef {{ id: number, callFrame: CallFrame, children?: number[] }} ProfileNode */
/** @typedef {{ nodes: ProfileNode[], startTime: number, endTime: number, samples: number[], timeDeltas: number[] }} CpuProfile */
/** @typedef {(frame: CallFrame, file: string) => boolean} FrameMatch */
/** @typedef {{ name: string, match: FrameMatch }} HotSpotGroup */

const SPECIAL = new Set(["(idle)", "(program)", "(garbage collector)", "(root)"])

/** @param {string} url */
function fileOf(url) {
  return url.startsWith("file://") ? decodeURIComponent(new URL(url).pathname) : url
}

/**
 * Where a frame's code lives: our compiled code, a package, Node itself, or V8's own work.
 * @param {CallFrame} frame
 * @param {string} root
 */
function categoryOf({ functionName, url }, root) {
  if (SPECIAL.has(functionName)) return functionName
  if (!url) return "V8 builtins and native code (JSON, structuredClone, writev...)"
  const file = fileOf(url)
  if (file.startsWith("node:")) return "node core (http, net, streams, events, abort_controller)"
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)
  if (pkg) return pkg[1]
  if (file.startsWith(root)) return "toolnexus " + path.relative(root, file).replace(/^dist\//, "").replace(/\.js$/, ".ts")
  return file
}

/**
 * "functionName file:line" with our files shown as their .ts source path.
 * @param {CallFrame} frame
 * @param {string} root
 */
export function frameName({ functionName, url, lineNumber }, root) {
  if (!url) return functionName || "(anonymous)"
  const file = fileOf(url)
  const shown = file.includes("/node_modules/") ? file.replace(/^.*node_modules\//, "") : file.startsWith(root) ? path.relative(root, file).replace(/^dist\//, "").replace(/\.js$/, ".ts") : file
  // Line numbers are of the compiled .js file.
  return `${functionName || "(anonymous)"} (${shown}, js line ${lineNumber + 1})`
}

/**
 * Percentages of the busy time (all but idle) in the samples taken at or after `sinceUs`
 * (the profile's own monotonic clock, the one process.hrtime reads): self time per function and
 * per category, and for each group the time of samples with any frame of that group on the stack.
 * `groups` is [{ name, match(callFrame, fileName) }].
 * @param {string} file
 * @param {{ root: string, sinceUs?: number, groups?: HotSpotGroup[] }} opts
 */
export function analyzeProfile(file, { root, sinceUs, groups = [] }) {
  /** @type {CpuProfile} */
  const profile = JSON.parse(fs.readFileSync(file, "utf8"))
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  /** @param {number} id */
  const nodeOf = (id) => {
    const node = byId.get(id)
    if (node === undefined) throw new Error(`${file}: no node ${id}`)
    return node
  }
  /** @type {Map<number, number>} */
  const parent = new Map()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const windowed = sinceUs !== undefined && sinceUs > profile.startTime && sinceUs < profile.endTime

  /** @type {Map<string, number>} */
  const self = new Map()
  /** @type {Map<string, number>} */
  const categories = new Map()
  const grouped = new Map(groups.map((g) => [g.name, 0]))
  /** @type {Map<number, string[]>} */
  const groupsOnStack = new Map() // node id -> names of the groups on its stack
  /** @param {Map<string, number>} map @param {string} key @param {number} us */
  const add = (map, key, us) => map.set(key, (map.get(key) ?? 0) + us)
  /** @param {number} id */
  const groupsOf = (id) => {
    let names = groupsOnStack.get(id)
    if (names) return names
    /** @type {Set<string>} */
    const found = new Set()
    for (let /** @type {number | undefined} */ at = id; at !== undefined; at = parent.get(at)) {
      const frame = nodeOf(at).callFrame
      for (const group of groups) if (!found.has(group.name) && group.match(frame, fileOf(frame.url ?? ""))) found.add(group.name)
    }
    names = [...found]
    groupsOnStack.set(id, names)
    return names
  }

  let at = profile.startTime
  let busy = 0
  let idle = 0
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0
    at += us
    if (windowed && at < sinceUs) return
    const frame = nodeOf(id).callFrame
    if (frame.functionName === "(idle)") {
      idle += us
      return
    }
    busy += us
    add(self, frameName(frame, root), us)
    add(categories, categoryOf(frame, root), us)
    for (const name of groupsOf(id)) add(grouped, name, us)
  })

  /** @param {Map<string, number>} map */
  const percent = (map) => [...map.entries()].map(([name, us]) => ({ name, percent: (100 * us) / busy })).sort((a, b) => b.percent - a.percent)
  return { windowed, busyMs: busy / 1000, idleMs: idle / 1000, self: percent(self), categories: percent(categories), groups: percent(grouped) }
}

/**
 * The one .cpuprofile a process wrote into `dir`.
 * @param {string} dir
 */
export function profileIn(dir) {
  const names = fs.readdirSync(dir).filter((name) => name.endsWith(".cpuprofile"))
  if (names.length !== 1) throw new Error(`expected one .cpuprofile in ${dir}, found ${names.length}`)
  return path.join(dir, names[0])
}

/**
 * The hot spots the bench looks for, by where their frames live; each counts every sample with one of its frames on the stack.
 * @param {string} root
 * @returns {HotSpotGroup[]}
 */
export function hotSpotGroups(root) {
  /** @param {string} relative @returns {FrameMatch} */
  const ours = (relative) => (frame, file) => file === path.join(root, "dist", relative)
  /** @param {string} relative @param {string[]} names @returns {FrameMatch} */
  const named = (relative, ...names) => (frame, file) => file === path.join(root, "dist", relative) && names.includes(frame.functionName)
  return [
    { name: "AbortController, AbortSignal.any, abort() on close and abort listeners (per request: plugins/jsonrpc-route.ts, jsonrpc.ts dispatch; per task: runner.ts, client.ts)", match: (_f, file) => /^node:internal\/(abort_controller|event_target|per_context\/domexception)$/.test(file) },
    { name: "InMemoryTaskStore get/getText/save (the copies it makes)", match: named("lib/stores/memory/store.js", "get", "getText", "save", "list") },
    { name: "rendered GetTask answers (lib/a2a/rendered.ts: lookup, or parse and render on a miss)", match: ours("lib/a2a/rendered.js") },
    { name: "wire conversion to 1.0 (lib/a2a/wire.ts)", match: ours("lib/a2a/wire.js") },
    { name: "params validation (lib/a2a/params.ts: checkDepth + ajv)", match: named("lib/a2a/params.js", "check") },
    { name: "  of which checkDepth", match: named("lib/a2a/params.js", "checkDepth") },
    { name: "response serialization (Fastify serialize → JSON.stringify)", match: (frame, file) => file.endsWith("fastify/lib/reply.js") && frame.functionName === "serialize" },
    { name: "request body parse (secure-json-parse)", match: (_f, file) => file.includes("node_modules/secure-json-parse/") },
    { name: "logging (pino, the request log line)", match: (frame, file) => file.includes("node_modules/pino/") || (file === path.join(root, "dist/plugins/jsonrpc-route.js") && frame.functionName === "logLine") },
    { name: "task runner (lib/a2a/runner.ts: start, fulfil, saves, events)", match: ours("lib/a2a/runner.js") },
    { name: "local client loop (lib/client/client.ts)", match: ours("lib/client/client.js") },
    { name: "socket writes (writev)", match: (frame) => frame.functionName === "writev" && !frame.url },
    { name: "garbage collection", match: (frame) => frame.functionName === "(garbage collector)" },
  ]
}

/**
 * hotSpotGroups plus the code a streamed answer runs through, for a profile under SendStreamingMessage.
 * @param {string} root
 * @returns {HotSpotGroup[]}
 */
export function streamingHotSpotGroups(root) {
  /** @param {string[]} relatives @returns {FrameMatch} */
  const ours = (...relatives) => (_frame, file) => relatives.some((relative) => file === path.join(root, "dist", relative))
  return [
    ...hotSpotGroups(root),
    // JSON.stringify has no frame of its own in a V8 profile: its time is its caller's self time (writeEvents, the logs' append).
    { name: "SSE frames written (plugins/sse.ts writeEvents: JSON.stringify of each event, res.write)", match: ours("plugins/sse.js") },
    { name: "a Task's stream (lib/streams/task-streams.ts: live events, positions, wire form)", match: ours("lib/streams/task-streams.js") },
    { name: "stream events made and published (lib/streams/events.ts)", match: ours("lib/streams/events.js") },
    { name: "event log: recorder and the memory store's log (event-recorder.ts, memory/events.ts)", match: ours("lib/streams/event-recorder.js", "lib/stores/memory/events.js") },
    { name: "node http writes (OutgoingMessage write/_send, chunked encoding)", match: (frame, file) => file === "node:_http_outgoing" },
  ]
}
