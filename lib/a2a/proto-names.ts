/**
 * ProtoJSON's field names on input. A2A 1.0 adopts ProtoJSON, whose parsers
 * take a field by its JSON name (`messageId`) or by its proto name
 * (`message_id`); peers built on protobuf libraries may send the latter.
 * Requests are read with the JSON names after this step, on every binding;
 * answers always use the JSON names.
 */

/** Fields whose value is the peer's own data (google.protobuf.Struct or Value): their keys are never renamed. */
const FREE_FORM = new Set(["metadata", "data"])

/** A proto field name: lower-case words joined by underscores. */
const PROTO_NAME = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$/

/** Request messages nest a few levels (params.message.parts[i].file, configuration.pushNotificationConfig.authentication): deeper values are left as they are. */
const MAX_RENAME_DEPTH = 8

/** `message_id` → `messageId`. */
export function jsonName(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase())
}

/**
 * `value` with every proto field name replaced by its JSON name, outside
 * free-form fields; the same object when nothing needed renaming. When a
 * field is given both ways, the JSON name wins (a REST path's value over a
 * body's, for one).
 */
export function withJsonNames<T>(value: T, depth = 0): T {
  if (value === null || typeof value !== "object" || depth > MAX_RENAME_DEPTH) return value
  if (Array.isArray(value)) {
    const items: readonly unknown[] = value
    let copy: unknown[] | undefined
    items.forEach((item, index) => {
      const renamed = withJsonNames(item, depth + 1)
      if (renamed !== item) (copy ??= [...items])[index] = renamed
    })
    return (copy ?? value) as T
  }
  const source = value as Record<string, unknown>
  let copy: Record<string, unknown> | undefined
  for (const key of Object.keys(source)) {
    const item = source[key]
    const renamed = FREE_FORM.has(key) ? item : withJsonNames(item, depth + 1)
    const name = PROTO_NAME.test(key) ? jsonName(key) : key
    if (copy === undefined && name === key && renamed === item) continue
    copy ??= copyUpTo(source, key)
    if (name !== key && Object.hasOwn(source, name)) continue // the JSON name, given too, wins
    define(copy, name, renamed)
  }
  if (copy === undefined) return value
  return copy as T
}

/** A copy of `source` holding the fields before `key`, in their order. */
function copyUpTo(source: Record<string, unknown>, key: string): Record<string, unknown> {
  const copy: Record<string, unknown> = {}
  for (const earlier of Object.keys(source)) {
    if (earlier === key) break
    define(copy, earlier, source[earlier])
  }
  return copy
}

/** Sets an own field, even one named `__proto__` (JSON.parse makes such fields; an assignment would set the prototype). */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/** Renames proto field names in a flat object of query values in place (a REST query string). */
export function renameQueryFields(query: Record<string, unknown>): void {
  for (const key of Object.keys(query)) {
    if (!PROTO_NAME.test(key)) continue
    const name = jsonName(key)
    if (!Object.hasOwn(query, name)) query[name] = query[key]
    delete query[key]
  }
}
