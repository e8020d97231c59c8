/**
 * A body read whole, but never past a limit: what the server reads from an endpoint it calls (a model,
 * another A2A agent) is bounded in bytes. Past `maxBytes` the error `tooLarge()` makes is thrown, and
 * leaving the read by that throw cancels the body, so the rest of the answer is never read.
 */
export async function readTextAtMost(body: AsyncIterable<Uint8Array> | null, maxBytes: number, tooLarge: () => Error): Promise<string> {
  const chunks: Uint8Array[] = []
  let size = 0
  if (body) {
    for await (const chunk of body) {
      size += chunk.byteLength
      if (size > maxBytes) throw tooLarge()
      chunks.push(chunk)
    }
  }
  return Buffer.concat(chunks).toString("utf8")
}
