import fs from "node:fs"
import path from "node:path"
import t from "tap"
import { ROOT } from "../fixtures/helpers.js"

/*
 * The layering CONTRIBUTING.md's "Layers" section describes, read from the sources' import lines
 * (type-only imports included: a cycle of types is still two modules that cannot be read apart).
 */

const SOURCE_DIRS = ["lib", "plugins", "bin"]

/** Every .ts source under the layered folders, plus the root entry, as paths relative to the repo. */
function sources(): string[] {
  const found = ["index.ts"]
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(rel)
      else if (entry.name.endsWith(".ts")) found.push(rel)
    }
  }
  for (const dir of SOURCE_DIRS) walk(dir)
  return found
}

/** The specifiers a module imports or re-exports, static or dynamic. */
function specifiersOf(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), "utf8")
  const pattern = /^\s*(?:import|export)\s[^"']*?from\s+["']([^"']+)["']|^\s*import\s+["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm
  return [...text.matchAll(pattern)].map((match) => match[1] ?? match[2] ?? match[3])
}

/** The repo-relative .ts file a relative specifier names. */
function resolveRelative(from: string, specifier: string): string {
  return path.join(path.dirname(from), specifier).replace(/\.js$/, ".ts")
}

const files = sources()
const graph = new Map(files.map((file) => [file, specifiersOf(file)]))

t.test("the import reader sees the imports it is checking", async (t) => {
  t.ok(files.length > 40, `found ${files.length} sources`)
  t.ok(graph.get("plugins/a2a.ts")?.includes("fastify-plugin"), "a package import is seen")
  t.ok(graph.get("index.ts")?.includes("./plugins/index.js"), "a re-export is seen")
  t.ok(graph.get("lib/tools/toolkit.ts")?.includes("./types.js"), "a type-only import is seen")
  for (const [file, specifiers] of graph) {
    for (const specifier of specifiers.filter((s) => s.startsWith("."))) {
      t.ok(fs.existsSync(path.join(ROOT, resolveRelative(file, specifier))), `${file} -> ${specifier} names a source file`)
    }
  }
})

t.test("nothing under lib/ imports plugins/, and the protocol core and stores import no web framework", async (t) => {
  for (const [file, specifiers] of graph) {
    if (!file.startsWith("lib/")) continue
    for (const specifier of specifiers) {
      const target = specifier.startsWith(".") ? resolveRelative(file, specifier) : specifier
      t.notOk(target.startsWith("plugins/"), `${file} does not import ${specifier}`)
      t.notOk(/^(fastify|@fastify\/|fastify-plugin|pino)/.test(target), `${file} does not import ${specifier}`)
    }
  }
})

t.test("no two source modules import each other, directly or around a loop", async (t) => {
  const edges = new Map([...graph].map(([file, specifiers]) => [file, specifiers.filter((s) => s.startsWith(".")).map((s) => resolveRelative(file, s))]))
  const cycles: string[] = []
  const state = new Map<string, "open" | "done">()
  const stack: string[] = []
  const visit = (file: string) => {
    state.set(file, "open")
    stack.push(file)
    for (const next of edges.get(file) ?? []) {
      if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next].join(" -> "))
      else if (!state.has(next)) visit(next)
    }
    stack.pop()
    state.set(file, "done")
  }
  for (const file of edges.keys()) if (!state.has(file)) visit(file)
  t.same(cycles, [], "no import cycles")
})
