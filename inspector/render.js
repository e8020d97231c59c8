// What the page shows, built as DOM nodes from A2A 1.0 objects. Text from the server only ever
// becomes text nodes (textContent), never markup: a Task's content is whatever peers sent.

/** The 1.0 states, in the order the filter lists them, with the label and colour family each chip gets. */
export const STATES = [
  ["TASK_STATE_SUBMITTED", "submitted", "waiting"],
  ["TASK_STATE_WORKING", "working", "running"],
  ["TASK_STATE_INPUT_REQUIRED", "input required", "asking"],
  ["TASK_STATE_AUTH_REQUIRED", "auth required", "asking"],
  ["TASK_STATE_COMPLETED", "completed", "done"],
  ["TASK_STATE_FAILED", "failed", "bad"],
  ["TASK_STATE_CANCELED", "canceled", "stopped"],
  ["TASK_STATE_REJECTED", "rejected", "bad"],
]
const BY_STATE = new Map(STATES.map(([state, label, tone]) => [state, { label, tone }]))

/** States a Task never leaves. */
const TERMINAL = new Set(["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"])

export const isTerminal = (state) => TERMINAL.has(state)
/** A stream of the Task stops here: it ended, or waits for its peer. */
export const isFinalForNow = (state) => isTerminal(state) || state === "TASK_STATE_INPUT_REQUIRED" || state === "TASK_STATE_AUTH_REQUIRED"

/**
 * An element with attributes (`class`, `text` for its text, `on<event>` for listeners, others
 * as attributes; undefined and false are left out) and children (nodes or strings).
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false || value === null) continue
    if (key === "text") node.textContent = value
    else if (key === "class") node.className = value
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value)
    else node.setAttribute(key, value === true ? "" : String(value))
  }
  for (const child of children) if (child !== undefined && child !== null && child !== false) node.append(child)
  return node
}

export function stateChip(state) {
  const known = BY_STATE.get(state) ?? { label: String(state ?? "unknown").replace(/^TASK_STATE_/, "").toLowerCase(), tone: "waiting" }
  return el("span", { class: `chip chip-${known.tone}`, "data-state": state, text: known.label })
}

/** A timestamp in the reader's time zone, the exact ISO time on hover and in `datetime`. */
export function timeView(iso) {
  if (!iso) return el("span", { class: "muted", text: "no time" })
  const date = new Date(iso)
  const shown = Number.isNaN(date.getTime()) ? iso : date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" })
  return el("time", { datetime: iso, title: iso, text: shown })
}

/** The first text of a message's parts, on one line, for previews. */
export function textOf(message) {
  const part = message?.parts?.find((p) => typeof p.text === "string")
  return part ? part.text.replace(/\s+/g, " ").trim() : ""
}

/** A message's parts: text as text, data as JSON, files by name (a link only for http(s) URLs). */
export function partsView(parts = []) {
  const box = el("div", { class: "parts" })
  for (const part of parts) {
    if (typeof part.text === "string") box.append(el("p", { class: "part-text", text: part.text }))
    else if (part.data !== undefined) box.append(el("pre", { class: "part-data", text: JSON.stringify(part.data, null, 2) }))
    else if (typeof part.url === "string") {
      const name = part.filename || part.url
      const safe = /^https?:\/\//i.test(part.url)
      box.append(el("p", { class: "part-file" }, safe ? el("a", { href: part.url, rel: "noreferrer noopener", target: "_blank", text: name }) : name, mediaType(part)))
    } else if (typeof part.raw === "string") {
      box.append(el("p", { class: "part-file", text: `${part.filename || "file"} (${Math.floor((part.raw.length * 3) / 4)} bytes inline)` }, mediaType(part)))
    } else box.append(el("pre", { class: "part-data", text: JSON.stringify(part) }))
  }
  return box
}

const mediaType = (part) => (part.mediaType ? el("span", { class: "muted", text: ` ${part.mediaType}` }) : undefined)

/** One message of the conversation: who sent it, and its parts; `note` says what else it is (the Task's status message). */
export function messageView(message, note) {
  const agent = message.role === "ROLE_AGENT"
  return el(
    "li",
    { class: `message ${agent ? "from-agent" : "from-user"}`, "data-role": agent ? "agent" : "user" },
    el("div", { class: "message-who", text: `${agent ? "Agent" : "User"}${note ? ` · ${note}` : ""}` }),
    partsView(message.parts),
  )
}

/** A Task in the list: a button that selects it. */
export function taskListItem(task, { selected, onSelect }) {
  const messages = task.history ?? []
  const preview = textOf([...messages].reverse().find((m) => m.role === "ROLE_USER")) || textOf(messages.at(-1)) || textOf(task.status?.message) || "(no text)"
  return el(
    "li",
    { "data-task-id": task.id },
    el(
      "button",
      { type: "button", class: "task-item", "aria-current": selected ? "true" : false, onclick: () => onSelect(task.id) },
      el("span", { class: "task-item-top" }, stateChip(task.status?.state), timeView(task.status?.timestamp)),
      el("span", { class: "task-item-text", text: preview }),
      el("span", { class: "task-item-id mono", text: task.id }),
    ),
  )
}

/** One artifact: its name (or id), description and parts. */
export function artifactView(artifact) {
  return el(
    "li",
    { class: "artifact" },
    el("div", { class: "artifact-name" }, el("strong", { text: artifact.name || "artifact" }), el("span", { class: "muted mono", text: ` ${artifact.artifactId ?? ""}` })),
    artifact.description ? el("p", { class: "muted", text: artifact.description }) : undefined,
    partsView(artifact.parts),
  )
}

/** One status in the timeline: its state, its time, and its message when it has one. */
export function statusView(status, note) {
  return el(
    "li",
    { class: "status", "data-state": status.state },
    stateChip(status.state),
    timeView(status.timestamp),
    note ? el("span", { class: "muted", text: ` ${note}` }) : undefined,
    status.message ? partsView(status.message.parts) : undefined,
  )
}
