import { readFileSync } from "node:fs"

/**
 * Whether a process with this pid runs on this host: false when none has it,
 * or when it has exited and waits only to be reaped (a zombie, state Z on
 * Linux: a server killed with SIGKILL whose parent died with it stays one for
 * a while, and signal 0 still reaches it). A process we may not signal is alive.
 */
export function isProcessAlive(pid: number): boolean {
  // 0 and negative pids name process groups to kill(); no single process has them.
  if (!Number.isSafeInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH"
  }
  const state = linuxState(pid)
  return state !== "Z" && state !== "X"
}

/** The state letter Linux gives the pid (R, S, D, Z, X …), or undefined where /proc cannot say. */
function linuxState(pid: number): string | undefined {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1")
  } catch {
    return undefined
  }
  // "<pid> (<name>) <state> …": the name may hold spaces and ")", so read after the last ")".
  return stat.slice(stat.lastIndexOf(")") + 2).charAt(0) || undefined
}
