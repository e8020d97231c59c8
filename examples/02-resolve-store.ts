import assert from "node:assert"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { FileTaskStore, InMemoryTaskStore, resolveStore } from "toolnexus"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-taskstore-"))

assert.ok(resolveStore() instanceof InMemoryTaskStore, "omitted ⇒ in-memory")
assert.ok(resolveStore("memory") instanceof InMemoryTaskStore)
assert.ok(resolveStore(`file:${dir}`) instanceof FileTaskStore, "\"file:<dir>\" ⇒ FileTaskStore")

const custom = new InMemoryTaskStore()
assert.equal(resolveStore(custom), custom, "an already-built store is used as-is")

assert.throws(() => resolveStore("redis:whatever"), /Unknown A2A store/)

fs.rmSync(dir, { recursive: true, force: true })
console.log("ok: every selector resolved")
