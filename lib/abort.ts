/**
 * Settles with `work`, or rejects with the signal's reason as soon as it aborts: a model, tool or agent
 * that ignores its signal cannot hold the run. `work` may be a function that starts it (a throw then
 * rejects too, and an already aborted signal rejects without starting it). Without a signal, `work` itself.
 */
export function unlessAborted<T>(work: PromiseLike<T> | (() => PromiseLike<T>), signal: AbortSignal | undefined): Promise<T> {
  const started = () => (typeof work === "function" ? Promise.resolve().then(work) : Promise.resolve(work))
  if (!signal) return started()
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const onAbort = () => reject(signal.reason)
    signal.addEventListener("abort", onAbort, { once: true })
    started().then(
      (value) => {
        signal.removeEventListener("abort", onAbort)
        resolve(value)
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort)
        reject(err)
      },
    )
  })
}
