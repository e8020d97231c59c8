import { execFile } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import t from "tap"
import ts from "typescript"
import { USAGE } from "../../lib/cli.js"

/**
 * The documentation holds: its relative links reach files and headings that exist, its TypeScript
 * blocks type-check against this checkout, blocks marked `<!-- run -->` run, its JSON parses and the
 * `toolnexus` flags its shell blocks use are flags the command has.
 */

const run = promisify(execFile)
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..")
/** Where the blocks are written: inside the checkout (so "toolnexus" resolves to its sources), gitignored. */
const workDir = join(root, ".docs-check")

/** Rewrites "toolnexus" imports to this checkout's sources, on the same line, so error lines stay the block's. */
const SPECIFIERS: Record<string, string> = {
  toolnexus: "../index.js",
  "toolnexus/stores": "../lib/stores/index.js",
  "toolnexus/client": "../lib/client/index.js",
  "toolnexus/fastify": "../plugins/index.js",
  "toolnexus/testing": "../lib/testing/index.js",
}

/**
 * What a block may use without making it, as the prose around it does: the client, toolkit, store and
 * Fastify app the section is about. A block that declares one of these itself uses its own.
 */
const PRELUDE = `import type { FastifyInstance } from "fastify"
import type { Client, TaskStore, Toolkit } from "../index.js"
declare global {
  const client: Client
  const toolkit: Toolkit
  const store: TaskStore
  const app: FastifyInstance
}
export {}`

/** The names "toolnexus" exports (types and values), read from its entry file. */
function packageExports(): string[] {
  const program = ts.createProgram([join(root, "index.ts")], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true })
  const checker = program.getTypeChecker()
  const entry = checker.getSymbolAtLocation(program.getSourceFile(join(root, "index.ts"))!)!
  return checker.getExportsOfModule(entry).map((symbol) => symbol.name)
}

/** The names a block imports or declares at any depth (a rough reading: enough to not import a name over the block's own). */
function ownNames(text: string): Set<string> {
  const names = new Set<string>()
  for (const match of text.matchAll(/\b(?:const|let|var|function|class|interface|type|enum)\s+([A-Za-z_$][\w$]*)/g)) names.add(match[1])
  for (const match of text.matchAll(/import\s+(?:type\s+)?([\w$]+)?\s*,?\s*(?:\{([^}]*)\}|\*\s+as\s+([\w$]+))?\s*from/g)) {
    if (match[1]) names.add(match[1])
    if (match[3]) names.add(match[3])
    for (const part of (match[2] ?? "").split(",")) {
      const local = part.trim().split(/\s+as\s+/).pop()?.replace(/^type\s+/, "")
      if (local) names.add(local)
    }
  }
  return names
}

interface Block {
  file: string
  /** The line of the opening fence, 1-based. */
  line: number
  lang: string
  text: string
  /** An HTML comment `<!-- run -->` stands on the last non-blank line before the fence. */
  runs: boolean
}

interface Parsed {
  blocks: Block[]
  /** Links outside code, with the line they are on. */
  links: { target: string; line: number }[]
  /** The anchors the file's headings (and `<a id>`/`<a name>`) make. */
  anchors: Set<string>
}

function markdownFiles(): string[] {
  const files = ["README.md", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md"].filter((file) => existsSync(join(root, file)))
  const walk = (dir: string): void => {
    if (!existsSync(join(root, dir))) return
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`
      if (entry.isDirectory() && path !== "docs/api") walk(path)
      else if (entry.isFile() && entry.name.endsWith(".md")) files.push(path)
    }
  }
  walk("docs")
  return files
}

/** GitHub's heading anchor: the heading's text, lower case, punctuation dropped, each space a hyphen. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase()
  return text.replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "").replace(/\s/g, "-")
}

const parsedFiles = new Map<string, Parsed>()

function parse(file: string): Parsed {
  const known = parsedFiles.get(file)
  if (known) return known
  const lines = readFileSync(join(root, file), "utf8").split("\n")
  const parsed: Parsed = { blocks: [], links: [], anchors: new Set() }
  const seen = new Map<string, number>()
  let fence: { marker: string; block: Block; body: string[] } | undefined
  let lastText = ""
  lines.forEach((raw, i) => {
    if (fence) {
      if (raw.trim().startsWith(fence.marker) && raw.trim().replace(/[`~]/g, "") === "") {
        fence.block.text = fence.body.join("\n")
        parsed.blocks.push(fence.block)
        fence = undefined
      } else fence.body.push(raw)
      return
    }
    const open = /^\s*(`{3,}|~{3,})\s*([\w+-]*)/.exec(raw)
    if (open) {
      fence = { marker: open[1], body: [], block: { file, line: i + 1, lang: open[2].toLowerCase(), text: "", runs: lastText === "<!-- run -->" } }
      return
    }
    if (raw.trim() !== "") lastText = raw.trim()
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(raw)
    if (heading) {
      const base = slug(heading[1])
      const count = seen.get(base) ?? 0
      seen.set(base, count + 1)
      parsed.anchors.add(count === 0 ? base : `${base}-${count}`)
    }
    for (const match of raw.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) parsed.anchors.add(match[1])
    const prose = raw.replace(/`[^`]*`/g, "")
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) parsed.links.push({ target: match[1], line: i + 1 })
    const definition = /^\s*\[[^\]]+\]:\s*(\S+)/.exec(prose)
    if (definition) parsed.links.push({ target: definition[1], line: i + 1 })
    for (const match of prose.matchAll(/<a\s[^>]*href="([^"]+)"/g)) parsed.links.push({ target: match[1], line: i + 1 })
  })
  parsedFiles.set(file, parsed)
  return parsed
}

// tsc reads the whole package once: slow on a loaded machine, so past the suite's 120 s.
t.setTimeout(600_000)

const files = markdownFiles()

t.test("relative links reach files and headings that exist", async (t) => {
  const broken: string[] = []
  for (const file of files) {
    for (const { target, line } of parse(file).links) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // https:, mailto:, …
      const [path, anchor] = target.split("#", 2)
      const to = path === "" ? file : relative(root, resolve(root, dirname(file), decodeURIComponent(path)))
      if (!existsSync(join(root, to))) {
        broken.push(`${file}:${line}: ${target}: no file ${to}`)
        continue
      }
      if (anchor === undefined || !to.endsWith(".md") || !statSync(join(root, to)).isFile()) continue
      if (!parse(to).anchors.has(decodeURIComponent(anchor))) broken.push(`${file}:${line}: ${target}: no heading #${anchor} in ${to}`)
    }
  }
  t.same(broken, [], "every relative link resolves")
})

t.test("json blocks parse", async (t) => {
  const bad: string[] = []
  for (const block of files.flatMap((file) => parse(file).blocks).filter((block) => block.lang === "json")) {
    try {
      JSON.parse(block.text)
    } catch (err) {
      bad.push(`${block.file}:${block.line}: ${(err as Error).message}`)
    }
  }
  t.same(bad, [], "every json block is JSON")
})

t.test("toolnexus flags in shell blocks are the command's", async (t) => {
  const known = new Set([...USAGE.matchAll(/--[a-z][a-z0-9-]*/g)].map((match) => match[0]))
  const unknown: string[] = []
  for (const block of files.flatMap((file) => parse(file).blocks).filter((block) => ["sh", "bash", "shell", "console"].includes(block.lang))) {
    // A command line continued with "\" is one command.
    block.text.replace(/\\\n/g, " ").split("\n").forEach((command) => {
      if (!/(^|[\s;&|$>])(npx\s+)?toolnexus\s|npm (run )?start\s+--\s/.test(command)) return
      const args = command.replace(/^.*?(toolnexus|npm (run )?start\s+--)\s/, "")
      for (const match of args.matchAll(/(?:^|\s)(--[a-z][a-z0-9-]*)/g)) {
        if (!known.has(match[1])) unknown.push(`${block.file}:${block.line}: ${match[1]}`)
      }
    })
  }
  t.same(unknown, [], "every flag is in toolnexus --help")
})

t.test("ts blocks type-check against the package; <!-- run --> blocks run", { timeout: 600_000 }, async (t) => {
  const blocks = files.flatMap((file) => parse(file).blocks).filter((block) => block.lang === "ts" || block.lang === "typescript")
  rmSync(workDir, { recursive: true, force: true })
  mkdirSync(workDir, { recursive: true })
  t.teardown(() => rmSync(workDir, { recursive: true, force: true }))
  const exported = packageExports()
  const written = new Map<string, Block>()
  const bare = new Set<string>()
  for (const block of blocks) {
    const name = `${block.file.replace(/[^\w]/g, "_")}_L${block.line}.ts`
    const text = block.text.replace(/(from\s+|import\(\s*)(["'])([^"']+)\2/g, (whole, head: string, quote: string, specifier: string) => {
      if (SPECIFIERS[specifier]) return `${head}${quote}${SPECIFIERS[specifier]}${quote}`
      if (!specifier.startsWith(".") && !specifier.startsWith("node:")) bare.add(specifier)
      return whole
    })
    // A fragment may use the package's exports without importing them: those it does not import or declare itself are imported on its first line.
    const own = ownNames(text)
    const missing = exported.filter((exportName) => !own.has(exportName) && new RegExp(`\\b${exportName}\\b`).test(text))
    const head = missing.length > 0 ? `import { ${missing.join(", ")} } from "../index.js"; ` : ""
    writeFileSync(join(workDir, name), `${head}${text}\nexport {}\n`)
    written.set(name, block)
  }
  // Packages a block shows that this checkout does not install (an exporter, a framework) are typed as any.
  const absent = [...bare].filter((specifier) => !existsSync(join(root, "node_modules", specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0])))
  writeFileSync(join(workDir, "prelude.d.ts"), PRELUDE)
  // A script file (no import), so each declaration is an ambient module, not an augmentation.
  writeFileSync(join(workDir, "absent.d.ts"), absent.map((specifier) => `declare module ${JSON.stringify(specifier)}\n`).join(""))
  t.ok(blocks.length > 0, `${blocks.length} ts blocks found`)
  writeFileSync(
    join(workDir, "tsconfig.json"),
    JSON.stringify({ extends: "../tsconfig.check.json", compilerOptions: { noEmit: true, noUnusedLocals: false, rootDir: ".." }, include: [], files: ["prelude.d.ts", "absent.d.ts", ...written.keys()] }),
  )
  const tsc = join(root, "node_modules/typescript/bin/tsc")
  const result = await run(process.execPath, [tsc, "-p", join(workDir, "tsconfig.json"), "--pretty", "false"], { cwd: root, maxBuffer: 16 * 1024 * 1024 }).then(
    () => "",
    (err: { stdout?: string; message: string }) => err.stdout || err.message,
  )
  const errors = result
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const at = /^\.docs-check\/([^(]+)\((\d+),(\d+)\): (.*)$/.exec(line)
      const block = at ? written.get(at[1]) : undefined
      // The block's line 1 is the line after its opening fence (any imports added share it).
      return at && block ? `${block.file}:${block.line + Number(at[2])}: ${at[4]}` : line
    })
  t.same(errors, [], "every ts block type-checks")
  for (const [name, block] of written) {
    if (!block.runs) continue
    const ran = await run(process.execPath, [...process.execArgv, join(workDir, name)], { cwd: root, timeout: 60_000, env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "1" } }).then(
      () => undefined,
      (err: { stderr?: string; message: string }) => err.stderr || err.message,
    )
    t.equal(ran, undefined, `${block.file}:${block.line} runs`)
  }
})
