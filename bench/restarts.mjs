// What a rolling restart costs the load: the end-to-end setup (test-e2e/cluster.mjs: three replicas of the command on one
// Postgres table, Debian's HAProxy checking /readyz), a steady closed-loop load of A2A 1.0 SendMessage + GetTask, then each
// replica in turn SIGTERM'd (drain delay 2 s) and started again. Prints requests/s and p50/p99 for a steady window before,
// for each restart (SIGTERM to the replica back up in HAProxy) and after. Run: npm run build && node bench/restarts.mjs
// Knobs: BENCH_RESTART_WORKERS (concurrent clients, default 8), BENCH_RESTART_STEADY_S (steady windows, default 5).
import { percentile, startCluster, startLoad, startModel, waitFor } from "../test-e2e/cluster.mjs"

const workers = Number(process.env.BENCH_RESTART_WORKERS ?? 8)
const steadyMs = Number(process.env.BENCH_RESTART_STEADY_S ?? 5) * 1000

const model = await startModel()
const cluster = await startCluster({ count: 3, drainDelay: "2s", model })
const load = startLoad(cluster.url, { workers, maxRequests: 1_000_000 })
/** @type {{ name: string, from: number, to: number }[]} the measured windows, in performance.now() ms */
const windows = []
const mark = () => performance.now()
try {
  await waitFor(() => load.acknowledged.length >= 50, 30_000, "the load to get going")
  let from = mark()
  await new Promise((resolve) => setTimeout(resolve, steadyMs))
  windows.push({ name: "steady, before", from, to: mark() })
  for (const replica of cluster.replicas) {
    from = mark()
    const code = await cluster.terminate(replica)
    const down = mark()
    await cluster.restart(replica)
    windows.push({ name: `restart ${replica.name} (exit ${code}; SIGTERM to exit ${Math.round(down - from)} ms)`, from, to: mark() })
  }
  from = mark()
  await new Promise((resolve) => setTimeout(resolve, steadyMs))
  windows.push({ name: "steady, after", from, to: mark() })
} finally {
  await load.stop()
  await cluster.close()
  await model.close()
}

const rows = windows.map(({ name, from, to }) => {
  const inWindow = load.samples.filter((s) => s.at >= from && s.at < to)
  const ms = inWindow.map((s) => s.ms)
  return {
    name,
    seconds: ((to - from) / 1000).toFixed(1),
    requests: inWindow.length,
    failed: inWindow.filter((s) => !s.ok).length,
    rps: Math.round(inWindow.length / ((to - from) / 1000)),
    p50: percentile(ms, 50).toFixed(1),
    p99: percentile(ms, 99).toFixed(1),
    max: Math.max(...ms).toFixed(1),
  }
})
console.log(`| window | s | requests | failed | req/s | p50 ms | p99 ms | max ms |`)
console.log(`|---|---|---|---|---|---|---|---|`)
for (const r of rows) console.log(`| ${r.name} | ${r.seconds} | ${r.requests} | ${r.failed} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.max} |`)
console.log(`\n${workers} clients, ${load.samples.length} requests in all, ${load.samples.filter((s) => !s.ok).length} failed; load average ${(await import("node:os")).loadavg().map((l) => l.toFixed(1)).join(" ")}`)
