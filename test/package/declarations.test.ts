import { execFile } from "node:child_process"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { promisify } from "node:util"
import t, { type Test } from "tap"

/**
 * The published types of the stores never name an optional peer (pg,
 * nats): an application without them, type-checking with skipLibCheck off,
 * must compile. The declarations of toolnexus/stores (the only modules that
 * use the peers; the root entry re-exports them) are emitted into a tmp
 * directory: dist/ stays as `npm run build` left it, for the tests that run it.
 */

// Three compilations: on a loaded 2-core machine they may take minutes.
t.setTimeout(600_000)

const root = path.resolve(import.meta.dirname, "..", "..")
const tsc = path.join(root, "node_modules", "typescript", "bin", "tsc")
const run = promisify(execFile)

/** Runs tsc; its exit code and what it printed (tsc prints its errors on stdout). */
async function typeCheck(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [tsc, ...args], { cwd, maxBuffer: 16 * 1024 * 1024 })
    return { code: 0, output: stdout + stderr }
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string }
    return { code: typeof failed.code === "number" ? failed.code : -1, output: `${failed.stdout ?? ""}${failed.stderr ?? ""}` }
  }
}

function tmpDir(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-declarations-"))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

function declarationFiles(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((name) => name.endsWith(".d.ts")).map((name) => path.join(dir, name))
}

/** A reference to a peer in a declaration: an import, an import type, a require or a triple-slash types reference. */
const PEER_REFERENCE = /(?:from\s+|import\s*\(\s*|require\s*\(\s*|import\s+)["'](pg|nats)(?:\/[^"']*)?["']|reference\s+types\s*=\s*["'](pg|nats)["']/

t.test("no declaration of toolnexus/stores names pg or nats, and an app without them type-checks against it", async (t) => {
  const work = tmpDir(t)
  const dist = path.join(work, "dist")
  // With the package's own compiler options, from the stores' entry and everything it imports.
  fs.writeFileSync(
    path.join(work, "tsconfig.json"),
    JSON.stringify({
      extends: path.join(root, "tsconfig.json"),
      compilerOptions: {
        rootDir: root,
        outDir: dist,
        declaration: true,
        emitDeclarationOnly: true,
        sourceMap: false,
        inlineSources: false,
        // Node's types from the package, not from beside this tmp tsconfig.
        typeRoots: [path.join(root, "node_modules", "@types")],
        types: ["node"],
      },
      files: [path.join(root, "lib", "stores", "index.ts")],
      include: [],
    }),
  )
  const emitted = await typeCheck(["-p", path.join(work, "tsconfig.json")], work)
  t.equal(emitted.code, 0, `the declarations are emitted${emitted.output && `: ${emitted.output}`}`)

  const files = declarationFiles(dist)
  t.ok(files.some((file) => file.endsWith(path.join("lib", "stores", "nats", "store.d.ts"))) && files.some((file) => file.endsWith(path.join("lib", "stores", "postgres", "store.d.ts"))), "the network stores' declarations are among them")
  const offenders = files.flatMap((file) =>
    fs
      .readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => PEER_REFERENCE.test(line))
      .map((line) => `${path.relative(dist, file)}: ${line.trim()}`),
  )
  t.same(offenders, [], `none of the ${files.length} declaration files refers to pg or nats`)
  t.ok(PEER_REFERENCE.test('import type { KV } from "nats";') && PEER_REFERENCE.test('x: typeof import("pg")'), "the check sees the forms it looks for")

  // An application that has toolnexus but neither pg nor nats, with skipLibCheck off.
  const app = path.join(work, "app")
  const modules = path.join(app, "node_modules")
  fs.mkdirSync(path.join(modules, "toolnexus"), { recursive: true })
  fs.mkdirSync(path.join(modules, "@types"), { recursive: true })
  fs.symlinkSync(dist, path.join(modules, "toolnexus", "dist"), "dir")
  fs.writeFileSync(
    path.join(modules, "toolnexus", "package.json"),
    JSON.stringify({ name: "toolnexus", type: "module", exports: { "./stores": { types: "./dist/lib/stores/index.d.ts" } } }),
  )
  // An application has Node's types; @types/node needs undici-types.
  fs.symlinkSync(path.join(root, "node_modules", "@types", "node"), path.join(modules, "@types", "node"), "dir")
  fs.symlinkSync(path.join(root, "node_modules", "undici-types"), path.join(modules, "undici-types"), "dir")
  fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", type: "module", private: true }))
  fs.writeFileSync(
    path.join(app, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: { strict: true, skipLibCheck: false, noEmit: true, module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", types: ["node"] },
      files: ["app.ts"],
    }),
  )
  fs.writeFileSync(
    path.join(app, "app.ts"),
    [
      'import { FileTaskStore, InMemoryTaskStore, NatsTaskStore, PostgresTaskStore, resolveStore, type StoreErrorHandler, type TaskStore } from "toolnexus/stores"',
      "const onError: StoreErrorHandler = (err, context) => console.error(context.store, context.operation, context.taskId, err.message)",
      "export const stores: TaskStore[] = [",
      '  new NatsTaskStore("nats://127.0.0.1:4222", { bucket: "tasks", onError }),',
      '  new PostgresTaskStore("postgres://127.0.0.1/app", { table: "tasks", onError }),',
      '  new FileTaskStore("./tasks", { onError }),',
      "  new InMemoryTaskStore({ onError }),",
      '  resolveStore("memory", { onError }),',
      "]",
      "",
    ].join("\n"),
  )
  const compiled = await typeCheck(["-p", "tsconfig.json"], app)
  t.equal(compiled.code, 0, `the app type-checks${compiled.output && `: ${compiled.output}`}`)

  // The same app naming nats itself fails: the check runs where nats cannot be found.
  fs.writeFileSync(path.join(app, "peer.ts"), 'import type { KV } from "nats"\nexport type Bucket = KV\n')
  const withPeer = await typeCheck(["--noEmit", "--strict", "--skipLibCheck", "false", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--types", "node", "app.ts", "peer.ts"], app)
  t.match(withPeer.output, /peer\.ts.*error TS2307: Cannot find module 'nats'/, "a reference to nats would have failed it")
})

t.test("the real pg and nats fit the structural types the stores declare for them", async (t) => {
  // test/fixtures/drivers-fit.ts assigns each driver module to its declared type: it compiles only if they fit.
  const checked = await typeCheck(
    ["--noEmit", "--strict", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--target", "ES2022", "--esModuleInterop", "--skipLibCheck", path.join("test", "fixtures", "drivers-fit.ts")],
    root,
  )
  t.equal(checked.code, 0, `pg fits PgDriver and nats fits NatsDriver${checked.output && `: ${checked.output}`}`)
})
