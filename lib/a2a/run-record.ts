import type { Context } from "@opentelemetry/api"
import type { Client } from "../client/client.js"
import type { Logger } from "../log.js"
import type { TaskStore } from "../stores/task-store.js"
import type { Toolkit } from "../tools/types.js"
import type { A2AArtifact, A2ATask } from "../types.js"
import type { EventQueue, TaskEvents } from "../streams/events.js"
import type { EventRecorder } from "../streams/event-recorder.js"
import type { Telemetry } from "../observe/telemetry.js"
import type { AgentFunction } from "./agent.js"
import type { ProgressSaves } from "./progress-saves.js"
import type { StreamedAnswer } from "./streamed-answer.js"
import type { SaveTransition } from "./transitions.js"

/** The task runner's options, what it is asked and answers, and a run as it holds it. */

export interface TaskRunnerOptions {
  store: TaskStore
  /** Answers each Task; or `client` (and `toolkit`) for the built-in tool-calling loop, toolLoopAgent. */
  agent?: AgentFunction
  client?: Client
  toolkit?: Toolkit
  log: Logger
  events: TaskEvents
  /** Tasks run at once; more wait in a queue, still `submitted` (default 32). */
  maxRunning?: number
  /** Tasks that may wait; beyond it a new task is refused (default 1000). */
  maxQueued?: number
  /** Largest Task, in UTF-8 bytes of its JSON: a message that would pass it is refused, an answer that would is not kept (default 4 MiB). */
  maxTaskBytes?: number
  /** How each state change is written (with push on, with its notifications: transitionSaver); default `store.save`. */
  saveTransition?: SaveTransition
  /**
   * Writes the events streams are sent to the store's event log (when it has one), so a dropped
   * stream can resume: every Task's, when other servers read the log (`everyTask`), else a Task's
   * from its first stream on, the only ones a peer can ask for again (it resumes after an id it was sent).
   */
  recorder?: EventRecorder
  /** While the model writes, the answer so far is saved at most this often, so GetTask shows it (default 250 ms; 0: after every chunk). */
  progressSaveMs?: number
  /** Hears each run, state change, model call and tool call; omitted, spans only. */
  telemetry?: Telemetry
}

/** How often, at most, a streamed answer's text so far is saved while the model writes. */
export const DEFAULT_PROGRESS_SAVE_MS = 250

/** Who asked for a task, and whether they want its events. */
export interface StartOptions {
  /** The authenticated principal; the Task is visible only to it. */
  principal?: string
  /** The tenant a new Task is created under (a 1.0 request's `tenant`); null or omitted: none. A continued Task keeps its own. */
  tenant?: string | null
  /**
   * The owners whose Tasks of the same context may reach the model's history: what the caller may
   * read (ownersVisibleTo). Omitted: ownersVisibleTo(principal), the principal's own Tasks.
   */
  historyOwners?: ReadonlyArray<string | null>
  /** Subscribe to the task's events before it starts (for streams). */
  watch?: boolean
  /** Runs once the Task's id is known, before its first save: an inline push config is stored there, so no notification is missed. */
  beforeSave?: (taskId: string) => Promise<void>
}

/** A started or resumed task: the Task as first saved, and what it settles into. */
export interface StartedTask {
  task: A2ATask
  /** Resolves with the Task once it is terminal or waits for input; never rejects. */
  settled: Promise<A2ATask>
  /** The task's events from the first one on, when `watch` was asked for. */
  events?: EventQueue
}

/** A Task running here as it stands this instant: the answer streamed so far included, and the position of its last event. */
export interface CurrentTask {
  task: A2ATask
  position: number
}


/** A final save that failed, waiting for its next try. */
export interface PendingFinalSave {
  record: Running
  final: A2ATask
  artifact?: A2AArtifact
  /** Tries so far. */
  attempt: number
  /** The wait before the next try; undefined while a try is under way. */
  timer?: NodeJS.Timeout
  /** The latest try: under way, or settled (the first, failed one, until the timer starts the next). */
  saving: Promise<void>
}

/** One run of a task in this process, queued or going. */
export interface Running {
  task: A2ATask
  controller: AbortController
  /** Set once the run's last state is being written: nothing is saved after it. */
  finished: boolean
  /** The Task's size when launched, in UTF-8 bytes of its JSON, or a bound above it (see bytesOf). */
  bytes: number
  lookUpContext: boolean
  /** Whose earlier Tasks of the context the model may see (undefined: everyone's, without authentication). */
  historyOwners: ReadonlyArray<string | null> | undefined
  /** Registered while its first save is awaited (a follow-up's): neither running nor queued yet. */
  unscheduled: boolean
  settled: Promise<A2ATask>
  settle: () => void
  /** The position of the last event published (0: none yet). */
  position: number
  /** The answer the agent streams, from its first chunk on. */
  answer?: StreamedAnswer
  /** The ids of the artifacts the agent added in this run (ctx.artifact), in order: push sends them with the run's last state. */
  added: string[]
  /** A bound on the bytes those artifacts add to the Task. */
  addedBytes: number
  /** The working status messages being saved (ctx.status), one after the other. */
  writes: Promise<void>
  /** Why the run was stopped for passing maxTaskBytes, once it was. */
  overLimit?: string
  /** Saves of the answer so far, from its first chunk on. */
  progress?: ProgressSaves
  /** Its events go to the event log: every Task's do (recorder.everyTask), or a stream follows it. */
  logged: boolean
  /** The trace context of the request that started it: its run is traced under it, whenever the run begins. */
  traceContext: Context
}

/** ISO-8601 UTC now; formatted once per millisecond, as a busy server asks many times in one (3% of SendMessage CPU). */
let lastMs = -1
let lastIso = ""
export const now = (): string => {
  const ms = Date.now()
  if (ms !== lastMs) {
    lastMs = ms
    lastIso = new Date(ms).toISOString()
  }
  return lastIso
}

