// Child: the A2A peer for the streaming rows, and a fake OpenAI-style model endpoint in the same process (so the
// model's clock and the peer's are one performance.now()). The servers run in children of their own
// (servers/toolnexus-stream.mjs, servers/sdk-stream.mjs); the parent says what to do over IPC:
//   ttft      sequential SendStreamingMessage to a toolnexus server whose model is this process's fake endpoint:
//             per sample, when the peer got the first artifactUpdate frame minus when the model wrote its first
//             content chunk (what the server adds to the first token); gapMs spaces the second chunk from the first
//   check     one SendStreamingMessage, parsed whole: the kinds of its events and the text its chunks join into
//   load      C peers, each SendStreamingMessage after SendStreamingMessage on a keep-alive connection, reading the
//             whole SSE answer; counts the frames (events) received
//   tasks, subscribe, drain   the idle-stream measurement: Tasks whose model waits, one SubscribeToTask stream on each
//             held open, then read to their end once the parent released the model
// argv: <chunks the fake model streams>
import { randomUUID } from "node:crypto"
import http from "node:http"
import { serveParent, reportStartFailure } from "./child.mjs"
import { streamChunks } from "./fixtures.mjs"
import { percentile } from "./stats.mjs"

const chunks = streamChunks(Number(process.argv[2] ?? 20))
const A2A = { "content-type": "application/json", "a2a-version": "1.0", accept: "text/event-stream" }
/** How long the fake model waits after the request before its first token (its headers and role chunk go at once). */
const FIRST_TOKEN_DELAY_MS = 5

// ---------------------------------------------------------------------------
// The fake model: OpenAI chat completions, streamed, one res.write per chunk.

// gapMs: 0, the chunks after the first follow it back to back (one per turn of this process's event loop), so a few
// reach the server together with it; more, the second waits that long, so the first arrives and is relayed alone.
const model = { firstTokenAt: NaN, requests: 0, gapMs: 0 }
/** @param {{ role?: string, content?: string }} delta @param {string | null} [finish] */
const openaiChunk = (delta, finish = null) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
const modelServer = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    model.requests++
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
    res.write(openaiChunk({ role: "assistant", content: "" }))
    setTimeout(() => {
      res.write(openaiChunk({ content: chunks[0] }))
      model.firstTokenAt = performance.now()
      let i = 1
      // The rest one write per turn of the event loop, as tokens arriving from a model would.
      const next = () => {
        if (res.destroyed) return
        if (i < chunks.length) {
          res.write(openaiChunk({ content: chunks[i++] }))
          setImmediate(next)
        } else {
          res.write(openaiChunk({}, "stop"))
          res.end("data: [DONE]\n\n")
        }
      }
      if (model.gapMs > 0) setTimeout(next, model.gapMs)
      else setImmediate(next)
    }, FIRST_TOKEN_DELAY_MS)
  })
})

// ---------------------------------------------------------------------------
// The peer.

const streamBody = () =>
  JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendStreamingMessage", params: { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "hi" }] } } })

/**
 * POSTs `body` to `url` and calls `onFrame(text, at)` for each SSE frame (comments skipped) as it arrives;
 * resolves with the status code when the answer ends. `onResponse` gets the request, to cut it.
 * @param {string} url
 * @param {string} body
 * @param {http.Agent | undefined} agent
 * @param {(frame: string, at: number) => void} onFrame
 * @param {(req: http.ClientRequest, res: http.IncomingMessage) => void} [onResponse]
 * @returns {Promise<number | undefined>}
 */
function post(url, body, agent, onFrame, onResponse) {
  return new Promise((resolve, reject) => {
    const req = http.request(url + "/", { method: "POST", agent, headers: { ...A2A, "content-length": Buffer.byteLength(body) } }, (res) => {
      onResponse?.(req, res)
      res.setEncoding("utf8")
      let buffer = ""
      res.on("data", (/** @type {string} */ text) => {
        const at = performance.now()
        buffer += text
        let start = 0
        let end
        while ((end = buffer.indexOf("\n\n", start)) !== -1) {
          // ":" starts a comment (the server's keep-alive): not an event.
          if (buffer.charCodeAt(start) !== 58) onFrame(buffer.slice(start, end), at)
          start = end + 2
        }
        buffer = start === 0 ? buffer : buffer.slice(start)
      })
      res.on("end", () => resolve(res.statusCode))
      res.on("error", reject)
      res.on("aborted", () => reject(new Error("the stream was cut")))
    })
    req.on("error", reject)
    req.end(body)
  })
}

/**
 * One stream event's result, as far as the checks read it.
 * @typedef {{
 *   artifactUpdate?: { append?: boolean, lastChunk?: boolean, artifact: { parts: { text?: string }[] } },
 *   statusUpdate?: { status?: { state?: string } },
 *   [kind: string]: unknown,
 * }} StreamResult
 */
/**
 * The JSON-RPC answer a frame's data holds.
 * @param {string} frame
 * @returns {{ result: StreamResult }}
 */
const dataOf = (frame) => JSON.parse(frame.slice(frame.indexOf("data: ") + 6))


/**
 * Sequential streams through the server: per sample, when the peer got the first token minus when the model wrote it.
 * @param {{ url: string, samples: number, warmup: number, gapMs?: number }} opts
 */
async function ttft({ url, samples, warmup, gapMs = 0 }) {
  model.gapMs = gapMs
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  /** @type {number[]} */
  const added = []
  /** @type {number[]} */
  const atPeer = []
  /** @type {number[]} */
  const atModel = []
  try {
    for (let i = 0; i < warmup + samples; i++) {
      model.firstTokenAt = NaN
      let firstAt = NaN
      let last = ""
      let frames = 0
      const t0 = performance.now()
      const status = await post(url, streamBody(), agent, (frame, at) => {
        frames++
        last = frame
        if (Number.isNaN(firstAt) && frame.includes('"artifactUpdate"')) firstAt = at
      })
      if (status !== 200 || !last.includes("TASK_STATE_COMPLETED") || Number.isNaN(firstAt) || Number.isNaN(model.firstTokenAt)) {
        throw new Error(`ttft sample ${i}: HTTP ${status}, ${frames} frames, last ${last.slice(0, 200)}`)
      }
      if (i < warmup) continue
      added.push(firstAt - model.firstTokenAt)
      atPeer.push(firstAt - t0)
      atModel.push(model.firstTokenAt - t0)
    }
  } finally {
    agent.destroy()
  }
  // From the peer's request: the first token at the model (the 5 ms the fake model waits, plus the way in), and at the peer.
  return { addedMs: added, modelFirstTokenMs: atModel, peerFirstTokenMs: atPeer, firstTokenDelayMs: FIRST_TOKEN_DELAY_MS, modelChunks: chunks.length, gapMs }
}

/**
 * One stream, parsed: what a peer gets, to show both servers send the same events.
 * @param {{ url: string, expectChunks: number }} opts
 */
async function check({ url, expectChunks }) {
  /** @type {StreamResult[]} */
  const results = []
  const status = await post(url, streamBody(), undefined, (frame) => results.push(dataOf(frame).result))
  const kinds = results.map((r) => Object.keys(r)[0])
  let text = ""
  for (const r of results) {
    const update = r.artifactUpdate
    if (update === undefined) continue
    const part = update.artifact.parts.map((p) => p.text ?? "").join("")
    text = update.append ? text + part : part
  }
  const expected = streamChunks(expectChunks).join("")
  const updates = results.flatMap((r) => (r.artifactUpdate ? [r.artifactUpdate] : []))
  return {
    status,
    frames: results.length,
    kinds: kinds.reduce((/** @type {{ kind: string, count: number }[]} */ runs, kind) => {
      const lastRun = runs.at(-1)
      if (lastRun?.kind === kind) lastRun.count++
      else runs.push({ kind, count: 1 })
      return runs
    }, []),
    finalState: results.at(-1)?.statusUpdate?.status?.state,
    textMatches: text === expected,
    appendsAfterFirst: updates.slice(1).every((u) => u.append === true) && !updates[0]?.append,
    lastChunkOnLast: updates.at(-1)?.lastChunk === true && updates.slice(0, -1).every((u) => !u.lastChunk),
    sample: results.slice(0, 4),
  }
}

/**
 * `connections` peers stream back to back for `seconds`; a stream begun before the end is read to its end.
 * @param {{ url: string, connections: number, seconds: number, expectFrames: number }} opts
 */
async function load({ url, connections, seconds, expectFrames }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  let events = 0
  let streams = 0
  let bad = 0
  /** @type {number[]} */
  const durations = []
  const t0 = performance.now()
  const deadline = t0 + seconds * 1000
  const peer = async () => {
    while (performance.now() < deadline) {
      let frames = 0
      let last = ""
      const s0 = performance.now()
      try {
        const status = await post(url, streamBody(), agent, (frame) => {
          frames++
          last = frame
        })
        if (status !== 200 || frames !== expectFrames || !last.includes("TASK_STATE_COMPLETED")) bad++
      } catch {
        bad++
      }
      events += frames
      streams++
      durations.push(performance.now() - s0)
    }
  }
  await Promise.all(Array.from({ length: connections }, peer))
  const wall = (performance.now() - t0) / 1000
  agent.destroy()
  return {
    events,
    streams,
    bad,
    seconds: wall,
    eventsPerSecond: events / wall,
    streamP50Ms: percentile(durations, 50),
    streamP99Ms: percentile(durations, 99),
    // withChildCpu divides the server's CPU by `requests`: here, per event.
    requests: events,
  }
}

/**
 * An idle stream held open: its frames so far, the last one, its end, and its request (to cut it).
 * @typedef {{ frames: number, last: string, done?: Promise<number | undefined>, req?: http.ClientRequest }} IdleStream
 */
// The idle streams: held here between the parent's calls.
/** @type {{ ids: string[], open: IdleStream[], agent: http.Agent | undefined }} */
const idle = { ids: [], open: [], agent: undefined }

/**
 * `count` Tasks answered at once (returnImmediately) whose model waits: each is working, its stream not yet open.
 * @param {{ url: string, count: number }} opts
 */
async function tasks({ url, count }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })
  try {
    let next = 0
    const worker = async () => {
      while (next < count) {
        next++
        const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "wait" }] }, configuration: { returnImmediately: true } } })
        /** @type {{ result?: { task?: { id?: string } } }} */
        const answer = await new Promise((resolve, reject) => {
          const req = http.request(url + "/", { method: "POST", agent, headers: { "content-type": "application/json", "a2a-version": "1.0", "content-length": Buffer.byteLength(body) } }, (res) => {
            let text = ""
            res.setEncoding("utf8")
            res.on("data", (/** @type {string} */ t) => (text += t))
            res.on("end", () => resolve(JSON.parse(text)))
            res.on("error", reject)
          })
          req.on("error", reject)
          req.end(body)
        })
        const id = answer.result?.task?.id
        if (!id) throw new Error(`SendMessage did not answer a Task: ${JSON.stringify(answer).slice(0, 300)}`)
        idle.ids.push(id)
      }
    }
    await Promise.all(Array.from({ length: 16 }, worker))
  } finally {
    agent.destroy()
  }
  return { count: idle.ids.length }
}

/** One SubscribeToTask stream per Task, each on its own connection, held open once its first frame (the Task) came. */
async function subscribe() {
  idle.agent = new http.Agent({ keepAlive: false, maxSockets: Infinity })
  let next = 0
  const opener = async () => {
    while (next < idle.ids.length) {
      const id = idle.ids[next++]
      const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SubscribeToTask", params: { id } })
      await new Promise((/** @type {(value?: undefined) => void} */ resolve, reject) => {
        /** @type {IdleStream} */
        const stream = { frames: 0, last: "", done: undefined }
        stream.done = post(
          url(),
          body,
          idle.agent,
          (frame) => {
            stream.frames++
            stream.last = frame
            if (stream.frames === 1) resolve()
          },
          (req, res) => {
            stream.req = req
            if (res.statusCode !== 200 || !String(res.headers["content-type"]).startsWith("text/event-stream")) reject(new Error(`SubscribeToTask ${id}: HTTP ${res.statusCode} ${res.headers["content-type"]}`))
          },
        )
        stream.done.catch(reject)
        idle.open.push(stream)
      })
    }
  }
  await Promise.all(Array.from({ length: 32 }, opener))
  return { open: idle.open.length }
}

/** After the parent released the model: every stream read to its end (the Task completed); how many ended so. */
async function drain() {
  const ended = await Promise.allSettled(idle.open.map((s) => s.done ?? Promise.resolve(undefined)))
  const completed = idle.open.filter((s, i) => ended[i].status === "fulfilled" && s.last.includes("TASK_STATE_COMPLETED")).length
  idle.agent?.destroy()
  const count = idle.open.length
  idle.open = []
  idle.ids = []
  return { streams: count, completed }
}

let target = ""
const url = () => target

try {
  await new Promise((/** @type {(value?: undefined) => void} */ resolve) => modelServer.listen(0, "127.0.0.1", () => resolve()))
  modelServer.keepAliveTimeout = 60_000
  const modelUrl = `http://127.0.0.1:${/** @type {import("node:net").AddressInfo} */ (modelServer.address()).port}/v1`
  serveParent(
    {
      ttft,
      check,
      load,
      tasks: async (/** @type {{ url: string, count: number }} */ opts) => {
        target = opts.url
        return tasks(opts)
      },
      subscribe,
      drain,
      modelRequests: async () => ({ requests: model.requests }),
    },
    async () => {
      for (const stream of idle.open) stream.req?.destroy()
      idle.agent?.destroy()
      modelServer.closeAllConnections()
      await new Promise((/** @type {(value?: undefined) => void} */ resolve) => modelServer.close(() => resolve()))
    },
  )
  process.send?.({ ready: true, modelUrl })
} catch (err) {
  reportStartFailure(err)
}
