import assert from "node:assert"
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { FileTaskStore } from "toolnexus"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tn-taskstore-"))
const store = new FileTaskStore(dir)

await store.save({ id: "abc-123", status: { state: "completed" }, artifacts: [{ parts: [{ kind: "text", text: "hi" }] }] })
const got = await store.get("abc-123")

assert.equal(got!.status.state, "completed")
assert.equal((got!.artifacts as any)[0].parts[0].text, "hi")
assert.ok(fs.existsSync(path.join(dir, "abc-123.json")), "one JSON file per task id")
assert.equal(await store.get("missing"), undefined)

fs.rmSync(dir, { recursive: true, force: true })
console.log("ok: round-tripped abc-123")
