// The task inspector: what the page holds (the listed Tasks, the one shown, the one followed) and
// how it answers the reader. It reads and writes only through the server's A2A REST routes.
import { A2ARest, ApiError } from "./a2a-rest.js"
import { artifactView, el, isFinalForNow, isTerminal, messageView, STATES, stateChip, statusView, taskListItem, timeView } from "./render.js"

const TOKEN_KEY = "toolnexus.inspector.token"
const PAGE_SIZE = 20
const AUTO_REFRESH_MS = 5000
/** Enough of each listed Task's history for its preview: the last question and its answer. */
const PREVIEW_HISTORY = 2

const $ = (id) => document.getElementById(id)

/** The page is served at `<routes>/inspector/`: the A2A routes are one folder up. */
const api = new A2ARest(new URL("..", location.href), {
  token: () => sessionStorage.getItem(TOKEN_KEY) ?? "",
  tenant: () => $("filter-tenant").value.trim(),
})

const page = {
  /** The listed Tasks by id, and their order. */
  tasks: new Map(),
  order: [],
  nextPageToken: "",
  /** How many Tasks match the filters, as the server last counted them, plus those this page created since. @type {number | undefined} */
  total: undefined,
  /** The Task shown, as last read or updated by its stream. */
  selected: undefined,
  shown: undefined,
  /** The statuses seen of each Task, for its timeline. */
  statuses: new Map(),
  /** The stream followed for the shown Task, how to stop it, and whether it is open (its first event came). */
  following: undefined,
  /** Bumps on each list load, so an older answer arriving late is dropped. */
  listRun: 0,
  /** The server asked for a token (a 401 came): the header then offers to sign in. */
  authNeeded: false,
}

// ---------------------------------------------------------------------------
// Errors and the token

function showError(err) {
  if (err instanceof ApiError && err.status === 401) return askForToken(err.message)
  $("error-text").textContent = err instanceof Error ? err.message : String(err)
  $("error").hidden = false
}

function clearError() {
  $("error").hidden = true
}

/** The sign-in dialog, saying why (the server's 401 message); a token is asked for only once at a time. */
function askForToken(reason) {
  page.authNeeded = true
  const dialog = $("sign-in")
  const hadToken = Boolean(sessionStorage.getItem(TOKEN_KEY))
  $("sign-in-reason").textContent = hadToken ? `The server refused the token: ${reason}` : `This server needs a token. ${reason}`
  showTokenState()
  if (!dialog.open) dialog.showModal()
  $("token").focus()
}

function showTokenState() {
  const has = Boolean(sessionStorage.getItem(TOKEN_KEY))
  $("token-state").hidden = !has
  $("forget-token").hidden = !has
  $("open-sign-in").hidden = has || !page.authNeeded
}

// The prompt closed without a token (Escape): the header's button opens it again.
$("open-sign-in").addEventListener("click", () => {
  if (!$("sign-in").open) $("sign-in").showModal()
})

$("sign-in-form").addEventListener("submit", (event) => {
  event.preventDefault()
  const token = $("token").value.trim()
  if (!token) return
  sessionStorage.setItem(TOKEN_KEY, token)
  $("token").value = ""
  $("sign-in").close()
  showTokenState()
  clearError()
  void reloadAll()
})

$("forget-token").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY)
  stopFollowing()
  // Nothing the token showed stays on the page.
  page.tasks.clear()
  page.order = []
  page.total = undefined
  page.statuses.clear()
  history.replaceState(null, "", location.pathname + location.search)
  void select(undefined)
  renderList()
  showTokenState()
  void loadList()
})

$("error-dismiss").addEventListener("click", clearError)

// ---------------------------------------------------------------------------
// The list

function filters() {
  return { status: $("filter-state").value || undefined, contextId: $("filter-context").value.trim() || undefined }
}

/** The first page of Tasks (or the next one, `more`), under the filters. */
async function loadList(more = false) {
  const run = ++page.listRun
  $("refresh").disabled = true
  try {
    const answer = await api.listTasks({ ...filters(), pageSize: PAGE_SIZE, historyLength: PREVIEW_HISTORY, pageToken: more ? page.nextPageToken : undefined })
    if (run !== page.listRun) return
    if (!more) {
      page.tasks.clear()
      page.order = []
    }
    for (const task of answer.tasks ?? []) {
      if (!page.tasks.has(task.id)) page.order.push(task.id)
      page.tasks.set(task.id, task)
      noteStatus(task)
    }
    page.nextPageToken = answer.nextPageToken ?? ""
    page.total = typeof answer.totalSize === "number" ? answer.totalSize : undefined
    renderList()
  } catch (err) {
    if (run === page.listRun) showError(err)
  } finally {
    if (run === page.listRun) $("refresh").disabled = false
  }
}

function renderList() {
  const list = $("task-list")
  list.replaceChildren(...page.order.map((id) => taskListItem(page.tasks.get(id), { selected: id === page.selected, onSelect: (chosen) => (location.hash = `task=${encodeURIComponent(chosen)}`) })))
  $("task-count").textContent = page.total === undefined ? "" : `(${page.total})`
  $("list-empty").hidden = page.order.length > 0
  $("more").hidden = !page.nextPageToken
}

/** A Task the page learned more of (its stream, a read): the list shows it, a new one on top. */
function updateListed(task) {
  const known = page.tasks.get(task.id)
  if (!known && !matchesFilters(task)) return
  if (!known) {
    page.order.unshift(task.id)
    if (page.total !== undefined) page.total += 1
  }
  page.tasks.set(task.id, known ? { ...known, ...task, history: task.history ?? known.history } : task)
  renderList()
}

function matchesFilters(task) {
  const { status, contextId } = filters()
  return (!status || task.status?.state === status) && (!contextId || task.contextId === contextId)
}

$("filters").addEventListener("submit", (event) => {
  event.preventDefault()
  void loadList()
})
$("clear-filters").addEventListener("click", () => {
  $("filters").reset()
  void loadList()
})
$("refresh").addEventListener("click", () => void reloadAll())
$("more").addEventListener("click", () => void loadList(true))

// While ticked, the first page is read again now and then: new Tasks and changed states show without a click.
// It waits while the tab is hidden, the sign-in prompt is open, or the reader has loaded more pages (a reload would drop them).
setInterval(() => {
  const quiet = document.visibilityState === "visible" && !$("sign-in").open && page.order.length <= PAGE_SIZE
  if ($("auto-refresh").checked && quiet) void loadList()
}, AUTO_REFRESH_MS)

// ---------------------------------------------------------------------------
// One Task

/** Remembers a status of a Task for its timeline (once per state and time). */
function noteStatus(task) {
  const status = task.status
  if (!status?.state) return
  const seen = page.statuses.get(task.id) ?? []
  if (!seen.some((s) => s.state === status.state && s.timestamp === status.timestamp)) seen.push(status)
  page.statuses.set(task.id, seen)
}

/** Shows a Task (undefined: none), reading it from the server, and follows it while it runs. */
async function select(id) {
  if (id === page.selected && page.shown) return
  stopFollowing()
  page.selected = id
  page.shown = undefined
  renderDetail()
  renderList()
  if (id === undefined) return
  try {
    const task = await api.getTask(id)
    if (page.selected !== id) return
    show(task)
    if (!isFinalForNow(task.status?.state)) void follow(id, (signal) => api.subscribe(id, signal))
  } catch (err) {
    if (page.selected !== id) return
    // Nothing to show: the pane goes back to its invitation, and the error says why.
    page.selected = undefined
    renderDetail()
    renderList()
    showError(err)
  }
}

function show(task) {
  noteStatus(task)
  page.shown = task
  renderDetail()
}

function stopFollowing() {
  page.following?.controller.abort()
  page.following = undefined
}

/**
 * Reads a Task's stream (a sent message's, or a subscription) into the page until it stops or the
 * reader picks another Task; `onTask` hears of the Task as soon as the stream names it.
 */
async function follow(id, open, onTask) {
  const controller = new AbortController()
  if (id !== undefined) {
    stopFollowing()
    page.following = { id, controller }
  }
  let taskId = id
  let failure
  try {
    for await (const event of open(controller.signal)) {
      if (event.task) {
        taskId = event.task.id
        if (page.following?.controller !== controller) {
          stopFollowing()
          page.following = { id: taskId, controller }
        }
        page.following.open = true
        onTask?.(event.task)
      }
      apply(taskId, event)
    }
  } catch (err) {
    if (!controller.signal.aborted) failure = err
  } finally {
    if (page.following?.controller === controller) page.following = undefined
  }
  // The stream ended: the stored Task is the whole truth (full history, final artifacts).
  let latest
  if (taskId !== undefined && page.selected === taskId && !controller.signal.aborted) {
    try {
      latest = await api.getTask(taskId)
      if (page.selected === taskId) show(latest)
      updateListed(latest)
    } catch (err) {
      failure ??= err
    }
  }
  // A Task that ended between its read and the subscription is refused a stream (-32004): shown as it ended, that is no error.
  const endedMeanwhile = failure instanceof ApiError && failure.reason === "UNSUPPORTED_OPERATION" && id !== undefined && isTerminal(latest?.status?.state)
  if (failure && !endedMeanwhile) showError(failure)
  renderDetail()
}

/** One stream event folded into the Task it is about. */
function apply(taskId, event) {
  let task = event.task ?? (page.shown?.id === taskId ? page.shown : page.tasks.get(taskId))
  if (!task) return
  task = structuredClone(task)
  if (event.statusUpdate) task.status = event.statusUpdate.status
  if (event.artifactUpdate) task.artifacts = withArtifact(task.artifacts ?? [], event.artifactUpdate)
  if (event.message) task.history = [...(task.history ?? []), event.message]
  noteStatus(task)
  if (page.selected === taskId) show(task)
  updateListed({ id: task.id, contextId: task.contextId, status: task.status, history: task.history })
}

/** An artifact update: a new artifact, one replaced, or (append) its parts added, text joined to text. */
function withArtifact(artifacts, { artifact, append }) {
  const at = artifacts.findIndex((a) => a.artifactId === artifact.artifactId)
  if (at === -1) return [...artifacts, artifact]
  if (!append) return artifacts.map((a, i) => (i === at ? artifact : a))
  const old = artifacts[at]
  const parts = [...(old.parts ?? [])]
  for (const part of artifact.parts ?? []) {
    const last = parts.at(-1)
    if (typeof part.text === "string" && typeof last?.text === "string") parts[parts.length - 1] = { ...last, text: last.text + part.text }
    else parts.push(part)
  }
  return artifacts.map((a, i) => (i === at ? { ...old, parts } : a))
}

function renderDetail() {
  const task = page.shown
  $("detail-empty").hidden = task !== undefined
  $("detail-body").hidden = task === undefined
  $("detail-title").textContent = task ? `Task ${task.id}` : page.selected ? "Loading…" : "No Task selected"
  renderComposeContext()
  if (!task) {
    $("detail-meta").replaceChildren()
    return
  }
  const live = page.following?.id === task.id && page.following.open === true
  const state = task.status?.state
  const meta = [
    stateChip(state),
    el("span", { class: "meta-item" }, "updated ", timeView(task.status?.timestamp)),
    el(
      "span",
      { class: "meta-item" },
      "context ",
      el("button", { type: "button", class: "link mono", title: "List this context's Tasks", onclick: () => filterByContext(task.contextId), text: task.contextId }),
    ),
    live && el("span", { class: "live", text: "● live", title: "Following the Task's stream" }),
    !isTerminal(state) && el("button", { type: "button", id: "cancel-task", onclick: () => void cancel(task.id), text: "Cancel Task" }),
  ]
  $("detail-meta").replaceChildren(...meta.filter(Boolean))

  const history = task.history ?? []
  const statusMessage = task.status?.message
  const views = history.map((message) => messageView(message))
  if (statusMessage && !history.some((m) => m.messageId === statusMessage.messageId)) views.push(messageView(statusMessage, `status message (${stateChip(state).textContent})`))
  const conversation = $("conversation")
  // New messages (an answer came) scroll into view; a re-render of the same ones keeps the reader's place.
  const grew = conversation.dataset.task !== task.id || Number(conversation.dataset.count) < views.length
  conversation.replaceChildren(...views)
  if (views.length === 0) conversation.append(el("li", { class: "muted", text: "No messages." }))
  conversation.dataset.task = task.id
  conversation.dataset.count = String(views.length)
  if (grew && views.length > 0) conversation.parentElement.scrollTop = conversation.parentElement.scrollHeight

  const artifacts = task.artifacts ?? []
  $("artifacts").replaceChildren(...artifacts.map(artifactView))
  $("artifacts-empty").hidden = artifacts.length > 0

  const statuses = [...(page.statuses.get(task.id) ?? [])].sort((a, b) => String(a.timestamp).localeCompare(String(b.timestamp)))
  $("timeline").replaceChildren(...statuses.map((status) => statusView(status)))
  $("timeline-note").hidden = statuses[0]?.state === "TASK_STATE_SUBMITTED"
}

function filterByContext(contextId) {
  $("filter-context").value = contextId
  void loadList()
}

async function cancel(id) {
  try {
    const task = await api.cancelTask(id)
    if (page.selected === id) show(task)
    updateListed(task)
  } catch (err) {
    showError(err)
  }
}

// ---------------------------------------------------------------------------
// Sending

/** What the compose box sends with: nothing (a new context), the shown Task's context, or the Task itself when it waits for input. */
function renderComposeContext() {
  const task = page.shown
  const label = $("compose-context-label")
  label.hidden = !task
  if (!task) return
  const asks = task.status?.state === "TASK_STATE_INPUT_REQUIRED"
  $("compose-context-text").textContent = asks ? "Answer this Task (it asks for input)" : "In this Task's context (the agent sees its conversation)"
  // Another Task shown starts unticked; a question asked (now, or when it is shown) ticks it, once: the reader may untick it.
  const asked = asks ? "yes" : "no"
  if (label.dataset.for !== task.id) $("compose-context").checked = asks
  else if (asks && label.dataset.asked !== asked) $("compose-context").checked = true
  label.dataset.for = task.id
  label.dataset.asked = asked
}

/** A UUID for the message: crypto.randomUUID exists only on https or localhost pages, getRandomValues everywhere. */
function newMessageId() {
  if (crypto.randomUUID) return crypto.randomUUID()
  const b = crypto.getRandomValues(new Uint8Array(16))
  b[6] = (b[6] & 0x0f) | 0x40
  b[8] = (b[8] & 0x3f) | 0x80
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

async function send() {
  const text = $("compose-text").value.trim()
  if (!text) return
  const task = page.shown
  const message = { messageId: newMessageId(), role: "ROLE_USER", parts: [{ text }] }
  if (task && $("compose-context").checked) {
    message.contextId = task.contextId
    if (task.status?.state === "TASK_STATE_INPUT_REQUIRED") message.taskId = task.id
  }
  $("send").disabled = true
  $("compose-state").textContent = "Sending…"
  clearError()
  let started = false
  await follow(undefined, (signal) => api.sendStreaming(message, signal), (created) => {
    if (started) return
    started = true
    $("compose-text").value = ""
    $("compose-state").textContent = ""
    $("send").disabled = false
    page.selected = created.id
    if (location.hash !== `#task=${encodeURIComponent(created.id)}`) history.replaceState(null, "", `#task=${encodeURIComponent(created.id)}`)
    updateListed(created)
  })
  if (!started) {
    $("compose-state").textContent = ""
    $("send").disabled = false
  }
}

$("compose").addEventListener("submit", (event) => {
  event.preventDefault()
  void send()
})
$("compose-text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault()
    $("compose").requestSubmit()
  }
})

// ---------------------------------------------------------------------------
// Start

/** The Task the address names (#task=<id>), or undefined; a fragment that is no valid percent-encoding is reported, not thrown. */
function selectedFromHash() {
  const match = /^#task=(.+)$/.exec(location.hash)
  if (!match) return undefined
  try {
    return decodeURIComponent(match[1])
  } catch {
    showError(new Error(`The address names no Task: "#task=${match[1].slice(0, 80)}" is not a valid percent-encoded id`))
    return undefined
  }
}

window.addEventListener("hashchange", () => void select(selectedFromHash()))

async function reloadAll() {
  await loadList()
  const id = page.selected ?? selectedFromHash()
  page.shown = undefined
  if (id !== undefined) await select(id)
}

for (const [state, label] of STATES) $("filter-state").append(el("option", { value: state, text: label }))
showTokenState()
api.card().then(
  (card) => {
    $("agent-name").textContent = card?.name ? `· ${card.name}` : ""
    if (card?.name) document.title = `${card.name} · Task inspector`
  },
  () => {}, // The card is only the heading: the list's own call reports what is wrong.
)
void reloadAll()
