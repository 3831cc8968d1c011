/**
 * Who may call what (decisions §4), in one table. Every protected route declares its group
 * (`{ access: "flags" }`); `decide` is the only place that reads this table. GET and HEAD are
 * reads; every other method is a write.
 */
/**
 * The spec's four, and `client`: the key a web page may carry (docs/openfeature.md). It evaluates
 * (the evaluation routes, OFREP, the OFREP change stream) and nothing else; unlike eval, the
 * key of server SDKs, it never reads the flags' rules (the definitions API).
 */
export const SCOPES = ["eval", "test", "mgmt", "full", "client"] as const;
export type Scope = (typeof SCOPES)[number];
export const ROLES = ["admin", "editor", "viewer"] as const;
export type Role = (typeof ROLES)[number];

export type Principal =
  | {
      kind: "apiKey";
      id: string;
      /** The key's name: the change log's label for its writes. */
      name: string;
      scope: Scope;
      projectId: string;
      projectSlug: string;
      environmentId: string;
      environmentSlug: string;
      /**
       * Which of the key's secrets was presented: the first 16 hex characters of the SHA-256 of
       * its stored hash (a rotated key has two for its grace period). Stream tokens are bound to
       * it (src/modules/streams/tokens.ts), so that they stop working once that secret does.
       */
      secretTag: string;
    }
  | { kind: "adminKey"; id: string; name: string }
  | { kind: "user"; id: string; email: string; role: Role; jti: string; expiresAt: number };

export type ApiKeyPrincipal = Extract<Principal, { kind: "apiKey" }>;

interface Rule {
  /** API-key scopes allowed; project-bound groups also require the key's own project. */
  scopes: readonly Scope[];
  adminKey: boolean;
  roles: { read: readonly Role[]; write: readonly Role[] };
  /** The group's name in the 403 that says what it takes (default "This endpoint"). */
  label?: string;
}

const ALL_ROLES = ROLES;
const NONE: readonly never[] = [];

export const ACCESS = {
  /** POST /v1/evaluate, /v1/evaluate/batch, the OFREP routes and the OFREP change stream */
  evaluate: { scopes: ["eval", "test", "full", "client"], adminKey: false, roles: { read: NONE, write: NONE }, label: "Evaluation" },
  /**
   * GET /v1/definitions and its stream: flag definitions for local evaluation (server SDKs).
   * Rules may hold e-mail lists: every key but a client key, the one a web page may carry.
   */
  definitions: { scopes: ["eval", "test", "mgmt", "full"], adminKey: false, roles: { read: NONE, write: NONE }, label: "The definitions API" },
  /**
   * POST /v1/projects/{slug}/environments/{env}/evaluate and .../evaluate/batch: evaluating as a
   * reader of the flags (the console's playground). A POST that writes nothing: who reads the
   * flags may call it, viewers included.
   */
  evaluateAs: { scopes: ["mgmt", "full"], adminKey: true, roles: { read: ALL_ROLES, write: ALL_ROLES } },
  /** /v1/testing/...: test/full keys (their project), and login tokens as for flags (the console; docs/decisions.md: "The console's test sessions and flag-list sparklines") */
  testing: { scopes: ["test", "full"], adminKey: false, roles: { read: ALL_ROLES, write: ["admin", "editor"] }, label: "The Testing API" },
  /** GET /v1/projects and /v1/projects/{slug} (GET, PATCH, DELETE) */
  projects: { scopes: ["mgmt", "full"], adminKey: true, roles: { read: ALL_ROLES, write: ["admin"] } },
  /** POST /v1/projects: admin key or admin JWT only */
  projectCreate: { scopes: NONE, adminKey: true, roles: { read: ["admin"], write: ["admin"] } },
  /** /v1/projects/{slug}/environments */
  environments: { scopes: ["mgmt", "full"], adminKey: true, roles: { read: ALL_ROLES, write: ["admin"] } },
  /** flags and their states */
  flags: { scopes: ["mgmt", "full"], adminKey: true, roles: { read: ALL_ROLES, write: ["admin", "editor"] } },
  /** /v1/projects/{slug}/api-keys, /v1/api-keys/{keyId} */
  apiKeys: { scopes: ["mgmt", "full"], adminKey: true, roles: { read: ALL_ROLES, write: ["admin", "editor"] } },
  /** webhooks and their deliveries */
  webhooks: { scopes: ["mgmt", "full"], adminKey: true, roles: { read: ["admin", "editor"], write: ["admin", "editor"] } },
  /** GET /v1/projects/{slug}/audit-log: read-only, as the project's other reads */
  audit: { scopes: ["mgmt", "full"], adminKey: true, roles: { read: ALL_ROLES, write: NONE } },
  /** GET /v1/audit-log: the whole instance, its users and admin keys included */
  auditInstance: { scopes: NONE, adminKey: true, roles: { read: ["admin"], write: NONE } },
  /** plugins, integrations, marketplace, users, admin keys */
  admin: { scopes: NONE, adminKey: true, roles: { read: ["admin"], write: ["admin"] } },
  /** GET /v1/auth/me, POST /v1/auth/logout: a login token only */
  session: { scopes: NONE, adminKey: false, roles: { read: ALL_ROLES, write: ALL_ROLES } },
} as const satisfies Record<string, Rule>;

export type AccessGroup = keyof typeof ACCESS;

export type Decision =
  | { allow: true }
  | { allow: false; status: 401 | 403; message: string; details?: { path: string; message: string }[] };

/**
 * How a request without a caller failed: no `Authorization` header, one that names no valid key
 * or token, or a value shaped like one of our keys or tokens sent without `Bearer ` in front
 * (`noBearer`: whether it would be valid is not looked up).
 */
export type Failure = "missing" | "key" | "token" | "noBearer";

/** "a, b or c" */
const orList = (items: readonly string[]) => (items.length < 2 ? items.join("") : `${items.slice(0, -1).join(", ")} or ${items.at(-1)}`);

/**
 * What a group takes, for a caller whose kind of credential it never takes (an admin key or a
 * login token on evaluation): read from the table, so that the message cannot drift from it.
 * API keys never see it (the spec fixes their message).
 */
const takes = (rule: Rule) =>
  `${rule.label ?? "This endpoint"} takes ${rule.scopes.length > 0 ? `a project API key of scope ${orList(rule.scopes)}` : "a login token (POST /v1/auth/login)"}`;

/**
 * The `details` message of an API key's scope 403 (whose `message` the spec fixes): the key's
 * scope and what the group takes instead, read from the table. Groups that take no API key say
 * which other credentials they take (an admin key, a login token and its roles).
 */
function scopeDetail(scope: Scope, rule: Rule): string {
  const has = `This key has scope ${scope}`;
  if (rule.scopes.length > 0) return `${has}; this endpoint takes a key of scope ${orList(rule.scopes)}`;
  const roles = ROLES.filter((r) => rule.roles.read.includes(r) || rule.roles.write.includes(r));
  const login = roles.length === ROLES.length ? "a login token" : `a login token of role ${orList(roles)}`;
  const others = rule.adminKey ? ["an admin key", login] : [login];
  return `${has}; this endpoint takes no API key, only ${orList(others)} (POST /v1/auth/login)`;
}

/** Where `details` point for what the `Authorization` header holds. */
const AUTHORIZATION = "headers.authorization";

export const MESSAGES = {
  invalidKey: "Invalid or expired API key",
  invalidToken: "Invalid or expired token",
  scope: "This key scope does not have access to this endpoint",
  otherProject: "This key does not have access to this project",
  role: (role: Role) => `The role ${role} does not have access to this endpoint`,
  takes: (group: AccessGroup) => takes(ACCESS[group]),
  /** The `details` entry of the 401 for a request without an `Authorization` header. */
  missingHeader: "Missing: send Authorization: Bearer <credential>",
  /** The `details` entry of the 401 for one of our keys or tokens sent without `Bearer `. */
  noBearer: 'Expected "Authorization: Bearer <key>"; the header holds a key without the Bearer prefix',
} as const;

const ALLOW = { allow: true } as const;

/**
 * The decision for one request. `failure` tells how a request without a caller failed (for the
 * 401's message and details); `projectSlug` is the `{slug}` of the path, when the route has one.
 */
export function decide(principal: Principal | null, group: AccessGroup, method: string, projectSlug?: string, failure: Failure = "key"): Decision {
  if (principal === null) return refuseAnonymous(failure);
  const rule: Rule = ACCESS[group];
  switch (principal.kind) {
    case "apiKey":
      if (!rule.scopes.includes(principal.scope)) {
        return { allow: false, status: 403, message: MESSAGES.scope, details: [{ path: AUTHORIZATION, message: scopeDetail(principal.scope, rule) }] };
      }
      if (projectSlug !== undefined && projectSlug !== principal.projectSlug) return { allow: false, status: 403, message: MESSAGES.otherProject };
      return ALLOW;
    case "adminKey":
      return rule.adminKey ? ALLOW : { allow: false, status: 403, message: takes(rule) };
    case "user": {
      const roles = method === "GET" || method === "HEAD" ? rule.roles.read : rule.roles.write;
      if (roles.includes(principal.role)) return ALLOW;
      const anyRole = rule.roles.read.length > 0 || rule.roles.write.length > 0;
      return { allow: false, status: 403, message: anyRole ? MESSAGES.role(principal.role) : takes(rule) };
    }
  }
}

/**
 * The 401 of decisions §3, with the spec's message for keys; a request that sent no
 * `Authorization` header at all, or a key or token without `Bearer `, is told so in `details`.
 */
function refuseAnonymous(failure: Failure): Decision {
  switch (failure) {
    case "token":
      return { allow: false, status: 401, message: MESSAGES.invalidToken };
    case "key":
      return { allow: false, status: 401, message: MESSAGES.invalidKey };
    case "missing":
      return { allow: false, status: 401, message: MESSAGES.invalidKey, details: [{ path: AUTHORIZATION, message: MESSAGES.missingHeader }] };
    case "noBearer":
      return { allow: false, status: 401, message: MESSAGES.invalidKey, details: [{ path: AUTHORIZATION, message: MESSAGES.noBearer }] };
  }
}
