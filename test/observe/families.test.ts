import { Counter, Histogram, Registry } from "prom-client"
import t from "tap"
import { CounterFamily, HistogramFamily } from "../../lib/observe/families.js"

/* The fast counters and histograms: what a registry renders of them is what it renders of prom-client's own metrics fed the same. */

const BUCKETS = [0.001, 0.01, 0.1, 1]
const OBSERVATIONS: [string, string, number][] = [
  ["GetTask", "jsonrpc", 0.0004],
  ["GetTask", "jsonrpc", 0.001],
  ["GetTask", "rest", 0.05],
  ["SendMessage", "jsonrpc", 2.5],
  ["GetTask", "jsonrpc", 0.3],
  ["SendMessage", "grpc", 0.01],
]

/** A registry with prom-client's own metrics under the names `ours` gives its families, fed the same observations. */
function both(): { ours: Registry; theirs: Registry; feed: () => void } {
  const ours = new Registry()
  const theirs = new Registry()
  const counter = new CounterFamily("requests_total", "Requests", ["method", "binding"]).registerIn(ours)
  const histogram = new HistogramFamily("duration_seconds", "Durations", ["method", "binding"], BUCKETS).registerIn(ours)
  const theirCounter = new Counter({ name: "requests_total", help: "Requests", labelNames: ["method", "binding"], registers: [theirs] })
  const theirHistogram = new Histogram({ name: "duration_seconds", help: "Durations", labelNames: ["method", "binding"], buckets: BUCKETS, registers: [theirs] })
  const feed = () => {
    for (const [method, binding, seconds] of OBSERVATIONS) {
      counter.inc({ method, binding })
      theirCounter.inc({ method, binding })
      histogram.observe({ method, binding }, seconds)
      theirHistogram.observe({ method, binding }, seconds)
    }
    counter.inc({ method: "GetTask", binding: "jsonrpc" }, 5)
    theirCounter.inc({ method: "GetTask", binding: "jsonrpc" }, 5)
  }
  return { ours, theirs, feed }
}

/** The registry's JSON without prom-client's exemplar fields (null: exemplars are off), which carry nothing here. */
async function jsonOf(registry: Registry) {
  return (await registry.getMetricsAsJSON()).map(({ values, ...metric }) => ({
    ...metric,
    values: values.map(({ labels, value, metricName }: { labels: object; value: number; metricName?: string }) => ({ labels, value, metricName })),
  }))
}

t.test("the text format and the JSON are prom-client's own, bucket by bucket", async (t) => {
  const { ours, theirs, feed } = both()
  t.equal(await ours.metrics(), await theirs.metrics(), "nothing observed yet: help and type lines only")
  feed()
  const text = await ours.metrics()
  t.equal(text, await theirs.metrics())
  t.match(text, 'requests_total{method="GetTask",binding="jsonrpc"} 8\n', "3 increments and one of 5")
  t.match(text, 'duration_seconds_bucket{le="0.001",method="GetTask",binding="jsonrpc"} 2\n', "a value on a bound counts in its bucket")
  t.match(text, 'duration_seconds_bucket{le="+Inf",method="SendMessage",binding="jsonrpc"} 1\n', "past every bound: +Inf only")
  t.same(await jsonOf(ours), await jsonOf(theirs))
})

t.test("resetMetrics empties them; label values with quotes and newlines are escaped by the registry", async (t) => {
  const { ours, theirs, feed } = both()
  feed()
  ours.resetMetrics()
  theirs.resetMetrics()
  t.equal(await ours.metrics(), await theirs.metrics())
  t.notMatch(await ours.metrics(), "requests_total{")
  const counter = ours.getSingleMetric("requests_total") as unknown as CounterFamily<"method" | "binding">
  counter.inc({ method: 'a"b\nc', binding: "x\\y" })
  t.match(await ours.metrics(), 'requests_total{method="a\\"b\\nc",binding="x\\\\y"} 1\n')
})

t.test("a merged registry renders the families beside other registries' metrics", async (t) => {
  const { ours, feed } = both()
  feed()
  const other = new Registry()
  new Counter({ name: "other_total", help: "Other", registers: [other] }).inc(2)
  const merged = await Registry.merge([ours, other]).metrics()
  t.equal(merged, `${await ours.metrics()}\n${await other.metrics()}`)
  t.match(merged, 'duration_seconds_count{method="GetTask",binding="jsonrpc"} 3\n')
  t.match(merged, "other_total 2\n")
})
