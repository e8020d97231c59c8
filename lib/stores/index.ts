/**
 * "toolnexus/stores": the TaskStore contract, the four stores and their helpers; no web server, logger or driver is loaded.
 *
 * @module toolnexus/stores
 */
export type { A2AArtifact, A2ADataPart, A2AFilePart, A2AMessage, A2APart, A2ATask, A2ATaskStatus, A2ATextPart, JsonObject, TaskState } from "../types.js"
export { TERMINAL_STATES } from "../types.js"
export type { LeaseBook, TaskStore } from "./task-store.js"
export type { PushClaim, PushConfigRecord, PushDeadLetter, PushEvent, PushOutboxItem, PushStore, TraceContext } from "./push-store.js"
export type { EventLog, LoggedEvent } from "../streams/event-log.js"
export type { StoreErrorContext, StoreErrorHandler, TaskStoreOptions } from "./background-errors.js"
export type { RetentionOptions } from "./retention.js"
export { isTaskStore, TaskConflictError } from "./task-store.js"
export { StoreFullError, type StoreLimit } from "./store-full.js"
export { PostgresTaskStore, type PostgresTaskStoreOptions } from "./postgres/store.js"
export { NatsTaskStore, type NatsTaskStoreOptions } from "./nats/store.js"
export { InMemoryTaskStore, type InMemoryTaskStoreOptions } from "./memory/store.js"
export type { MemoryEventLog } from "./memory/events.js"
export type { MemoryPushOptions, MemoryPushStore } from "./memory/push.js"
export { FileTaskStore, type FileTaskStoreOptions, type FileStat, type FileSystem, type FileSystemHandle } from "./file/store.js"
export { resolveStore, type ResolveStoreOptions, type StoreSelector } from "./resolve.js"
export { pageOfTasks, type TaskPage, type TaskQuery } from "./list.js"
