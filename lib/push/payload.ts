import { artifactEvent, statusEvent } from "../streams/events.js"
import { codecFor } from "../a2a/wire.js"
import type { PushConfigRecord, PushEvent } from "../stores/push-store.js"

/** The body of a notification POST, as sent: its exact bytes are what a signature's hash covers. */
export interface PushPayload {
  body: string
  contentType: string
}

/**
 * A stored event in the wire version of the request that created the
 * config, through the same codecs as every answer: 1.0 posts a
 * StreamResponse (`{statusUpdate}` or `{artifactUpdate}`) as
 * application/a2a+json; 0.3 posts the whole Task, as the 0.3 spec and SDKs
 * do, as application/json.
 */
export function renderPayload(event: PushEvent, version: PushConfigRecord["version"]): PushPayload {
  const { task } = event
  if (version === "0.3") return { body: JSON.stringify(codecFor("0.3").task(task)), contentType: "application/json" }
  const artifact = event.kind === "artifact" && event.artifactIndex !== undefined ? task.artifacts?.[event.artifactIndex] : undefined
  const wire = artifact
    ? codecFor("1.0").streamEvent(artifactEvent(task, artifact.artifactId === undefined ? { ...artifact, artifactId: `artifact-${event.artifactIndex}` } : artifact), false)
    : event.kind === "artifact"
      ? // Its artifact is gone (a store that trimmed it): the whole Task says what there is.
        codecFor("1.0").streamEvent({ type: "task", task }, false)
      : codecFor("1.0").streamEvent(statusEvent(task), false)
  return { body: JSON.stringify(wire), contentType: "application/a2a+json" }
}

/**
 * Whether a stored event goes out inside the next one rather than as a POST of its own. Every save that
 * reports an artifact reports its status with it, in that order (see transitionSaver); 0.3 posts the whole
 * Task for each, so the two bodies would be the same bytes under two Idempotency-Keys. For a 0.3 config
 * the artifact event is settled unsent and the status event carries the change: one POST per change.
 */
export function sentWithNextEvent(event: PushEvent, version: PushConfigRecord["version"]): boolean {
  return version === "0.3" && event.kind === "artifact"
}
