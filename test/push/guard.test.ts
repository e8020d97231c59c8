import { once } from "node:events"
import { createServer, request } from "node:http"
import type { AddressInfo, LookupFunction } from "node:net"
import t from "tap"
import { allowList, blockedAddress, checkWebhookUrl, MAX_WEBHOOK_URL_LENGTH, NO_ALLOW_LIST, pinnedLookup, WebhookRefusedError } from "../../lib/push/guard.js"

/** The refusal checkWebhookUrl gives, or undefined when it lets the URL through. */
async function refusal(url: string, allow = NO_ALLOW_LIST, resolve?: (host: string) => Promise<{ address: string; family: number }[]>) {
  try {
    await checkWebhookUrl(url, allow, { field: "params.url", resolve })
    return undefined
  } catch (err) {
    if (!(err instanceof WebhookRefusedError)) throw err
    return err
  }
}

t.test("literal addresses of every refused kind are refused with the reason and the address (real lookups)", async (t) => {
  const cases: Array<[string, string, string]> = [
    ["http://127.0.0.1:8080/hook", "loopback", "127.0.0.1"],
    ["http://127.1/", "loopback", "127.0.0.1"],
    ["http://0x7f000001/", "loopback", "127.0.0.1"],
    ["http://[::1]/", "loopback", "::1"],
    ["http://10.0.0.5/", "private", "10.0.0.5"],
    ["http://172.16.3.4/", "private", "172.16.3.4"],
    ["http://192.168.1.1/", "private", "192.168.1.1"],
    ["http://[fd12::1]/", "private", "fd12::1"],
    ["http://169.254.1.1/", "link-local", "169.254.1.1"],
    ["http://[fe80::1]/", "link-local", "fe80::1"],
    ["http://100.64.0.1/", "shared", "100.64.0.1"],
    ["http://224.0.0.1/", "multicast", "224.0.0.1"],
    ["http://[ff02::1]/", "multicast", "ff02::1"],
    ["http://0.0.0.0/", "unspecified", "0.0.0.0"],
    ["http://[::]/", "unspecified", "::"],
    ["http://240.0.0.1/", "reserved", "240.0.0.1"],
    ["http://255.255.255.255/", "reserved", "255.255.255.255"],
    ["http://198.18.0.1/", "reserved", "198.18.0.1"],
    ["http://169.254.169.254/latest/meta-data/", "metadata", "169.254.169.254"],
    ["http://[::ffff:10.0.0.5]/", "private", "::ffff:a00:5"],
    ["http://[::ffff:127.0.0.1]/", "loopback", "::ffff:7f00:1"],
    ["http://[::ffff:0:127.0.0.1]/", "loopback", "::ffff:0:7f00:1"],
    ["http://[::ffff:0:a9fe:a9fe]/", "metadata", "::ffff:0:a9fe:a9fe"],
    ["http://[64:ff9b::a00:5]/", "nat64", "64:ff9b::a00:5"],
  ]
  for (const [url, reason, address] of cases) {
    const err = await refusal(url)
    t.equal(err?.reason, reason, url)
    t.equal(err?.address, address, `${url}: the address`)
    t.match(err?.message, new RegExp(`^params\\.url is an? .*\\(${address.replace(/\./g, "\\.")}\\); add the host to the push allow list`), url)
  }
})

t.test("localhost is refused after a real lookup, by what it resolves to", async (t) => {
  const err = await refusal("http://localhost:9/hook")
  t.equal(err?.reason, "loopback")
  t.match(err?.message, /^params\.url resolves to a loopback address \((127\.0\.0\.1|::1)\)/)
})

t.test("one refused address among good ones refuses the URL", async (t) => {
  const resolve = async () => [
    { address: "93.184.215.14", family: 4 },
    { address: "10.1.2.3", family: 4 },
  ]
  const err = await refusal("https://mixed.example/hook", NO_ALLOW_LIST, resolve)
  t.equal(err?.message, "params.url resolves to a private address (10.1.2.3); add the host to the push allow list (push.allow, --push-allow) if it is meant")
  const good = await checkWebhookUrl("https://public.example/hook", NO_ALLOW_LIST, { resolve: async () => [{ address: "93.184.215.14", family: 4 }] })
  t.same(good.addresses, [{ address: "93.184.215.14", family: 4 }])
  t.equal(good.allowed, false)
  t.equal(good.url.href, "https://public.example/hook")
})

t.test("scheme, credentials, length, syntax, metadata names and unresolvable hosts are refused", async (t) => {
  t.equal((await refusal("ftp://example.com/x"))?.message, "params.url should be an http: or https: URL, not ftp:")
  t.equal((await refusal("file:///etc/passwd"))?.reason, "scheme")
  t.equal((await refusal("https://user:pw@example.com/"))?.reason, "credentials")
  t.equal((await refusal("https://user@example.com/"))?.reason, "credentials")
  t.equal((await refusal("not a url"))?.message, "params.url is not a valid absolute URL")
  const long = "https://example.com/" + "a".repeat(MAX_WEBHOOK_URL_LENGTH)
  t.equal((await refusal(long))?.message, `params.url is longer than 2048 characters (${long.length})`)
  for (const name of ["metadata.google.internal", "METADATA.google.internal.", "metadata"]) {
    t.equal((await refusal(`http://${name}/computeMetadata/v1/`))?.reason, "metadata", name)
  }
  const unresolved = await refusal("https://nowhere.invalid/hook")
  t.equal(unresolved?.reason, "unresolved")
  t.match(unresolved?.message, /^params\.url host nowhere\.invalid does not resolve \(/)
  t.equal((await refusal("https://empty.example/", NO_ALLOW_LIST, async () => []))?.reason, "unresolved")
  // The default field name, for the sender's checks.
  await t.rejects(checkWebhookUrl("ftp://x/", NO_ALLOW_LIST), { message: "webhook URL should be an http: or https: URL, not ftp:" })
})

t.test("an allow-list entry lets its host through; a port narrows it to that port", async (t) => {
  const real = await checkWebhookUrl("http://localhost:8080/hook", allowList(["localhost"]))
  t.equal(real.allowed, true)
  t.ok(real.addresses.length > 0)
  t.equal((await checkWebhookUrl("http://127.0.0.1:8080/", allowList(["127.0.0.1:8080"]))).allowed, true)
  t.equal((await refusal("http://127.0.0.1:8081/", allowList(["127.0.0.1:8080"])))?.reason, "loopback", "another port is not allowed")
  t.equal((await checkWebhookUrl("http://[::1]:9000/", allowList(["[::1]:9000"]))).allowed, true)
  t.equal((await checkWebhookUrl("http://[::1]:9001/", allowList(["::1"]))).allowed, true)
  t.equal((await checkWebhookUrl("https://127.0.0.1/", allowList(["127.0.0.1:443"]))).allowed, true, "the scheme's default port")
  t.equal((await checkWebhookUrl("http://Hooks.Internal.:80/", allowList(["hooks.internal"]), { resolve: async () => [{ address: "10.0.0.7", family: 4 }] })).allowed, true)
  t.equal((await refusal("http://other.internal/", allowList(["hooks.internal"]), async () => [{ address: "10.0.0.7", family: 4 }]))?.reason, "private")
  t.equal((await checkWebhookUrl("http://metadata.google.internal/", allowList(["metadata.google.internal"]), { resolve: async () => [{ address: "169.254.169.254", family: 4 }] })).allowed, true)
})

t.test("allowList refuses entries that are not HOST or HOST:PORT, naming them", async (t) => {
  for (const entry of ["", "http://x", "x:0", "x:70000", "x:y", "a b", "user@x", "[::1", "x/path"]) {
    t.throws(() => allowList([entry]), { name: "TypeError", message: /^push allow-list entry ".*" (is not a host name or address|has a port outside 1-65535); write HOST or HOST:PORT/ }, entry)
  }
  t.same(allowList([" Example.COM. ", "10.0.0.5:8443", "fd00::1"]).entries, [{ host: "example.com" }, { host: "10.0.0.5", port: 8443 }, { host: "[fd00::1]" }])
})

t.test("blockedAddress: public addresses pass, IPv4-mapped is judged as IPv4", async (t) => {
  for (const [address, family] of [["93.184.215.14", 4], ["2606:4700:4700::1111", 6], ["::ffff:8.8.8.8", 6]] as const) {
    t.equal(blockedAddress(address, family), undefined, address)
  }
  t.equal(blockedAddress("::ffff:192.168.0.1", 6)?.reason, "private")
})

t.test("blockedAddress: an IPv4-translated address (::ffff:0:a.b.c.d, RFC 2765) is judged as the IPv4 address it carries", async (t) => {
  for (const [address, reason] of [
    ["::ffff:0:127.0.0.1", "loopback"],
    ["::ffff:0:7f00:1", "loopback"],
    ["0:0:0:0:ffff:0:a00:5", "private"],
    ["::ffff:0:169.254.169.254", "metadata"],
    ["::ffff:0:c0a8:101", "private"],
    ["::ffff:0:0.0.0.0", "unspecified"],
  ] as const) {
    t.equal(blockedAddress(address, 6)?.reason, reason, `${address} is refused as ${reason}`)
  }
  t.equal(blockedAddress("::ffff:0:8.8.8.8", 6), undefined, "a public IPv4 address carried that way passes")
  t.equal(blockedAddress("::ffff:0:808:808", 6), undefined, "written in hex too")
  t.equal(blockedAddress("fd00:ec2::254", 6)?.reason, "metadata")
})

/** Calls a lookup and gives what its callback got. */
function callLookup(lookup: LookupFunction, options: Parameters<LookupFunction>[1]) {
  return new Promise<{ err: NodeJS.ErrnoException | null; address: unknown; family?: number }>((resolve) => {
    lookup("anything.example", options, (err, address, family) => resolve({ err, address, family }))
  })
}

t.test("pinnedLookup answers with the checked addresses in the form asked for", async (t) => {
  const lookup = pinnedLookup([
    { address: "203.0.113.9", family: 4 },
    { address: "2001:db8::9", family: 6 },
  ])
  t.same(await callLookup(lookup, {}), { err: null, address: "203.0.113.9", family: 4 })
  t.same(await callLookup(lookup, { family: 6 }), { err: null, address: "2001:db8::9", family: 6 })
  t.same(await callLookup(lookup, { all: true }), {
    err: null,
    address: [
      { address: "203.0.113.9", family: 4 },
      { address: "2001:db8::9", family: 6 },
    ],
    family: undefined,
  })
  t.same(await callLookup(lookup, { all: true, family: "IPv4" }), { err: null, address: [{ address: "203.0.113.9", family: 4 }], family: undefined })
  const none = await callLookup(pinnedLookup([{ address: "203.0.113.9", family: 4 }]), { family: 6 })
  t.equal(none.err?.code, "ENOTFOUND")
})

t.test("a request made with the checked lookup goes to the checked address, never to a new DNS answer", async (t) => {
  const received: Array<string | undefined> = []
  const server = createServer((req, res) => {
    received.push(req.headers.host)
    res.end("ok")
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  t.teardown(() => server.close())
  const { port } = server.address() as AddressInfo
  // A name no resolver knows: only the checked answer can get the request through.
  const checked = await checkWebhookUrl(`http://hooks.rebind.invalid:${port}/hook`, allowList(["hooks.rebind.invalid"]), {
    resolve: async () => [{ address: "127.0.0.1", family: 4 }],
  })
  const status = await new Promise<number | undefined>((resolve, reject) => {
    const req = request(checked.url, { method: "POST", lookup: checked.lookup }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode))
    })
    req.on("error", reject)
    req.end("{}")
  })
  t.equal(status, 200)
  t.same(received, [`hooks.rebind.invalid:${port}`], "the Host header keeps the name")
})
