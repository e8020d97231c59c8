/** What a store needs to know to load its driver, an optional peer dependency. */
export interface DriverSpec<T> {
  /** The store's class name, for the errors. */
  store: string
  /** The package to import: the store's `driverModule` option, "pg" or "nats" by default. */
  specifier: string
  /** The package the store is made for, as the error names it ("pg", "nats@2"). */
  expected: string
  /** What the store uses of it, as the error names it ("Pool and Client classes"). */
  uses: string
  /** Whether a module (or its default export) has what the store uses. */
  fits(module: unknown): module is T
}

/**
 * Imports a store's driver on first use, so that constructing a store needs
 * nothing installed: a missing package is an error saying what to install,
 * a package without what the store uses is an error saying so. The
 * specifier is a variable on purpose: a bundler or a type checker must not
 * require an optional peer that the application does not use.
 */
export async function loadDriver<T>(spec: DriverSpec<T>): Promise<T> {
  const { store, specifier } = spec
  let loaded: { default?: unknown }
  try {
    loaded = (await import(specifier)) as { default?: unknown }
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err)
    // Matched on the message, not only the code: loaders (tsx, tap) rethrow without it. A missing dependency of the driver is another error.
    if (/Cannot find (?:package|module) '([^']+)'/.exec(message)?.[1] === specifier) {
      throw new Error(`${store} needs the "${specifier}" package: npm install ${specifier}`, { cause: err })
    }
    throw new Error(`${store} could not load the "${specifier}" package: ${message}`, { cause: err })
  }
  // A CommonJS package imported from ESM may hold its exports under `default` only.
  if (spec.fits(loaded)) return loaded
  if (spec.fits(loaded?.default)) return loaded.default
  throw new Error(`${store}: the "${specifier}" package has no ${spec.uses}; it should be ${spec.expected} or work like it`)
}

/** A store's `driverModule` option, checked: the package to import its driver from, `fallback` ("pg", "nats") when not given. */
export function driverModuleOption(store: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback
  if (typeof value !== "string" || value.length === 0) throw new TypeError(`${store}: opts.driverModule should be a package name, e.g. "${fallback}"`)
  return value
}
