import { EventRecorder } from "../lib/streams/event-recorder.js"
import { TaskEvents } from "../lib/streams/events.js"
import { StoreFollower } from "../lib/streams/follower.js"
import { JsonRpcDispatcher } from "../lib/a2a/jsonrpc.js"
import { A2AOperations, type ExtendedCardOf } from "../lib/a2a/operations.js"
import type { PushSettings } from "../lib/a2a/push-configs.js"
import { RecoveryService } from "../lib/a2a/recovery.js"
import { TaskRunner } from "../lib/a2a/runner.js"
import { StreamSlots } from "../lib/streams/stream-slots.js"
import { transitionSaver } from "../lib/a2a/transitions.js"
import type { Logger } from "../lib/log.js"
import type { A2AMetrics } from "../lib/observe/metrics.js"
import { observedStore } from "../lib/observe/observed-store.js"
import { Telemetry, tracingRegistered } from "../lib/observe/telemetry.js"
import { pushAllowList, senderSettings } from "../lib/push/options.js"
import { PushSender } from "../lib/push/sender.js"
import { createPushSigner, type Jwks } from "../lib/push/signer.js"
import type { TaskStore } from "../lib/stores/task-store.js"
import type { A2ATask } from "../lib/types.js"
import { errorFields } from "../lib/log.js"
import { Readiness } from "../lib/readiness.js"
import { CLOSE_MARGIN_MS, DEFAULT_SHUTDOWN_GRACE_MS, graceWithin, openStore, type ToolnexusA2AOptions } from "./options.js"

/** How long a stop waits for the last stream events to reach the event log: within the margin a close keeps beside the grace (CLOSE_MARGIN_MS). */
const RECORDER_IDLE_MS = 500

/** The agent's moving parts for one registration, and the three hooks that start and stop them in order. */
interface Agent {
  store: TaskStore
  /** Push notifications' settings; undefined when push is off (a store without the capability, or opts.push false). */
  push?: PushSettings
  /** The A2A operations every binding runs. */
  operations: A2AOperations
  /** The JSON-RPC binding over them. */
  dispatcher: JsonRpcDispatcher
  /** Aborts once running tasks have had their grace on close, so streams still open end too. */
  closing: AbortSignal
  /** The push signing key's public half, when push is on with a signing key: served as the JWKS. */
  jwks?: Jwks
  /** The Prometheus metrics, when opts.metrics is on. */
  metrics?: A2AMetrics
  /** Whether the server should get traffic: its phase, and whether the store answers. */
  readiness: Readiness
  /** Starts following other servers' changes, then recovers the Tasks a dead server left, then starts push delivery. */
  onReady: () => Promise<void>
  /** Lets running tasks finish (up to the grace period), then ends open streams. */
  preClose: () => Promise<void>
  /** Stops recovery, following and push delivery, and closes the store if the plugin opened it. */
  onClose: () => Promise<void>
}

/**
 * Builds the store, runner, follower, recovery, operations and bindings from checked
 * options; `pluginTimeout` is the Fastify instance's, which bounds preClose;
 * `extendedCard` answers GetExtendedAgentCard, when the host configured one.
 */
export async function createAgent(opts: ToolnexusA2AOptions, log: Logger, pluginTimeout: number, extendedCard?: ExtendedCardOf): Promise<Agent> {
  const graceMs = graceWithin(pluginTimeout, opts.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS)
  if (opts.shutdownGraceMs !== undefined && graceMs < opts.shutdownGraceMs) {
    log.warn(
      { shutdownGraceMs: opts.shutdownGraceMs, pluginTimeout, graceMs },
      `shutdownGraceMs cut to ${graceMs} ms: Fastify ends the close hook after pluginTimeout, which must be at least the grace + ${CLOSE_MARGIN_MS} ms`,
    )
  }
  const opened = await openStore(opts.store, log, opts.retention)
  const { ownsStore } = opened
  // prom-client loads only for an agent with metrics on.
  const metrics = opts.metrics ? new (await import("../lib/observe/metrics.js")).A2AMetrics() : undefined
  const telemetry = new Telemetry(metrics, opts.name)
  // The store's operations are observed only when something listens: metrics on, or an OpenTelemetry SDK registered (before the server starts).
  const store = metrics !== undefined || tracingRegistered() ? observedStore(opened.store, telemetry) : opened.store
  const events = new TaskEvents()
  // Push is on when the store has the capability and the host did not turn it off; every state change then enqueues its notifications.
  const pushOptions = opts.push === false ? undefined : opts.push
  const push: PushSettings | undefined = opts.push !== false && store.push !== undefined ? { store: store.push, allow: pushAllowList(pushOptions) } : undefined
  const signer = push && pushOptions?.signingKey !== undefined ? await createPushSigner(pushOptions.signingKey, opts.url ?? opts.name ?? "toolnexus") : undefined
  let sender: PushSender | undefined
  const saveTransition = transitionSaver(store, push && { store: push.store, enqueued: () => sender?.wake() })
  // Stream events go to the store's event log when it has one, so a dropped stream resumes on any server sharing it.
  const recorder = store.events === undefined ? undefined : new EventRecorder(store.events, log)
  const runner = new TaskRunner({
    store,
    ...(opts.agent ? { agent: opts.agent } : { client: opts.client, toolkit: opts.toolkit }),
    log,
    events,
    maxRunning: opts.maxRunningTasks,
    maxQueued: opts.maxQueuedTasks,
    maxTaskBytes: opts.maxTaskBytes,
    saveTransition,
    recorder,
    progressSaveMs: opts.progressSaveMs,
    telemetry,
  })
  if (push) sender = new PushSender({ ...senderSettings(pushOptions), store: push.store, log, instance: runner.self.instance, signer, telemetry })
  const follower = new StoreFollower({ store, runner, log, recorder })
  const streams = new StreamSlots({ maxStreams: opts.maxStreams, maxStreamsPerPrincipal: opts.maxStreamsPerPrincipal })
  const operations = new A2AOperations({ store, runner, events, follower, streams, unownedTasksBelongTo: opts.auth?.unownedTasksBelongTo, push, recorder, extendedCard, telemetry })
  const pushStore = push?.store
  metrics?.watch({
    tasks: () => runner.load(),
    openStreams: () => operations.openStreams,
    ...(pushStore?.oldestPendingAt && { oldestPendingPush: () => pushStore.oldestPendingAt!() }),
  })
  const dispatcher = new JsonRpcDispatcher(operations)
  // A recovered Task is over: its log (events its dead server wrote) goes after the retention, like any finished Task's.
  const saveRecovered = async (task: A2ATask) => {
    await saveTransition(task)
    recorder?.ended(task.id)
  }
  const recovery = new RecoveryService({ store, self: runner.self, log, leaseTtlMs: opts.leaseTtlMs, checkIntervalMs: opts.recoveryIntervalMs, saveTransition: saveRecovered })
  const closing = new AbortController()
  const readiness = new Readiness({
    store: opened.store,
    probeTimeoutMs: opts.health === false ? undefined : opts.health?.storeTimeoutMs,
    onStoreError: (err) => log.warn(errorFields(err), "readiness: the task store failed to answer its probe"),
  })
  // A drained stop on an event log other servers share ends open streams as soon as it closes: their peers resume
  // elsewhere with Last-Event-ID while the Tasks finish here. Otherwise streams stay until their Tasks end, as nowhere else could resume them.
  const resumableElsewhere = store.events !== undefined && store.events.shared !== false
  return {
    // The host's decorator gets the store as it is, unobserved.
    store: opened.store,
    push,
    operations,
    dispatcher,
    readiness,
    closing: closing.signal,
    ...(signer && { jwks: signer.jwks }),
    ...(metrics && { metrics }),
    onReady: async () => {
      await follower.start()
      if (opts.recoverInterrupted !== false) await recovery.start()
      await sender?.start()
    },
    // A preClose hook, so blocking requests waiting on a task end before the server waits on them.
    preClose: async () => {
      const drained = readiness.phase === "draining"
      readiness.stopping()
      if (drained && resumableElsewhere) closing.abort()
      await runner.stop(graceMs)
      // The last events in the log before streams end: a peer resuming on another server finds them.
      await recorder?.idle(RECORDER_IDLE_MS)
      closing.abort()
    },
    onClose: async () => {
      await recovery.stop()
      await follower.close()
      // After the runner's last saves (preClose), which it has been sending; before the store closes under it.
      await sender?.stop()
      // Anything recorded since (nothing, normally) reaches the log before the store closes.
      await recorder?.idle(RECORDER_IDLE_MS)
      if (ownsStore) await opened.store.close?.()
    },
  }
}
