import fs from "node:fs"
import http from "node:http"
import path from "node:path"
import Fastify from "fastify"
import t from "tap"
import { parseCli, USAGE } from "../../lib/cli.js"
import { createLocalClient } from "../../lib/client/client.js"
import { toolnexusA2A, toolnexusA2APlugin } from "../../plugins/a2a.js"
import { INSPECTOR_CSP, INSPECTOR_DIR, readInspectorFiles } from "../../plugins/inspector-route.js"
import { serve } from "../../plugins/serve.js"
// The page's own module, run here on Node's web streams: the browser test sees it work end to end, this one on awkward input.
import { readEvents } from "../../inspector/sse.js"
import { a2aApp, ROOT, startCli, tmpDir } from "../fixtures/helpers.js"

/**
 * The task inspector's routes without a browser: what is served and how (types, CSP, caching,
 * the redirect), what is not (other paths, `..`, the option off), the page's files all reachable
 * and nothing loaded from elsewhere, the option and the CLI flag, and the page's SSE reader.
 */

const client = createLocalClient(() => "answer")
const ALICE = "alice-secret-0123456789"
const PAGE_DIR = path.join(ROOT, "inspector")

t.test("the page's folder is found beside the sources and holds the page", async (t) => {
  t.equal(INSPECTOR_DIR, PAGE_DIR)
  t.ok(fs.existsSync(path.join(PAGE_DIR, "index.html")))
})

t.test("off by default: no inspector route answers", async (t) => {
  const app = await a2aApp(t, { client })
  for (const url of ["/inspector", "/inspector/", "/inspector/inspector.js"]) {
    t.equal((await app.inject(url)).statusCode, 404, url)
  }
})

t.test("each file of the page is served with its type, a strict CSP, nosniff, no-cache and an ETag", async (t) => {
  const app = await a2aApp(t, { client, inspector: true })
  const types: Record<string, RegExp> = { ".html": /^text\/html; charset=utf-8$/, ".js": /^text\/javascript; charset=utf-8$/, ".css": /^text\/css; charset=utf-8$/, ".svg": /^image\/svg\+xml$/ }
  const names = fs.readdirSync(PAGE_DIR)
  t.ok(names.includes("inspector.js") && names.includes("inspector.css"), "the page has its script and styles")
  for (const name of names) {
    const res = await app.inject(name === "index.html" ? "/inspector/" : `/inspector/${name}`)
    t.equal(res.statusCode, 200, name)
    t.match(res.headers["content-type"], types[path.extname(name)], `${name}: its content type`)
    t.equal(res.headers["content-security-policy"], INSPECTOR_CSP, `${name}: the CSP`)
    t.equal(res.headers["x-content-type-options"], "nosniff")
    t.equal(res.headers["cache-control"], "no-cache", `${name}: checked again at each load`)
    t.match(res.headers.etag, /^"[\w-]{27}"$/)
    t.same(res.rawPayload, fs.readFileSync(path.join(PAGE_DIR, name)), `${name}: the file's bytes`)
  }
  t.match(INSPECTOR_CSP, /^default-src 'self';/, "everything from the page's own origin only")
  t.match(INSPECTOR_CSP, /frame-ancestors 'none'/)
  t.notMatch(INSPECTOR_CSP, /unsafe-inline|unsafe-eval|\*/, "no inline script or style, no eval, no wildcard")
})

t.test("a page loaded before answers 304 to its ETag, and a HEAD has the headers without the body", async (t) => {
  const app = await a2aApp(t, { client, inspector: true })
  const first = await app.inject("/inspector/inspector.js")
  const again = await app.inject({ url: "/inspector/inspector.js", headers: { "if-none-match": String(first.headers.etag) } })
  t.equal(again.statusCode, 304)
  t.equal(again.body, "")
  t.equal(again.headers["content-security-policy"], INSPECTOR_CSP)
  const other = await app.inject({ url: "/inspector/inspector.js", headers: { "if-none-match": '"something-else"' } })
  t.equal(other.statusCode, 200, "another ETag gets the file")
  const head = await app.inject({ method: "HEAD", url: "/inspector/" })
  t.equal(head.statusCode, 200)
  t.match(head.headers["content-type"], /^text\/html/)
  t.equal(head.body, "")
})

t.test("/inspector redirects to /inspector/ with a relative Location, under a prefix too, keeping the query", async (t) => {
  const bare = await a2aApp(t, { client, inspector: true })
  const res = await bare.inject("/inspector")
  t.equal(res.statusCode, 302, "temporary: nothing for a browser to keep once the option is off")
  t.equal(res.headers.location, "inspector/")
  t.equal(res.headers["content-security-policy"], INSPECTOR_CSP)
  t.equal((await bare.inject("/inspector?x=1")).headers.location, "inspector/?x=1")

  const prefixed = await a2aApp(t, { client, inspector: true, prefix: "/agents/desk" })
  const moved = await prefixed.inject("/agents/desk/inspector")
  t.equal(moved.statusCode, 302)
  t.equal(new URL(String(moved.headers.location), "http://h/agents/desk/inspector").pathname, "/agents/desk/inspector/", "resolves to the page under the prefix")
  t.equal((await prefixed.inject("/agents/desk/inspector/")).statusCode, 200)
  t.equal((await prefixed.inject("/inspector/")).statusCode, 404, "nothing outside the prefix")
})

t.test("the unwrapped plugin under Fastify's own prefix serves the page there", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(toolnexusA2APlugin, { prefix: "/desk", client, inspector: true })
  t.equal((await app.inject("/desk/inspector/")).statusCode, 200)
  t.equal((await app.inject("/desk/inspector")).headers.location, "inspector/")
})

t.test("an app that ignores trailing slashes still gets the redirect and the page", async (t) => {
  const app = Fastify({ routerOptions: { ignoreTrailingSlash: true } })
  t.teardown(() => app.close())
  await app.register(toolnexusA2A, { client, inspector: true })
  await app.ready()
  t.equal((await app.inject("/inspector")).statusCode, 302)
  const page = await app.inject("/inspector/")
  t.equal(page.statusCode, 200)
  t.match(page.headers["content-type"], /^text\/html/)
})

t.test("unknown files and paths out of the folder are 404, whatever their spelling", async (t) => {
  const app = await a2aApp(t, { client, inspector: true })
  for (const url of [
    "/inspector/nope.js",
    "/inspector/index.htm",
    "/inspector/../package.json",
    "/inspector/..%2fpackage.json",
    "/inspector/%2e%2e/package.json",
    "/inspector/%2e%2e%2fpackage.json",
    "/inspector/..%5cpackage.json",
    "/inspector/sub/inspector.js",
    "/inspector//etc/passwd",
    "/inspector/inspector.js/",
  ]) {
    const res = await app.inject(url)
    t.equal(res.statusCode, 404, url)
    t.notMatch(res.body, /"name":\s*"toolnexus"|root:/, `${url}: no file of the package or system`)
  }
})

t.test("over a real socket, raw paths out of the folder (no client normalises them) are 404 too", async (t) => {
  const srv = await serve("127.0.0.1:0", { client, logger: false, a2a: { inspector: true } })
  t.teardown(() => srv.stop())
  const { hostname, port } = new URL(srv.url)
  const rawGet = (pathname: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      http
        .get({ host: hostname, port, path: pathname, headers }, (res) => {
          let body = ""
          res.setEncoding("utf8").on("data", (chunk: string) => (body += chunk))
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
        })
        .on("error", reject)
    })
  for (const raw of ["/inspector/../package.json", "/inspector/../../etc/passwd", "/inspector/..%2f..%2fpackage.json", "/inspector/%2e%2e%2f%2e%2e%2fpackage.json", "/inspector/index.html%00.js", "/inspector/./inspector.js/.."]) {
    const res = await rawGet(raw)
    t.equal(res.status, 404, raw)
    t.notMatch(res.body, /"name":\s*"toolnexus"|root:/, `${raw}: no file of the package or system`)
  }
  t.equal((await rawGet("/inspector/", { "if-none-match": `"${"x".repeat(8000)}", *` })).status, 304, "a long If-None-Match is read as any other (* matches)")
})

t.test("a tenant named inspector still reaches its A2A routes: only the page's own files are taken", async (t) => {
  const app = await a2aApp(t, { client, inspector: true })
  const V1 = { "a2a-version": "1.0", "content-type": "application/json" }
  const sent = await app.inject({ method: "POST", url: "/inspector/message:send", headers: V1, payload: { message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "hi" }] } } })
  t.equal(sent.statusCode, 200)
  const listed = await app.inject({ url: "/inspector/tasks", headers: V1 })
  t.equal(listed.statusCode, 200)
  t.same(
    listed.json().tasks.map((task: { id: string }) => task.id),
    [sent.json().task.id],
    "tenant inspector's Task",
  )
  t.same((await app.inject({ url: "/tasks", headers: V1 })).json().tasks, [], "and no other tenant's")
})

t.test("with auth on, the page is public and the data behind it is not", async (t) => {
  const app = await a2aApp(t, { client, inspector: true, auth: { tokens: { [ALICE]: "alice" } } })
  t.equal((await app.inject("/inspector/")).statusCode, 200, "the page holds no data")
  t.equal((await app.inject("/inspector/inspector.js")).statusCode, 200)
  const list = await app.inject({ url: "/tasks", headers: { "a2a-version": "1.0" } })
  t.equal(list.statusCode, 401, "what the page reads needs the token")
  t.match(list.json(), { error: { status: "UNAUTHENTICATED", message: /Unauthorized/ } })
  const withToken = await app.inject({ url: "/tasks", headers: { "a2a-version": "1.0", authorization: `Bearer ${ALICE}` } })
  t.equal(withToken.statusCode, 200)
})

t.test("the page loads only its own files: every script, style, icon and import is served, none from elsewhere, none inline", async (t) => {
  const app = await a2aApp(t, { client, inspector: true })
  const html = fs.readFileSync(path.join(PAGE_DIR, "index.html"), "utf8")
  const refs = [...html.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((m) => m[1])
  const imports = fs
    .readdirSync(PAGE_DIR)
    .filter((name) => name.endsWith(".js"))
    .flatMap((name) => [...fs.readFileSync(path.join(PAGE_DIR, name), "utf8").matchAll(/^import .* from "([^"]+)"/gm)].map((m) => m[1]))
  t.ok(refs.includes("inspector.js") && refs.includes("inspector.css"), "the page names its script and styles")
  t.ok(imports.includes("./a2a-rest.js") && imports.includes("./sse.js"), "the modules import each other")
  for (const ref of [...refs, ...imports]) {
    t.notMatch(ref, /^(?:[a-z]+:|\/\/)/i, `${ref}: relative, on the page's own server`)
    const res = await app.inject(new URL(ref, "http://h/inspector/").pathname)
    t.equal(res.statusCode, 200, `${ref} is served`)
  }
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, "no inline script (the CSP would block it)")
  t.notMatch(html, /\sstyle=|<style/, "no inline style (the CSP would block it)")
  t.notMatch(html, /\son[a-z]+=/, "no inline event handler")
})

t.test("only files of the page's kinds are read, and a folder without index.html fails saying what to do", async (t) => {
  const dir = tmpDir(t)
  fs.writeFileSync(path.join(dir, "index.html"), "<!doctype html>")
  fs.writeFileSync(path.join(dir, "app.js"), "export {}")
  fs.writeFileSync(path.join(dir, "notes.txt"), "private")
  fs.writeFileSync(path.join(dir, ".env"), "SECRET=1")
  const files = readInspectorFiles(dir)
  t.same([...files.keys()].sort(), ["app.js", "index.html"])
  const empty = tmpDir(t)
  t.throws(() => readInspectorFiles(empty), /inspector's files \(.*index\.html\) are missing from the package; reinstall toolnexus/)
  t.throws(() => readInspectorFiles(path.join(empty, "gone")), /gone.index\.html\) are missing/)
})

t.test("opts.inspector is checked at registration", async (t) => {
  for (const inspector of ["yes", 1, {}]) {
    const app = Fastify()
    t.teardown(() => app.close())
    await t.rejects(Promise.resolve(app.register(toolnexusA2A, { client, inspector: inspector as never }).ready()), /opts\.inspector should be true .* or false/)
  }
})

t.test("serve()'s a2a.inspector serves the page on the listening server", async (t) => {
  const srv = await serve("127.0.0.1:0", { client, logger: false, a2a: { inspector: true } })
  t.teardown(() => srv.stop())
  const res = await fetch(`${srv.url}/inspector`)
  t.equal(res.url, `${srv.url}/inspector/`, "fetch followed the redirect")
  t.equal(res.status, 200)
  t.match(await res.text(), /<title>Task inspector<\/title>/)
})

t.test("the CLI: --inspector or TOOLNEXUS_INSPECTOR turn it on; a bad value is refused naming the variable", async (t) => {
  const parsed = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    if (config === "help") throw new Error("help")
    return config.inspector
  }
  t.equal(parsed([]), undefined, "off by default")
  t.equal(parsed(["--inspector"]), true)
  for (const on of ["1", "true", "TRUE"]) t.equal(parsed([], { TOOLNEXUS_INSPECTOR: on }), true, on)
  for (const off of ["0", "false", ""]) t.equal(parsed([], { TOOLNEXUS_INSPECTOR: off }), undefined, JSON.stringify(off))
  t.throws(() => parsed([], { TOOLNEXUS_INSPECTOR: "yes" }), /TOOLNEXUS_INSPECTOR should be 1 or true .* got "yes"/)
  t.match(USAGE, /--inspector\s+serve the task inspector/)
})

t.test("the toolnexus command with --inspector serves the page and logs where", async (t) => {
  const cli = await startCli(t, ["--inspector", "--store", "memory", "--port", "0", "--log-format", "json"])
  const listening = cli.lines.find((line) => line.msg === "toolnexus agent listening")
  t.equal(listening?.inspector, `${cli.url}/inspector/`)
  const res = await fetch(`${cli.url}/inspector/`)
  t.equal(res.status, 200)
  t.equal(res.headers.get("content-security-policy"), INSPECTOR_CSP)
})

// ---------------------------------------------------------------------------
// The page's SSE reader

/** A body that delivers `chunks` as they are, so events and line ends fall across reads. */
function bodyOf(chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk))
      controller.close()
    },
  })
}

async function eventsOf(chunks: string[]) {
  const out = []
  for await (const event of readEvents(bodyOf(chunks))) out.push(event)
  return out
}

t.test("the page's SSE reader: ids, names, multi-line data, comments, bare field names, other fields, and every line ending, across chunk edges", async (t) => {
  const events = await eventsOf([
    ": keep-alive\n\n",
    "id: 1\ndata: {\"a\":",
    "1}\n\nid: 2\r",
    "\nevent: error\r\ndata: line one\r\ndata: line two\r\n\r\n",
    "data:no space\r\rdata: x\n",
    "\n",
    "id: bad\u0000id\ndata\nretry: 10\ndata\n\n",
    "id: 3\ndata: cut off at the end",
  ])
  t.same(events, [
    { id: "1", event: "message", data: '{"a":1}' },
    { id: "2", event: "error", data: "line one\nline two" },
    { id: "2", event: "message", data: "no space" },
    { id: "2", event: "message", data: "x" },
    { id: "2", event: "message", data: "\n" },
  ])
})

t.test("the page's SSE reader: a multi-byte character split across chunks, and an event without data is no event", async (t) => {
  const bytes = new TextEncoder().encode("data: café ☕\n\nevent: ping\n\n")
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const byte of bytes) controller.enqueue(new Uint8Array([byte]))
      controller.close()
    },
  })
  const out = []
  for await (const event of readEvents(body)) out.push(event)
  t.same(out, [{ id: undefined, event: "message", data: "café ☕" }])
})

t.test("the page's SSE reader: stopping early cancels the body", async (t) => {
  let canceled = false
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode("data: one\n\ndata: two\n\n"))
    },
    cancel() {
      canceled = true
    },
  })
  for await (const event of readEvents(body)) {
    t.equal(event.data, "one")
    break
  }
  t.ok(canceled, "the response is closed once the page stops reading")
})
