import { loadDriver } from "../driver.js"

/*
 * The little of the pg driver the store uses, declared here rather than
 * imported from "pg": pg is an optional peer, and the published types must
 * compile for an application without it. test/package/declarations.test.ts checks
 * that pg itself fits these.
 */

export interface PgQueryResult<Row> {
  rows: Row[]
  rowCount: number | null
}

/** A named query: prepared once per connection, then only bound and run. */
export interface PgNamedQuery {
  name: string
  text: string
  values?: unknown[]
}

export interface PgQueryable {
  query<Row = Record<string, unknown>>(text: string, values?: unknown[]): Promise<PgQueryResult<Row>>
  query<Row = Record<string, unknown>>(query: PgNamedQuery): Promise<PgQueryResult<Row>>
}

export interface PgPool extends PgQueryable {
  on(event: "error", listener: (err: Error) => void): unknown
  end(): Promise<void>
}

export interface PgNotification {
  channel: string
  payload?: string
}

export interface PgClient extends PgQueryable {
  connect(): Promise<unknown>
  end(): Promise<void>
  on(event: "notification", listener: (message: PgNotification) => void): unknown
  on(event: "error", listener: (err: Error) => void): unknown
  on(event: "end", listener: () => void): unknown
}

/** What the store passes to `new Pool()` and `new Client()`. */
export interface PgConnectionConfig {
  connectionString: string
  connectionTimeoutMillis: number
  application_name: string
  max?: number
  allowExitOnIdle?: boolean
  query_timeout?: number
  keepAlive?: boolean
}

export interface PgDriver {
  Pool: new (config: PgConnectionConfig) => PgPool
  Client: new (config: PgConnectionConfig) => PgClient
}

const isPgDriver = (module: unknown): module is PgDriver =>
  typeof (module as PgDriver)?.Pool === "function" && typeof (module as PgDriver).Client === "function"

/** A query or connect that takes this long is a dead server or network, not a slow one. */
const CONNECT_TIMEOUT_MS = 15_000
const WATCH_QUERY_TIMEOUT_MS = 10_000

/** The pg driver from `specifier` (the store's driverModule option), imported on first use (see loadDriver). */
export function loadPgDriver(specifier: string): Promise<PgDriver> {
  return loadDriver({ store: "PostgresTaskStore", specifier, expected: "pg", uses: "Pool and Client classes", fits: isPgDriver })
}

/** The store's pool of query connections; connecting is left to its first query. */
export function newPool(driver: PgDriver, url: string, poolSize: number): PgPool {
  return new driver.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: "toolnexus",
    // A store nobody closed must not keep the process alive.
    allowExitOnIdle: true,
  })
}

/** A connection of its own for LISTEN, not yet connected. */
export function newListenClient(driver: PgDriver, url: string): PgClient {
  return new driver.Client({
    connectionString: url,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: WATCH_QUERY_TIMEOUT_MS,
    keepAlive: true,
    application_name: "toolnexus-watch",
  })
}
