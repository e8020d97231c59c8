import { positionOf } from "../internals.js"
import type { EventLog } from "./event-log.js"
import type { A2ATask } from "../types.js"
import { A2AError, ErrorCode, truncate } from "../a2a/errors.js"
import type { EventRecorder } from "./event-recorder.js"
import { artifactEvent, statusEvent, type PositionedEvent, type TaskEvent } from "./events.js"
import { isFinalForNow } from "../a2a/states.js"
import type { WireCodec } from "../a2a/wire.js"

/**
 * A Task's stream as every binding sends it: the Task first, then its
 * events, each with its position in the Task's event log (the SSE `id:`),
 * and how a stream resumes after `Last-Event-ID` from that log.
 */

/** One result of a stream, and the id it goes out with (none for an event no log numbers). */
export interface StreamItem {
  id?: number
  result: unknown
}

/** Events read from the log per call while replaying. */
const REPLAY_PAGE = 500

/** The `Last-Event-ID` header as a position: undefined when absent; -32602 when it is not one this server could have sent. */
export function parseLastEventId(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined
  const value = Array.isArray(header) ? header.at(-1) : header
  const position = value !== undefined && /^\s*\d{1,15}\s*$/.test(value) ? Number(value) : NaN
  if (!Number.isSafeInteger(position)) {
    throw new A2AError(ErrorCode.InvalidParams, `Invalid params: the Last-Event-ID header should be the id of the last event received (a whole number), got ${JSON.stringify(truncate(String(value), 40))}`, {
      field: "Last-Event-ID",
    })
  }
  return position
}

/** The log no longer holds what comes after `after` (or never will): the peer re-reads the Task. */
export function eventsNotKept(taskId: string, after: number): A2AError {
  return new A2AError(
    ErrorCode.InvalidParams,
    `Invalid params: the events of task ${truncate(taskId)} after Last-Event-ID ${after} are no longer kept; read the task with GetTask and subscribe again without Last-Event-ID`,
    { field: "Last-Event-ID", taskId: truncate(taskId) },
  )
}

/** Resuming needs a store that logs events. */
export function cannotResume(): A2AError {
  return new A2AError(
    ErrorCode.UnsupportedOperation,
    "This agent's task store keeps no stream events, so a stream cannot be resumed with Last-Event-ID; read the task with GetTask and subscribe again without it",
  )
}

/**
 * The Task first (with id `firstId`), then its events, until a state that
 * ends the stream. A Task already final for now is the Task alone, unless
 * `events` replay what led to it (`replays`: a resume from an earlier id).
 * Leaving the loop closes `events`.
 */
export async function* taskStream(first: A2ATask, firstId: number | undefined, events: AsyncIterable<PositionedEvent>, codec: WireCodec, replays = false): AsyncIterable<StreamItem> {
  const doneAtOnce = !replays && isFinalForNow(first.status.state)
  yield item(firstId, codec.streamEvent({ type: "task", task: first }, doneAtOnce))
  if (doneAtOnce) return
  for await (const { position, event } of events) {
    const final = endsStream(event)
    yield item(position, codec.streamEvent(event, final))
    if (final) return
  }
}

const item = (id: number | undefined, result: unknown): StreamItem => (id === undefined || id === 0 ? { result } : { id, result })

/** A status that ends a stream: terminal, or waiting on the peer. */
export function endsStream(event: TaskEvent): boolean {
  return event.type === "status" && isFinalForNow(event.status.state)
}

/**
 * The logged events of a Task after `after`, up to `upTo` when given, in
 * order; every position in between must be there (positions are dense), so
 * a missing one rejects with eventsNotKept. Events this process published
 * but has not yet written are waited for first.
 */
export async function* loggedEvents(log: EventLog, recorder: EventRecorder | undefined, taskId: string, after: number, upTo = Infinity): AsyncIterable<PositionedEvent> {
  await recorder?.flushed(taskId)
  let last = after
  while (last < upTo) {
    const page = await log.read(taskId, last, REPLAY_PAGE)
    for (const { position, event } of page) {
      if (position > upTo) return
      if (position !== last + 1) throw eventsNotKept(taskId, last)
      last = position
      yield { position, event: event as unknown as TaskEvent }
    }
    if (page.length < REPLAY_PAGE) {
      // The log ends before `upTo`: what was published here and up to it is lost.
      if (upTo !== Infinity && last < upTo) throw eventsNotKept(taskId, last)
      return
    }
  }
}

/**
 * A resumed stream of a Task running here: the logged events after `after`
 * up to `upTo` (the position its snapshot was taken at), then the live
 * events past it. The live subscription was taken with the snapshot, so
 * nothing falls between.
 */
export async function* replayThenLive(
  log: EventLog,
  recorder: EventRecorder | undefined,
  taskId: string,
  after: number,
  upTo: number,
  live: AsyncIterable<PositionedEvent>,
): AsyncIterable<PositionedEvent> {
  yield* loggedEvents(log, recorder, taskId, after, upTo)
  for await (const event of live) if (event.position === 0 || event.position > upTo) yield event
}

/**
 * Reads of a log, LOG_RETRY_MS apart, for events another server may still be
 * writing (it saves the Task, then writes its events in batches), before
 * they count as missing.
 */
export const LOG_RETRIES = 20
export const LOG_RETRY_MS = 100

/**
 * Rejects with eventsNotKept unless the log holds the event after `after`
 * (a resume from before the Task's last position). Events this process
 * published are waited for; with `patient`, so are another server's (it
 * saved the Task, and writes its log just after), a few reads.
 */
export async function assertResumable(log: EventLog, recorder: EventRecorder | undefined, taskId: string, after: number, patient: boolean): Promise<void> {
  await recorder?.flushed(taskId)
  for (let tries = 1; (await log.read(taskId, after, 1))[0]?.position !== after + 1; tries++) {
    if (!patient || tries >= LOG_RETRIES) throw eventsNotKept(taskId, after)
    await new Promise((resolve) => setTimeout(resolve, LOG_RETRY_MS))
  }
}

/**
 * The last position of a Task running elsewhere, for a resume after
 * `after`: its stored position, or its log's when that is ahead (chunks
 * between two saves). An `after` past both is waited for a moment while the
 * Task runs (its server writes its log in batches); the caller refuses one
 * still past it.
 */
export async function resumePoint(log: EventLog, task: A2ATask, after: number): Promise<number> {
  let position = Math.max(positionOf(task), await log.lastPosition(task.id))
  for (let tries = 1; after > position && !isFinalForNow(task.status.state) && tries <= LOG_RETRIES; tries++) {
    await new Promise((resolve) => setTimeout(resolve, LOG_RETRY_MS))
    position = Math.max(position, await log.lastPosition(task.id))
  }
  return position
}

/**
 * The end of a Task whose log lacks it (recovered as failed, canceled by a
 * server that did not log it, or its last events never written), from the
 * Task as stored: the artifacts it has beyond those of the stream's first
 * frame, sent whole, then its status.
 */
export function endFromStore(first: A2ATask, task: A2ATask, last: number): PositionedEvent[] {
  return [...addedArtifacts(first, task), { position: Math.max(last, positionOf(task)), event: statusEvent(task) }]
}

/** The artifacts `task` has beyond those of `before` (a stored state seen earlier), as events that send each whole; no log numbers them. */
export function addedArtifacts(before: A2ATask, task: A2ATask): PositionedEvent[] {
  const from = before.artifacts?.length ?? 0
  return (task.artifacts ?? []).slice(from).map((artifact, i) => {
    // Named as taskToV1 names an id-less artifact, by its index.
    const named = artifact.artifactId === undefined ? { ...artifact, artifactId: `artifact-${from + i}` } : artifact
    return { position: 0, event: artifactEvent(task, named) }
  })
}
