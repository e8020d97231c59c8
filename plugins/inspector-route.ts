import { createHash } from "node:crypto"
import fs from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify"
import { matchesEtag } from "./card-route.js"

/** Where the page is served, under the routes' prefix. */
export const INSPECTOR_PATH = "/inspector"

/** The page's folder as shipped in the package: one folder up from this module in the sources, two in dist/. */
const FOLDERS = ["../inspector", "../../inspector"].map((rel) => fileURLToPath(new URL(rel, import.meta.url)))
/** The folder that holds the page (the one in dist/'s place when neither does, for the error to name). */
export const INSPECTOR_DIR = FOLDERS.find((dir) => fs.existsSync(path.join(dir, "index.html"))) ?? FOLDERS[1]

/** The types of the files the page is made of; a file of any other kind in the folder is not served. */
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
}

/**
 * The page loads its own files and talks to its own server, nothing else: no inline script or style,
 * no other origin, no framing, no form posted anywhere, no <base> to redirect its relative URLs.
 */
export const INSPECTOR_CSP = "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"

/** Every answer of the page's routes carries these. */
const PAGE_HEADERS = {
  "content-security-policy": INSPECTOR_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  // Kept, but checked again at each load (the ETag makes that a 304): an upgraded server's page is seen at once.
  "cache-control": "no-cache",
} as const

export interface PageFile {
  body: Buffer
  type: string
  etag: string
}

/**
 * The page's files, read once at registration (before the plugin opens anything, so a broken install
 * fails cleanly): the folder's files of a known type, by name.
 */
export function readInspectorFiles(dir: string = INSPECTOR_DIR): ReadonlyMap<string, PageFile> {
  if (!fs.existsSync(path.join(dir, "index.html"))) {
    throw new Error(`toolnexus: opts.inspector is on, but the inspector's files (${path.join(dir, "index.html")}) are missing from the package; reinstall toolnexus`)
  }
  const files = new Map<string, PageFile>()
  for (const name of fs.readdirSync(dir)) {
    const type = CONTENT_TYPES[path.extname(name)]
    if (type === undefined) continue
    const body = fs.readFileSync(path.join(dir, name))
    files.set(name, { body, type, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"` })
  }
  return files
}

/**
 * The task inspector: `GET <prefix>/inspector/` is the page, `GET <prefix>/inspector/<file>` its
 * scripts and styles, one route per file shipped (so no other path, and no `..`, reaches a
 * file), and `GET <prefix>/inspector` redirects to the page (its relative URLs need the slash).
 * Public: the page holds no data; it reads Tasks through the REST routes, with the token its
 * user gives it. Registered in a context of its own (`routes.register(inspectorRoutes, { files })`).
 */
export async function inspectorRoutes(routes: FastifyInstance, { files }: { files: ReadonlyMap<string, PageFile> }): Promise<void> {
  const index = files.get("index.html")!

  const send = (request: FastifyRequest, reply: FastifyReply, file: PageFile) => {
    reply.headers(PAGE_HEADERS).header("etag", file.etag)
    if (matchesEtag(request.headers["if-none-match"], file.etag)) return reply.code(304).send()
    return reply.type(file.type).send(file.body)
  }
  // Under ignoreTrailingSlash the two paths are one route: its handler tells them apart by the URL.
  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    const [pathPart, query] = splitQuery(request.url)
    if (!pathPart.endsWith("/")) {
      // Relative, so it holds behind a proxy that strips a path prefix.
      return reply.headers(PAGE_HEADERS).redirect(`${INSPECTOR_PATH.slice(1)}/${query}`, 302)
    }
    return send(request, reply, index)
  }
  routes.get(`${INSPECTOR_PATH}/`, page)
  if (!ignoresTrailingSlash(routes)) routes.get(INSPECTOR_PATH, page)
  for (const [name, file] of files) {
    if (name === "index.html") continue
    routes.get(`${INSPECTOR_PATH}/${name}`, async (request, reply) => send(request, reply, file))
  }
}

function splitQuery(url: string): [string, string] {
  const at = url.indexOf("?")
  return at === -1 ? [url, ""] : [url.slice(0, at), url.slice(at)]
}

/** The app's router option (Fastify 5 reads it from routerOptions, and from the older top-level option). */
function ignoresTrailingSlash(routes: FastifyInstance): boolean {
  const config = routes.initialConfig as { ignoreTrailingSlash?: boolean; routerOptions?: { ignoreTrailingSlash?: boolean } }
  return config.routerOptions?.ignoreTrailingSlash === true || config.ignoreTrailingSlash === true
}
