import { createHash } from "node:crypto"
import { A2AError, ErrorCode } from "./errors.js"

/**
 * Who is calling: bearer tokens and API keys looked up in a table, or a
 * host's own check. Free of any HTTP framework: it reads plain headers.
 */

type Headers = Record<string, string | string[] | undefined>

export interface AuthSettings<Request> {
  /** secret → principal. A secret is accepted as `Authorization: Bearer <secret>` or as `x-api-key: <secret>`. */
  tokens?: Record<string, string>
  /** Your own check, tried when no token matched: the principal, or undefined to refuse. */
  verify?: (request: Request) => string | undefined | Promise<string | undefined>
  /**
   * The principal that owns the Tasks saved without an owner, before authentication was turned on.
   * Omitted: nobody does; every principal gets "task not found" for them and ListTasks leaves them out.
   * Named: that principal alone sees, continues and cancels them; they are never shared.
   */
  unownedTasksBelongTo?: string
}

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex")

/** Reads the credentials a request carries, if any. */
function presentedSecret(headers: Headers): string | undefined {
  const authorization = first(headers.authorization)
  const bearer = authorization && /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1]
  return bearer || first(headers["x-api-key"]) || undefined
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

export class Authenticator<Request> {
  /** Keyed by the secret's hash, so a lookup compares digests, never the secrets themselves. */
  private readonly principals = new Map<string, string>()

  constructor(private readonly settings: AuthSettings<Request>) {
    for (const [secret, principal] of Object.entries(settings.tokens ?? {})) {
      if (secret.length < 16) throw new TypeError(`toolnexus: opts.auth.tokens: a secret for ${JSON.stringify(principal)} is shorter than 16 characters; use a long random one`)
      if (typeof principal !== "string" || principal === "") throw new TypeError("toolnexus: opts.auth.tokens maps each secret to a non-empty principal name")
      this.principals.set(sha256(secret), principal)
    }
    const unowned = settings.unownedTasksBelongTo
    if (unowned !== undefined && (typeof unowned !== "string" || unowned === "")) {
      throw new TypeError("toolnexus: opts.auth.unownedTasksBelongTo should be the principal name (a non-empty string) that owns the Tasks saved before authentication was on")
    }
    if (this.principals.size === 0 && typeof settings.verify !== "function") {
      throw new TypeError("toolnexus: opts.auth needs tokens ({ secret: principal }) or a verify(request) function")
    }
  }

  /** The principal for the request, or undefined when it is not authenticated. */
  async principalOf(request: Request, headers: Headers): Promise<string | undefined> {
    const secret = presentedSecret(headers)
    const fromTable = secret === undefined ? undefined : this.principals.get(sha256(secret))
    if (fromTable !== undefined) return fromTable
    const principal = await this.settings.verify?.(request)
    return typeof principal === "string" && principal !== "" ? principal : undefined
  }

  /** Whether the table takes tokens (advertised on the agent card). */
  get usesTokens(): boolean {
    return this.principals.size > 0
  }
}

/** The agent card's security fields, in the form of the version the card is read in. */
export function securityCardFields(version: "0.3" | "1.0"): Record<string, unknown> {
  if (version === "1.0") {
    return {
      securitySchemes: {
        bearer: { httpAuthSecurityScheme: { scheme: "Bearer" } },
        apiKey: { apiKeySecurityScheme: { location: "header", name: "x-api-key" } },
      },
      securityRequirements: [{ schemes: { bearer: { list: [] } } }, { schemes: { apiKey: { list: [] } } }],
    }
  }
  return {
    securitySchemes: {
      bearer: { type: "http", scheme: "bearer" },
      apiKey: { type: "apiKey", in: "header", name: "x-api-key" },
    },
    security: [{ bearer: [] }, { apiKey: [] }],
  }
}

/** The error a request without credentials gets, on every binding (HTTP answers it with 401, gRPC with UNAUTHENTICATED). */
export function unauthenticated(): A2AError {
  return new A2AError(ErrorCode.InvalidRequest, "Unauthorized: send Authorization: Bearer <token> or x-api-key: <key>")
}
