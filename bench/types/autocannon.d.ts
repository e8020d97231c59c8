// The part of autocannon 8's API the bench uses (the package ships no types).
declare module "autocannon" {
  export interface Request {
    method?: string
    path?: string
    headers?: Record<string, string>
    body?: string
    /** Called with each answer's status and body text. */
    onResponse?: (status: number, body: string) => void
    /** Called before each request is sent; returns the request to send. */
    setupRequest?: (request: Request) => Request
  }
  export interface Options {
    url: string
    connections?: number
    pipelining?: number
    /** Seconds. */
    duration?: number
    /** Stop after this many requests, instead of after `duration`. */
    amount?: number
    /** Requests a second, over all connections. */
    overallRate?: number
    requests?: Request[]
  }
  /** autocannon's summary of one measure: requests per second, latency in ms. */
  export interface Summary {
    average: number
    mean: number
    stddev: number
    min: number
    max: number
    total: number
    p50: number
    p90: number
    p99: number
  }
  export interface Result {
    requests: Summary
    latency: Summary
    throughput: Summary
    errors: number
    timeouts: number
    non2xx: number
    duration: number
  }
  /** A run started with a callback: it reports each answer as it comes. */
  export interface Instance {
    on(event: "response", listener: (client: unknown, statusCode: number, resBytes: number, responseTimeMs: number) => void): Instance
  }
  function autocannon(options: Options): Promise<Result>
  function autocannon(options: Options, callback: (err: Error | null, result: Result) => void): Instance
  export default autocannon
}
