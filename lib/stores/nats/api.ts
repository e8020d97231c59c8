/*
 * What the NATS store's parts share of JetStream's API: the error codes they
 * tell apart, and the one-request reads of a stream's messages.
 */

/** "Wrong last sequence": the key or subject changed since its revision was read. */
export const WRONG_LAST_SEQUENCE = 10071
/** "No message found": nothing at or after the sequence asked for. */
const NO_MESSAGE = 10037
/** "Stream not found". */
export const STREAM_NOT_FOUND = 10059

/** What the reads below need of a stream manager's streams (nats's, or NatsEventStreams): messages of type M. */
interface StreamMessages<M> {
  getMessage(stream: string, query: { last_by_subj: string } | { seq: number; next_by_subj?: string }): Promise<M>
}

/** Whether `err` is JetStream's API error of this code. */
export function isApiError(err: unknown, code: number): boolean {
  return (err as { api_error?: { err_code?: number } })?.api_error?.err_code === code
}

/** The first message at or after stream sequence `seq` whose subject matches `subject` (one request); undefined when there is none. */
export async function nextMessage<M>(streams: StreamMessages<M>, stream: string, subject: string, seq: number): Promise<M | undefined> {
  try {
    return await streams.getMessage(stream, { seq, next_by_subj: subject })
  } catch (err) {
    if (isApiError(err, NO_MESSAGE)) return undefined
    throw err
  }
}

/** The last message of `subject` in the stream (one request); undefined when there is none. */
export async function lastMessage<M>(streams: StreamMessages<M>, stream: string, subject: string): Promise<M | undefined> {
  try {
    return await streams.getMessage(stream, { last_by_subj: subject })
  } catch (err) {
    if (isApiError(err, NO_MESSAGE)) return undefined
    throw err
  }
}
