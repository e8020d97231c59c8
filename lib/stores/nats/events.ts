import type { JsonObject } from "../../types.js"
import { assertAppend, type EventLog, type LoggedEvent } from "../../streams/event-log.js"
import { eventSweeper, type EventLogHost } from "../event-sweep.js"
import { isApiError, lastMessage, nextMessage, STREAM_NOT_FOUND, WRONG_LAST_SEQUENCE } from "./api.js"
import type { RetentionSweeper } from "../retention.js"
import { assertTaskId } from "../task-checks.js"

/**
 * NatsTaskStore's event log (`store.events`), in a JetStream stream of its
 * own, `<name>` (default `<bucket>_events`, subjects `<name>.>`), T being
 * the Task id's key (the same encoding as the Tasks' keys, one subject token):
 *
 * - `<name>.e.T`: the Task's events, one message per append (an append
 *   bigger than the server's max_payload is sent in parts), the message a
 *   JSON array of `{ position, event }` and its last position in the header
 *   `Toolnexus-Last-Position`. Every message is published with
 *   `Nats-Expected-Last-Subject-Sequence`: the stream takes it only if the
 *   subject's last message is still the one the writer knows of, so two
 *   writers of one Task never interleave, and the one that loses reads the
 *   subject's last message and learns which positions the other took (a
 *   position at or below the last one held is not taken). Unlike message-id
 *   dedupe, this holds for any time between the two writes. The writer keeps
 *   the subject's last sequence per Task (10000 Tasks at most), so an append
 *   is one publish; a first append (position 1) expects an empty subject.
 * - `<name>.x.T`: the log ended: one message (published expecting an empty
 *   subject, so a later `ended` does not extend it) whose header
 *   `Toolnexus-Keep-Ms` says how long after it, by the server's clock (its
 *   time of the message), the log goes.
 * - `<name>.clock`: one message (a rollup: the stream is made with rollups
 *   allowed), written to learn the server's time.
 *
 * A read gets the subject's last message first: a resume that missed little
 * is answered from it. One from further back finds the first message it
 * needs by bisecting stream sequences (each step a get of the subject's
 * first message at or after one: about log2 of the sequences the log spans,
 * however many messages it has), then reads on with an ordered consumer.
 * A sweep (unref()-ed timer, a quarter of the retention apart, at most a
 * minute) looks for `x` subjects, reads them, and purges the `e` and `x`
 * subjects of the logs past their time; an append landing after that (a
 * writer that called `ended` before it was done) would start a log with no
 * end, which goes with its Task. `delete` and the Task retention sweep
 * purge both of the Task's subjects.
 */

/*
 * The little of the nats driver the log uses, declared here like the rest of
 * NatsTaskStore's: nats is an optional peer. test/package/declarations.test.ts checks
 * that nats itself fits.
 */

export interface NatsHeaders {
  get(key: string): string
  set(key: string, value: string): void
}

/** A message as a stream read by sequence or subject gives it. */
export interface NatsStoredMsg {
  seq: number
  subject: string
  header: NatsHeaders
  /** The server's time of the message. */
  time: Date
  string(): string
}

/** A message as a consumer delivers it. */
export interface NatsConsumedMsg {
  seq: number
  subject: string
  headers: NatsHeaders | undefined
  info: { pending: number; timestampNanos: number }
  string(): string
}

export interface NatsOrderedConsumer {
  fetch(opts: { max_messages: number; expires: number }): Promise<AsyncIterable<NatsConsumedMsg>>
  delete(): Promise<boolean>
}

export interface NatsEventJetStream {
  publish(subject: string, payload: Uint8Array, opts?: { headers?: NatsHeaders; expect?: { lastSubjectSequence?: number } }): Promise<{ seq: number }>
  consumers: { get(stream: string, opts: { filterSubjects: string; opt_start_seq?: number }): Promise<NatsOrderedConsumer> }
}

export interface NatsEventStreams {
  info(stream: string, opts?: { subjects_filter: string }): Promise<{ config: { subjects?: string[] }; state: { subjects?: Record<string, number> } }>
  add(config: { name: string; subjects: string[]; allow_rollup_hdrs: boolean; description: string }): Promise<unknown>
  /** A message by sequence; with `next_by_subj`, the subject's first at or after it; by `last_by_subj`, the subject's last. */
  getMessage(stream: string, query: { last_by_subj: string } | { seq: number; next_by_subj?: string }): Promise<NatsStoredMsg>
  purge(stream: string, opts: { filter: string; seq?: number }): Promise<{ purged: number }>
}

/** The stream, made ready on a connection. */
export interface NatsEventStream {
  js: NatsEventJetStream
  streams: NatsEventStreams
  headers(): NatsHeaders
  /** The most a message may carry (the server's max_payload). */
  maxPayload: number
}

/** What NatsEventLog needs of its NatsTaskStore. */
export interface NatsEventHost extends EventLogHost {
  /** The stream's name, also its subjects' first token. */
  name: string
  /** The stream on the current connection, created if missing (`openEventStream`). */
  stream(): Promise<NatsEventStream>
}

const LAST_POSITION = "Toolnexus-Last-Position"
const KEEP_MS = "Toolnexus-Keep-Ms"
/** Tries of one append against other writers of its Task. */
const MAX_APPEND_ATTEMPTS = 10
/** Tasks whose subject's last sequence is kept, so their next append needs no read. */
const KNOWN_TAILS = 10_000
/** Bytes of a message kept for its headers: a batch is split so that each part's JSON fits in max_payload less this. */
const HEADER_ROOM = 1024
/** Messages a read asks the consumer for at once, and how long it waits for them. */
const READ_BATCH = 256
const READ_WAIT_MS = 2_000
const CLOCK_RECHECK_MS = 60_000

const encoder = new TextEncoder()

/** The subject's last message as a writer needs it: its stream sequence (0: none) and the position it ends at. */
interface Tail {
  seq: number
  last: number
}

export class NatsEventLog implements EventLog {
  /** An ES private field: its timer stays out of JSON.stringify of the store. */
  readonly #sweeper: RetentionSweeper
  /** The last message of the Tasks this store wrote or read lately, by Task key; oldest first. */
  private readonly tails = new Map<string, Tail>()
  private stopping = false
  /** Server clock minus ours, in ms, as last measured. */
  private clockOffsetMs: number | undefined
  private clockMeasuredAt = 0

  constructor(private readonly host: NatsEventHost) {
    // The timer only: what is due is judged by the server's clock, whatever the cutoff by ours.
    this.#sweeper = eventSweeper(host.retentionMs, () => this.removeExpired(), host.report)
  }

  async append(taskId: string, events: readonly LoggedEvent[]): Promise<number[]> {
    this.host.assertOpen()
    assertAppend(taskId, events)
    const key = this.host.keyOf(taskId)
    if (events.length === 0) return []
    // Serialized before anything is written: an event that is not JSON refuses the whole append.
    const texts = events.map(({ position, event }) => `{"position":${position},"event":${JSON.stringify(event)}}`)
    const stream = await this.host.stream()
    const sizes = texts.map((text) => Buffer.byteLength(text) + 1)
    const room = stream.maxPayload - HEADER_ROOM
    const tooBig = sizes.findIndex((size) => size + 1 > room)
    if (tooBig >= 0) {
      throw new RangeError(`NatsTaskStore's event log takes events of up to ${room - 2} bytes of JSON with their position (the server's max_payload less ${HEADER_ROOM}); the one at position ${events[tooBig].position} has ${sizes[tooBig] - 1}`)
    }
    const subject = `${this.host.name}.e.${key}`
    const known = this.tails.get(key)
    // A Task's first append expects an empty subject: no read before it.
    let tail: Tail | undefined = known ?? (events[0].position === 1 ? { seq: 0, last: 0 } : undefined)
    let checked = false
    let next = 0
    let held: number[] = []
    for (let attempt = 1; ; ) {
      if (tail === undefined) {
        tail = await this.tailOf(stream, subject)
        checked = true
      }
      while (next < events.length && events[next].position <= tail.last) held.push(events[next++].position)
      if (next === events.length) {
        if (!checked && held.length > 0) {
          // Only what this store knew said these were held: read what the subject holds now before saying so.
          tail = undefined
          held = []
          next = 0
          continue
        }
        this.remember(key, tail)
        return held
      }
      let end = next
      let bytes = 1
      while (end < events.length && bytes + sizes[end] <= room) bytes += sizes[end++]
      const headers = stream.headers()
      headers.set(LAST_POSITION, String(events[end - 1].position))
      const payload = encoder.encode(`[${texts.slice(next, end).join(",")}]`)
      try {
        const ack = await stream.js.publish(subject, payload, { headers, expect: { lastSubjectSequence: tail.seq } })
        tail = { seq: ack.seq, last: events[end - 1].position }
        checked = true
        next = end
      } catch (err) {
        this.tails.delete(key)
        if (!isApiError(err, WRONG_LAST_SEQUENCE)) throw err
        // Another writer appended (or the log was removed) since: read what the subject holds now.
        if (++attempt > MAX_APPEND_ATTEMPTS) throw new Error(`NatsTaskStore could not append events of task ${JSON.stringify(taskId.slice(0, 128))}: other writers appended before each of ${MAX_APPEND_ATTEMPTS} tries`, { cause: err })
        tail = undefined
      }
    }
  }

  async read(taskId: string, after: number, limit: number): Promise<LoggedEvent[]> {
    this.host.assertOpen()
    assertTaskId(taskId)
    if (!(limit > 0)) return []
    const key = this.host.keyOf(taskId)
    const stream = await this.host.stream()
    const subject = `${this.host.name}.e.${key}`
    const last = await lastMessage(stream.streams, this.host.name, subject)
    if (last === undefined) return []
    const tail = { seq: last.seq, last: lastPositionOf(last.header, subject) }
    this.remember(key, tail)
    if (tail.last <= after) return []
    const inLast = eventsIn(last.string(), subject)
    // The last message holds every event after `after` when none before it can: a resume that missed little, one read.
    if (inLast[0].position <= after + 1) return inLast.filter((e) => e.position > after).slice(0, limit)
    const from = await this.firstEndingAfter(stream, subject, after, tail.seq)
    const found: LoggedEvent[] = []
    await this.readSubjects(stream, subject, from, (message) => {
      for (const event of eventsIn(message.string(), subject)) if (event.position > after && found.length < limit) found.push(event)
      // Up to the last message seen before: appends since are for the next read.
      return found.length < limit && message.seq < tail.seq
    })
    return found
  }

  async lastPosition(taskId: string): Promise<number> {
    this.host.assertOpen()
    assertTaskId(taskId)
    const key = this.host.keyOf(taskId)
    const stream = await this.host.stream()
    const subject = `${this.host.name}.e.${key}`
    const tail = await this.tailOf(stream, subject)
    if (tail.seq > 0) this.remember(key, tail)
    return tail.last
  }

  async ended(taskId: string): Promise<void> {
    this.host.assertOpen()
    assertTaskId(taskId)
    const key = this.host.keyOf(taskId)
    const stream = await this.host.stream()
    const headers = stream.headers()
    headers.set(KEEP_MS, String(this.host.retentionMs))
    try {
      await stream.js.publish(`${this.host.name}.x.${key}`, new Uint8Array(0), { headers, expect: { lastSubjectSequence: 0 } })
    } catch (err) {
      // Ended before: the first end counts.
      if (!isApiError(err, WRONG_LAST_SEQUENCE)) throw err
    }
    // Its writer is done with it.
    this.tails.delete(key)
  }

  /** Purges the Task's log and its end (a delete or retention of the Task). */
  async removeTask(taskId: string): Promise<void> {
    const key = this.host.keyOf(taskId)
    const stream = await this.host.stream()
    await stream.streams.purge(this.host.name, { filter: `${this.host.name}.*.${key}` })
    this.tails.delete(key)
  }

  /** Starts the sweeps (the store is connected). */
  start(): void {
    this.#sweeper.start()
  }

  /** Stops the sweeps; one under way ends after the log it is at. */
  stop(): Promise<void> {
    this.stopping = true
    return this.#sweeper.stop()
  }

  /** The subject's last message as a writer needs it; { seq: 0, last: 0 } when it has none. */
  private async tailOf(stream: NatsEventStream, subject: string): Promise<Tail> {
    const last = await lastMessage(stream.streams, this.host.name, subject)
    return last === undefined ? { seq: 0, last: 0 } : { seq: last.seq, last: lastPositionOf(last.header, subject) }
  }

  private remember(key: string, tail: Tail): void {
    this.tails.delete(key)
    this.tails.set(key, tail)
    if (this.tails.size > KNOWN_TAILS) this.tails.delete(this.tails.keys().next().value as string)
  }

  /**
   * The sequence of the subject's first message holding a position above
   * `after` (the one at `lastSeq` does): its first message, else a bisection
   * of the sequences between, each probe the subject's first message at or
   * after a sequence. About log2 of the stream's sequences the log spans
   * reads, whatever the number of messages the log has.
   */
  private async firstEndingAfter(stream: NatsEventStream, subject: string, after: number, lastSeq: number): Promise<number> {
    let found = lastSeq
    let low = 1
    let high = lastSeq - 1
    while (low <= high) {
      // The first probe is the subject's first message: a resume from the start needs no more.
      const middle = low === 1 ? 1 : Math.floor((low + high) / 2)
      const message = await nextMessage(stream.streams, this.host.name, subject, middle)
      if (message === undefined || message.seq >= found) high = middle - 1
      else if (lastPositionOf(message.header, subject) > after) {
        found = message.seq
        high = middle - 1
      } else low = message.seq + 1
    }
    return found
  }

  /**
   * The messages of the subjects `filter` matches from sequence `from` on,
   * in stream order, through an ordered consumer, until `visit` returns
   * false or they are all read (what was pending when the last one came;
   * none came within READ_WAIT_MS).
   */
  private async readSubjects(stream: NatsEventStream, filter: string, from: number, visit: (message: NatsConsumedMsg) => boolean): Promise<void> {
    const consumer = await stream.js.consumers.get(this.host.name, { filterSubjects: filter, opt_start_seq: from })
    try {
      for (;;) {
        let fetched = 0
        for await (const message of await consumer.fetch({ max_messages: READ_BATCH, expires: READ_WAIT_MS })) {
          fetched++
          if (!visit(message) || message.info.pending === 0) return
        }
        if (fetched === 0) return
      }
    } finally {
      // The server would drop it once idle anyway; no need to wait for this.
      consumer.delete().catch(() => {})
    }
  }

  /** One sweep: purges the logs whose end is older than its keep time by the server's clock; resolves with how many. */
  private async removeExpired(): Promise<number> {
    const stream = await this.host.stream()
    const ends = `${this.host.name}.x.*`
    const { state } = await stream.streams.info(this.host.name, { subjects_filter: ends })
    if (Object.keys(state.subjects ?? {}).length === 0) return 0
    const now = Date.now() + (await this.clockOffset(stream))
    const due: Array<{ key: string; seq: number }> = []
    await this.readSubjects(stream, ends, 1, (message) => {
      // An end without a keep time is not one of ours: NaN is never due.
      if (message.info.timestampNanos / 1e6 + Number(message.headers?.get(KEEP_MS) || Number.NaN) <= now) {
        due.push({ key: message.subject.slice(ends.length - 1), seq: message.seq })
      }
      return true
    })
    let removed = 0
    for (const { key, seq } of due) {
      if (this.stopping) break
      this.tails.delete(key)
      // The events first: a sweep cut short here finds the end again next time.
      await stream.streams.purge(this.host.name, { filter: `${this.host.name}.e.${key}` })
      // Up to the end's own sequence: an end written since (a new log of the id) stays.
      await stream.streams.purge(this.host.name, { filter: `${this.host.name}.x.${key}`, seq: seq + 1 })
      removed++
    }
    return removed
  }

  /** Server clock minus ours: a rollup on `<name>.clock`, read back for the server's time of it. */
  private async clockOffset(stream: NatsEventStream): Promise<number> {
    if (this.clockOffsetMs === undefined || Date.now() - this.clockMeasuredAt > CLOCK_RECHECK_MS) {
      const headers = stream.headers()
      headers.set("Nats-Rollup", "sub")
      const sent = Date.now()
      const { seq } = await stream.js.publish(`${this.host.name}.clock`, new Uint8Array(0), { headers })
      const acked = Date.now()
      const written = await stream.streams.getMessage(this.host.name, { seq })
      this.clockOffsetMs = written.time.getTime() - (sent + acked) / 2
      this.clockMeasuredAt = acked
    }
    return this.clockOffsetMs
  }
}

/**
 * Makes sure the stream exists with its subjects, creating it when missing;
 * two stores creating it at once both end up using it.
 */
export async function openEventStream(streams: NatsEventStreams, name: string): Promise<void> {
  const subject = `${name}.>`
  for (let attempt = 1; ; attempt++) {
    let subjects: string[] | undefined
    try {
      subjects = (await streams.info(name)).config.subjects
    } catch (err) {
      if (!isApiError(err, STREAM_NOT_FOUND)) throw err
      try {
        await streams.add({ name, subjects: [subject], allow_rollup_hdrs: true, description: "toolnexus: the stream events of the Tasks, for resuming streams" })
        return
      } catch (addErr) {
        // Made by another store meanwhile (maybe with another description): look again, once.
        if (attempt >= 2) throw addErr
        continue
      }
    }
    if (subjects?.includes(subject)) return
    throw new Error(`NatsTaskStore: the stream "${name}" exists with other subjects (${JSON.stringify(subjects)}); the event log needs "${subject}"`)
  }
}

function lastPositionOf(headers: NatsHeaders | undefined, subject: string): number {
  // A header that is missing reads as "".
  const last = Number(headers?.get(LAST_POSITION) || Number.NaN)
  if (!(Number.isSafeInteger(last) && last > 0)) throw new Error(`NatsTaskStore found a message on ${subject} that is not an event log's (no ${LAST_POSITION} header)`)
  return last
}

function eventsIn(text: string, subject: string): LoggedEvent[] {
  const events = JSON.parse(text) as Array<{ position: number; event: JsonObject }>
  if (!Array.isArray(events) || events.length === 0) throw new Error(`NatsTaskStore found a message on ${subject} that is not an event log's (not a list of events)`)
  return events
}
