/**
 * The store contracts, for anyone who writes a store: run them against your
 * own TaskStore from any test runner (tap, node:test, vitest, a plain
 * script). Each runner resolves to a list of failures, empty when the store
 * keeps the contract; nothing here depends on a test framework.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict"
 * import { runStoreContract } from "toolnexus/testing"
 *
 * assert.deepEqual(await runStoreContract(() => new MyTaskStore()), [])
 * ```
 *
 * @module toolnexus/testing
 */
export type { Awaitable, ContractFailure, ContractOptions, StoreWithPeer } from "./checks.js"
export { DEFAULT_CHECK_TIMEOUT_MS } from "./checks.js"
export { runStoreContract, storeContractChecks, type MakeTaskStore } from "./store-contract.js"
export { runPushStoreContract, pushStoreContractChecks, type MakePushStore, type PushStoreContractOptions } from "./push-store-contract.js"
export { runEventLogContract, eventLogContractChecks, type EventLogStoreOptions, type MakeEventLogStore } from "./event-log-contract.js"
