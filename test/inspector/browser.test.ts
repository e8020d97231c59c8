import fs from "node:fs"
import path from "node:path"
import { chromium, type Browser, type Page } from "playwright-core"
import t, { type Test } from "tap"
import { createLocalClient, type ModelFunction } from "../../lib/client/client.js"
import type { ToolnexusA2AOptions } from "../../plugins/a2a.js"
import { serve } from "../../plugins/serve.js"
import { deferred, ROOT, userMessage, waitFor } from "../fixtures/helpers.js"

/**
 * The task inspector in a real browser: chromium, driven by playwright-core, loads the
 * page from a server this test starts, sends messages from the compose box, and sees the answers,
 * the Tasks in the list, their detail and their updates while they run; with auth on, the token
 * prompt, a wrong token refused, and the right one showing that principal's Tasks only.
 * Screenshots go to .tap/inspector/ (kept after the run, to look at).
 */

/**
 * The browser: CHROMIUM_PATH when set, else Debian's chromium when installed, else the build that
 * @sparticuz/chromium ships inside its npm package (unpacked to the temp directory on first use), so
 * `npm ci && npm test` needs no apt step. Its flags for a sandboxless container are the ones passed.
 */
async function chromiumToLaunch(): Promise<{ executablePath: string; args: string[] }> {
  const installed = process.env.CHROMIUM_PATH ?? (fs.existsSync("/usr/bin/chromium") ? "/usr/bin/chromium" : undefined)
  if (installed) return { executablePath: installed, args: [] }
  const { default: packaged } = await import("@sparticuz/chromium")
  return { executablePath: await packaged.executablePath(), args: ["--no-sandbox", "--no-zygote", "--disable-gpu"] }
}
const CHROMIUM = await chromiumToLaunch()
const SHOTS = path.join(ROOT, ".tap", "inspector")
/** Generous: a loaded 2-core machine renders slowly, and every wait is for a condition, never a time. */
const WAIT = 30_000
const V1 = { "a2a-version": "1.0", "content-type": "application/json" }

t.setTimeout(240_000)

/** The agent: "echo: <prompt>"; a prompt starting "hold" waits until the test releases it; one starting "ask" asks back. */
function agentModel() {
  const held = new Map<string, ReturnType<typeof deferred<string>>>()
  const respond: ModelFunction = ({ messages, signal }) => {
    const prompt = messages.filter((m) => m.role === "user").at(-1)?.content ?? ""
    if (prompt.startsWith("ask")) return { text: "Which city?", inputRequired: true }
    if (!prompt.startsWith("hold")) return `echo: ${prompt}`
    const gate = deferred<string>()
    held.set(prompt, gate)
    // A cancel (or the server stopping) ends the wait.
    signal?.addEventListener("abort", () => gate.reject(signal.reason))
    return gate.promise
  }
  return { respond, held }
}

async function agent(t: Test, extra: Partial<ToolnexusA2AOptions> = {}) {
  const model = agentModel()
  const srv = await serve("127.0.0.1:0", { client: createLocalClient(model.respond), logger: false, a2a: { name: "Desk agent", inspector: true, ...extra } })
  t.teardown(() => srv.stop())
  return { srv, ...model }
}

/**
 * A browser page at 1280×800, with what went wrong on it: script errors and console errors (a CSP
 * violation is one), and, apart, the requests the server refused (`401 GET /tasks`), which a test expects or not.
 */
async function browserPage(t: Test): Promise<{ browser: Browser; page: Page; problems: string[]; refused: Set<string> }> {
  const browser = await chromium.launch(CHROMIUM).catch((err: Error) => {
    throw new Error(`chromium could not start from ${CHROMIUM.executablePath}: set CHROMIUM_PATH to a chromium build that runs here. ${err.message}`, { cause: err })
  })
  t.teardown(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  page.setDefaultTimeout(WAIT)
  const problems: string[] = []
  const refused = new Set<string>()
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`))
  // The browser logs each refused request itself: those are checked through `refused`, every other console error is a problem.
  page.on("console", (message) => {
    if (message.type() === "error" && !/^Failed to load resource: the server responded with a status of/.test(message.text())) problems.push(`console: ${message.text()}`)
  })
  page.on("response", (response) => {
    if (response.status() >= 400) refused.add(`${response.status()} ${response.request().method()} ${new URL(response.url()).pathname}`)
  })
  // A stream the page stops (another Task picked, a reload) ends as aborted: that one is the page's own doing.
  page.on("requestfailed", (request) => {
    if (request.failure()?.errorText !== "net::ERR_ABORTED") problems.push(`request failed: ${request.method()} ${request.url()} ${request.failure()?.errorText}`)
  })
  return { browser, page, problems, refused }
}

async function screenshot(page: Page, name: string): Promise<string> {
  fs.mkdirSync(SHOTS, { recursive: true })
  const file = path.join(SHOTS, name)
  await page.screenshot({ path: file })
  return file
}

/** Sends `text` from the compose box. */
async function send(page: Page, text: string): Promise<void> {
  await page.getByLabel("Message to the agent").fill(text)
  await page.getByRole("button", { name: "Send", exact: true }).click()
}

const taskItems = (page: Page) => page.locator("#task-list button.task-item")
const detailChip = (page: Page) => page.locator("#detail-meta .chip")

/** The task id the detail pane shows. */
async function shownTaskId(page: Page): Promise<string> {
  const title = await page.locator("#detail-title").textContent()
  return String(title).replace(/^Task /, "")
}

t.test("the inspector in chromium: send, see the answer, the list, the detail, live updates, filters", async (t) => {
  const { srv, held } = await agent(t)
  const { page, problems, refused } = await browserPage(t)

  await page.goto(`${srv.url}/inspector`)
  t.equal(page.url(), `${srv.url}/inspector/`, "the bare path redirects to the page")
  await page.getByRole("heading", { name: /Task inspector/ }).waitFor()
  await page.locator("#agent-name", { hasText: "Desk agent" }).waitFor()
  await page.locator("#list-empty").waitFor({ state: "visible" })
  t.equal(await taskItems(page).count(), 0, "no Tasks yet")

  // A message sent from the compose box: its answer appears, in order after the question.
  await send(page, "hello there")
  await page.locator(".message.from-agent", { hasText: "echo: hello there" }).waitFor()
  t.same(await page.locator("#conversation .message").evaluateAll((nodes) => nodes.map((n) => [n.getAttribute("data-role"), n.querySelector(".parts")?.textContent])), [
    ["user", "hello there"],
    ["agent", "echo: hello there"],
  ])
  await detailChip(page).filter({ hasText: "completed" }).waitFor()
  const firstId = await shownTaskId(page)
  const stored = (await (await fetch(`${srv.url}/tasks/${firstId}`, { headers: V1 })).json()) as { status: { state: string }; artifacts: Array<{ parts: Array<{ text: string }> }> }
  t.equal(stored.status.state, "TASK_STATE_COMPLETED", "the page shows a Task the server holds")
  t.equal(await page.locator("#artifacts .artifact").textContent().then((text) => text?.includes(stored.artifacts[0].parts[0].text)), true, "its artifact")
  await page.locator("#timeline .status").nth(2).waitFor()
  t.same(await page.locator("#timeline .status .chip").allTextContents(), ["submitted", "working", "completed"], "the status timeline, watched from the start")
  t.equal(await taskItems(page).count(), 1, "the Task is in the list")
  t.equal(await taskItems(page).first().getAttribute("aria-current"), "true", "and is the one shown")
  t.match(await taskItems(page).first().textContent(), /completed.*hello there/s)
  t.match(page.url(), new RegExp(`#task=${firstId}$`), "the address names the Task shown")

  // A Task that runs a while: the page shows it working, live, then its answer without a reload.
  await send(page, "hold on a moment")
  await detailChip(page).filter({ hasText: "working" }).waitFor()
  await page.locator("#detail-meta .live").waitFor()
  const heldId = await shownTaskId(page)
  t.not(heldId, firstId, "a new Task")
  await waitFor(() => held.has("hold on a moment"), WAIT, "the Task to reach the model")
  held.get("hold on a moment")!.resolve("finally done")
  await page.locator(".message.from-agent", { hasText: "finally done" }).waitFor()
  await detailChip(page).filter({ hasText: "completed" }).waitFor()
  await page.locator("#detail-meta .live").waitFor({ state: "detached" })
  await taskItems(page).nth(1).waitFor()

  // A Task started elsewhere (another peer) while it runs: listed after a refresh, followed through SubscribeToTask.
  const started = await fetch(`${srv.url}/message:send`, {
    method: "POST",
    headers: V1,
    body: JSON.stringify({ message: { ...userMessage("hold from elsewhere"), role: "ROLE_USER", parts: [{ text: "hold from elsewhere" }] }, configuration: { returnImmediately: true } }),
  })
  const elsewhere = ((await started.json()) as { task: { id: string } }).task.id
  await page.getByRole("button", { name: "Refresh" }).click()
  const item = page.locator(`#task-list li[data-task-id="${elsewhere}"] button`)
  await item.click()
  await page.locator("#detail-title", { hasText: elsewhere }).waitFor()
  await page.locator("#detail-meta .live").waitFor()
  await waitFor(() => held.has("hold from elsewhere"), WAIT, "the Task to reach the model")
  held.get("hold from elsewhere")!.resolve("answered while watched")
  await page.locator(".message.from-agent", { hasText: "answered while watched" }).waitFor()
  await item.locator(".chip", { hasText: "completed" }).waitFor()

  // With auto-refresh ticked, a Task another peer starts appears in the list without a click.
  await page.getByLabel("Refresh the list every 5 s").check()
  const another = await fetch(`${srv.url}/message:send`, {
    method: "POST",
    headers: V1,
    body: JSON.stringify({ message: { messageId: "m-auto", role: "ROLE_USER", parts: [{ text: "from another peer" }] } }),
  })
  const anotherId = ((await another.json()) as { task: { id: string } }).task.id
  await page.locator(`#task-list li[data-task-id="${anotherId}"]`).waitFor()
  await page.getByLabel("Refresh the list every 5 s").uncheck()

  // A question back (input-required), answered from the compose box: the same Task goes on.
  await send(page, "ask me something")
  await detailChip(page).filter({ hasText: "input required" }).waitFor()
  await page.locator(".message.from-agent", { hasText: "Which city?" }).waitFor()
  const asking = await shownTaskId(page)
  t.not(asking, elsewhere)
  t.ok(await page.getByLabel("Answer this Task (it asks for input)").isChecked(), "the compose box answers the question by default")
  await send(page, "Paris")
  await page.locator(".message.from-agent", { hasText: "echo: Paris" }).waitFor()
  await detailChip(page).filter({ hasText: "completed" }).waitFor()
  t.equal(await shownTaskId(page), asking, "the same Task went on")
  t.same(await page.locator("#conversation .message .parts").allTextContents(), ["ask me something", "Which city?", "Paris", "echo: Paris"], "the whole exchange, in order")

  // Filters: by state, then by the context of a Task (its context button).
  await page.getByLabel("State").selectOption({ label: "completed" })
  await page.getByRole("button", { name: "Apply filters" }).click()
  await page.locator("#task-count", { hasText: "(5)" }).waitFor()
  t.equal(await taskItems(page).count(), 5)
  await page.getByLabel("State").selectOption({ label: "working" })
  await page.getByRole("button", { name: "Apply filters" }).click()
  await page.locator("#list-empty").waitFor({ state: "visible" })
  await page.getByRole("button", { name: "Clear" }).click()
  await taskItems(page).nth(4).waitFor()
  await page.locator(`#task-list li[data-task-id="${firstId}"] button`).click()
  await page.locator("#detail-title", { hasText: firstId }).waitFor()
  await page.locator("#detail-meta button.link").click()
  await page.locator("#task-count", { hasText: "(1)" }).waitFor()
  t.equal(await taskItems(page).count(), 1, "one Task in that context")

  // A follow-up in the same context: the agent sees the conversation (the local model answers the last question).
  await page.getByLabel(/In this Task's context/).check()
  await send(page, "and again")
  await page.locator(".message.from-agent", { hasText: "echo: and again" }).waitFor()
  await page.locator("#task-count", { hasText: "(2)" }).waitFor()
  t.equal(await taskItems(page).count(), 2, "the follow-up joins the context's list")

  // Errors are shown on the page: a Task that does not exist.
  await page.goto(`${srv.url}/inspector/#task=no-such-task`)
  await page.getByRole("alert").filter({ hasText: "Task not found: no-such-task" }).waitFor()
  await page.locator("#detail-title", { hasText: "No Task selected" }).waitFor()
  await page.getByRole("button", { name: "Dismiss" }).click()
  await page.getByRole("alert").waitFor({ state: "hidden" })

  // The picture to look at: every Task listed, the question-and-answer one shown.
  await page.getByRole("button", { name: "Clear" }).click()
  await page.locator("#task-count", { hasText: "(6)" }).waitFor()
  await page.goto(`${srv.url}/inspector/#task=${asking}`)
  await page.locator(".message.from-agent", { hasText: "echo: Paris" }).waitFor()
  const shot = await screenshot(page, "inspector.png")
  t.ok(fs.statSync(shot).size > 10_000, `a screenshot of the page: ${path.relative(ROOT, shot)}`)
  t.same(problems, [], "no script error and no CSP violation")
  t.same([...refused], ["404 GET /tasks/no-such-task"], "the one request refused is the missing Task's")
})

t.test("the inspector in chromium pages the list (20 Tasks, then Load more for the rest, newest first) and cancels a running Task", async (t) => {
  const { srv } = await agent(t)
  const ids: string[] = []
  for (let i = 0; i < 23; i++) {
    const res = await fetch(`${srv.url}/message:send`, { method: "POST", headers: V1, body: JSON.stringify({ message: { messageId: `m-${i}`, role: "ROLE_USER", parts: [{ text: `question ${i}` }] } }) })
    ids.push(((await res.json()) as { task: { id: string } }).task.id)
  }
  const { page, problems } = await browserPage(t)
  await page.goto(`${srv.url}/inspector/`)
  await page.locator("#task-count", { hasText: "(23)" }).waitFor()
  t.equal(await taskItems(page).count(), 20, "one page")
  const more = page.getByRole("button", { name: "Load more" })
  await more.click()
  await taskItems(page).nth(22).waitFor()
  await more.waitFor({ state: "hidden" })
  const listed = await page.locator("#task-list li").evaluateAll((nodes) => nodes.map((n) => n.getAttribute("data-task-id")))
  const newestFirst = (await (await fetch(`${srv.url}/tasks?pageSize=100`, { headers: V1 })).json()) as { tasks: Array<{ id: string }> }
  t.same(listed, newestFirst.tasks.map((task) => task.id), "the server's order, each Task once")
  t.same([...listed].sort(), [...ids].sort(), "every Task")

  // A running Task canceled from its detail: the page shows it canceled, and so does the server.
  await send(page, "hold to cancel")
  await page.locator("#detail-meta .live").waitFor()
  const running = await shownTaskId(page)
  await page.getByRole("button", { name: "Cancel Task" }).click()
  await detailChip(page).filter({ hasText: "canceled" }).waitFor()
  await page.getByRole("button", { name: "Cancel Task" }).waitFor({ state: "detached" })
  const canceled = (await (await fetch(`${srv.url}/tasks/${running}`, { headers: V1 })).json()) as { status: { state: string } }
  t.equal(canceled.status.state, "TASK_STATE_CANCELED")
  t.same(problems, [])
})

t.test("the inspector in chromium: a Task that ends before its subscription opens is shown ended, with no error", async (t) => {
  const { srv, held } = await agent(t)
  const res = await fetch(`${srv.url}/message:send`, {
    method: "POST",
    headers: V1,
    body: JSON.stringify({ message: { messageId: "m-late", role: "ROLE_USER", parts: [{ text: "hold late" }] }, configuration: { returnImmediately: true } }),
  })
  const id = ((await res.json()) as { task: { id: string } }).task.id
  const { page, problems, refused } = await browserPage(t)
  // The page's subscription is held in the browser until the Task has ended on the server.
  const asked = deferred()
  const release = deferred()
  await page.route(`**/tasks/${id}:subscribe`, async (route) => {
    asked.resolve()
    await release.promise
    await route.continue()
  })
  await page.goto(`${srv.url}/inspector/#task=${id}`)
  await asked.promise
  t.notOk(await page.locator("#detail-meta .live").isVisible(), "not live before the stream is open")
  await waitFor(() => held.has("hold late"), WAIT, "the Task to reach the model")
  held.get("hold late")!.resolve("done before the stream")
  await waitFor(async () => ((await (await fetch(`${srv.url}/tasks/${id}`, { headers: V1 })).json()) as { status: { state: string } }).status.state === "TASK_STATE_COMPLETED", WAIT, "the Task to end")
  release.resolve()
  await page.locator(".message.from-agent", { hasText: "done before the stream" }).waitFor()
  await detailChip(page).filter({ hasText: "completed" }).waitFor()
  t.ok(await page.getByRole("alert").isHidden(), "no error shown")
  t.same([...refused], [`400 GET /tasks/${id}:subscribe`], "the server refused the late subscription, as it should")
  t.same(problems, [])
})

t.test("the inspector in chromium: an address naming no valid Task id (#task=%E0%A4%A) shows an error, not an uncaught one", async (t) => {
  const { srv } = await agent(t)
  const { page, problems } = await browserPage(t)
  await page.goto(`${srv.url}/inspector/#task=%E0%A4%A`)
  await page.getByRole("alert").filter({ hasText: "is not a valid percent-encoded id" }).waitFor()
  t.match(await page.locator("#error-text").textContent(), /The address names no Task: "#task=%E0%A4%A"/)
  t.same(problems, [], "no page error (an uncaught URIError would be one)")
  await page.evaluate(() => (location.hash = "#task=%ZZ"))
  await page.locator("#error-text", { hasText: "#task=%ZZ" }).waitFor()
  t.same(problems, [], "nor on a later hash change")
})

t.test("the inspector with auth on in chromium: the token prompt, a wrong token refused, one principal's Tasks only", async (t) => {
  const ALICE = "alice-secret-0123456789"
  const BOB = "bob-secret-0123456789ab"
  const { srv } = await agent(t, { auth: { tokens: { [ALICE]: "alice", [BOB]: "bob" } } })
  const sent = await fetch(`${srv.url}/message:send`, {
    method: "POST",
    headers: { ...V1, authorization: `Bearer ${BOB}` },
    body: JSON.stringify({ message: { messageId: "bob-1", role: "ROLE_USER", parts: [{ text: "bob's secret plan" }] } }),
  })
  const bobsTask = ((await sent.json()) as { task: { id: string } }).task.id
  const { page, problems, refused } = await browserPage(t)

  await page.goto(`${srv.url}/inspector/`)
  const dialog = page.getByRole("dialog", { name: "Sign in" })
  await dialog.waitFor()
  await dialog.getByText(/This server needs a token\. Unauthorized: send Authorization: Bearer/).waitFor()
  t.equal(await page.getByLabel("Bearer token").getAttribute("type"), "password", "the token is typed into a password field")
  await screenshot(page, "inspector-sign-in.png")

  // Closed without a token (Escape), the prompt comes back from the header's button.
  await page.keyboard.press("Escape")
  await dialog.waitFor({ state: "hidden" })
  await page.locator("header").getByRole("button", { name: "Sign in" }).click()
  await dialog.waitFor()

  await page.getByLabel("Bearer token").fill("wrong-token-0123456789")
  await dialog.getByRole("button", { name: "Sign in" }).click()
  await dialog.getByText(/The server refused the token: Unauthorized/).waitFor()
  t.ok(await dialog.isVisible(), "a wrong token brings the prompt back, with the server's message")

  await page.getByLabel("Bearer token").fill(ALICE)
  await dialog.getByRole("button", { name: "Sign in" }).click()
  await dialog.waitFor({ state: "hidden" })
  await page.locator("#list-empty").waitFor({ state: "visible" })
  t.equal(await taskItems(page).count(), 0, "bob's Task is not alice's to see")

  await send(page, "alice asks")
  await page.locator(".message.from-agent", { hasText: "echo: alice asks" }).waitFor()
  await page.getByRole("button", { name: "Refresh" }).click()
  await page.locator("#task-count", { hasText: "(1)" }).waitFor()
  t.equal(await taskItems(page).count(), 1, "alice sees her own Task")
  t.equal(await page.locator(`#task-list li[data-task-id="${bobsTask}"]`).count(), 0, "and not bob's")
  t.notMatch(await page.locator("body").textContent(), /bob's secret plan/)

  await page.goto(`${srv.url}/inspector/#task=${bobsTask}`)
  await page.getByRole("alert").filter({ hasText: `Task not found: ${bobsTask}` }).waitFor()
  t.equal(await dialog.isVisible(), false, "signed in still: the token lasts the tab's session")

  t.equal(await page.evaluate(() => sessionStorage.getItem("toolnexus.inspector.token")), ALICE, "kept in sessionStorage")
  t.equal(await page.evaluate(() => localStorage.length), 0, "and nowhere that outlives the tab")
  t.equal(await page.evaluate(() => document.cookie), "")

  await page.getByRole("button", { name: "Forget token" }).click()
  await dialog.waitFor()
  t.equal(await page.evaluate(() => sessionStorage.getItem("toolnexus.inspector.token")), null, "forgotten")
  t.equal(await taskItems(page).count(), 0, "and what it showed is gone from the page")
  t.equal(await page.locator("#detail-title").textContent(), "No Task selected")
  t.notMatch(page.url(), /#task=/, "the address no longer names a Task")

  // Bob's Task is still his, untouched by alice's visit.
  const bobsList = (await (await fetch(`${srv.url}/tasks`, { headers: { ...V1, authorization: `Bearer ${BOB}` } })).json()) as { tasks: Array<{ id: string }> }
  t.same(
    bobsList.tasks.map((task) => task.id),
    [bobsTask],
  )
  t.same(problems, [], "no script error and no CSP violation")
  t.same([...refused].sort(), ["401 GET /tasks", `404 GET /tasks/${bobsTask}`], "refused: the list without a token or with a wrong one, and bob's Task")
})
