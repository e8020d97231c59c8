import { spawn } from "node:child_process"
import t from "tap"
import { parseCli, USAGE } from "../../lib/cli.js"
import { CLI_BIN, postRpc, ROOT, rpc, startCli } from "../fixtures/helpers.js"

/* The command's metrics flags: --metrics (behind the tokens) and --metrics-listen HOST:PORT (an address of their own). */

t.test("parseCli: --metrics / TOOLNEXUS_METRICS, and --metrics-listen / TOOLNEXUS_METRICS_LISTEN, which turns them on at its address", async (t) => {
  const metrics = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const config = parseCli(argv, env)
    return config === "help" ? undefined : config.metrics
  }
  t.equal(metrics([]), undefined, "off unless asked")
  t.equal(metrics(["--metrics"]), true)
  t.equal(metrics([], { TOOLNEXUS_METRICS: "1" }), true)
  t.equal(metrics([], { TOOLNEXUS_METRICS: "false" }), undefined)
  t.same(metrics(["--metrics-listen", "127.0.0.1:9464"]), { listen: "127.0.0.1:9464" })
  t.same(metrics(["--metrics", "--metrics-listen", "[::1]:9464"]), { listen: "[::1]:9464" })
  t.same(metrics([], { TOOLNEXUS_METRICS_LISTEN: ":9464" }), { listen: ":9464" })
  t.same(metrics(["--metrics-listen", "0.0.0.0:1"], { TOOLNEXUS_METRICS_LISTEN: ":9464" }), { listen: "0.0.0.0:1" }, "the flag wins")
  t.throws(() => parseCli(["--metrics-listen", "9464"], {}), /^--metrics-listen should be HOST:PORT with a port 0-65535, e\.g\. 127\.0\.0\.1:9464, got "9464"/)
  t.throws(() => parseCli([], { TOOLNEXUS_METRICS: "yes" }), /^TOOLNEXUS_METRICS should be 1 or true/)
  t.match(USAGE, /--metrics {12}serve Prometheus metrics at \/metrics/)
  t.match(USAGE, /--metrics-listen HOST:PORT/)
})

t.test("the toolnexus command with --metrics serves /metrics behind TOOLNEXUS_TOKENS", async (t) => {
  const secret = "cli-metrics-secret-0123456789"
  const { url, lines } = await startCli(t, ["--port", "0", "--store", "memory", "--metrics"], { TOOLNEXUS_TOKENS: `${secret}=ops` })
  t.equal(lines.find((line) => line.msg === "toolnexus agent listening")?.metrics, `${url}/metrics`, "the start line says where")
  await postRpc(url, rpc("GetTask", { id: "x" }), { authorization: `Bearer ${secret}` })
  t.equal((await fetch(`${url}/metrics`)).status, 401)
  const scraped = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${secret}` } })
  t.equal(scraped.status, 200)
  t.match(await scraped.text(), /toolnexus_a2a_requests_total\{method="GetTask",binding="jsonrpc",outcome="TASK_NOT_FOUND"\} 1/)
})

t.test("the toolnexus command with --metrics-listen serves them on their own port, and not on the agent's", async (t) => {
  const { url, lines } = await startCli(t, ["--port", "0", "--store", "memory", "--metrics-listen", "127.0.0.1:0"])
  const where = String(lines.find((line) => line.msg === "toolnexus agent listening")?.metrics)
  t.match(where, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/)
  t.not(new URL(where).port, new URL(url).port)
  const scraped = await fetch(where)
  t.equal(scraped.status, 200)
  t.match(await scraped.text(), /# TYPE toolnexus_tasks_running gauge/)
  t.equal((await fetch(`${url}/metrics`)).status, 404)
})

t.test("the toolnexus command refuses a bad --metrics-listen with its usage", async (t) => {
  const child = spawn(process.execPath, [CLI_BIN, "--metrics-listen", "localhost"], { cwd: ROOT })
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  t.equal(code, 2)
  t.match(stderr, /--metrics-listen should be HOST:PORT/)
  t.match(stderr, /Usage: toolnexus/)
})
