/**
 * Who may call what (decisions §4), in one table. Every protected route declares its group
 * (`{ access: "flags" }`); `decide` is the only place that reads this table. GET and HEAD are
 * reads; every other method is a write.
 */
export const SCOPES = ["eval", "test", "mgmt", "full"] as const;
export type Scope = (typeof SCOPES)[number];
export const ROLES = ["admin", "editor", "viewer"] as const;
export type Role = (typeof ROLES)[number];

export type Principal =
  | {
      kind: "apiKey";
      id: string;
      scope: Scope;
      projectId: string;
      projectSlug: string;
      environmentId: string;
      environmentSlug: string;
    }
  | { kind: "adminKey"; id: string }
  | { kind: "user"; id: string; email: string; role: Role; jti: string; expiresAt: number };

interface Rule {
  /** API-key scopes allowed; project-bound groups also require the key's own project. */
  scopes: readonly Scope[];
  adminKey: boolean;
  roles: { read: readonly Role[]; write: readonly Role[] };
}

const ALL_ROLES = ROLES;
const NONE: readonly never[] = [];

export const ACCESS = {
  /** POST /v1/evaluate, /v1/evaluate/batch */
  evaluate: { scopes: ["eval", "test", "full"], adminKey: false, roles: { read: NONE, write: NONE } },
  /** /v1/testing/... */
  testing: { scopes: ["test", "full"], adminKey: false, roles: { read: NONE, write: NONE } },
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
  /** plugins, integrations, marketplace, users, admin keys */
  admin: { scopes: NONE, adminKey: true, roles: { read: ["admin"], write: ["admin"] } },
  /** GET /v1/auth/me, POST /v1/auth/logout: a login token only */
  session: { scopes: NONE, adminKey: false, roles: { read: ALL_ROLES, write: ALL_ROLES } },
} as const satisfies Record<string, Rule>;

export type AccessGroup = keyof typeof ACCESS;

export type Decision =
  | { allow: true }
  | { allow: false; status: 401 | 403; message: string };

export const MESSAGES = {
  invalidKey: "Invalid or expired API key",
  invalidToken: "Invalid or expired token",
  scope: "This key scope does not have access to this endpoint",
  otherProject: "This key does not have access to this project",
  role: (role: Role) => `The role ${role} does not have access to this endpoint`,
} as const;

const ALLOW = { allow: true } as const;

/**
 * The decision for one request. `failure` tells how a sent credential failed (for the 401
 * message); `projectSlug` is the `{slug}` of the path, when the route has one.
 */
export function decide(
  principal: Principal | null,
  group: AccessGroup,
  method: string,
  projectSlug?: string,
  failure: "key" | "token" = "key",
): Decision {
  if (principal === null) return { allow: false, status: 401, message: failure === "token" ? MESSAGES.invalidToken : MESSAGES.invalidKey };
  const rule: Rule = ACCESS[group];
  switch (principal.kind) {
    case "apiKey":
      if (!rule.scopes.includes(principal.scope)) return { allow: false, status: 403, message: MESSAGES.scope };
      if (projectSlug !== undefined && projectSlug !== principal.projectSlug) return { allow: false, status: 403, message: MESSAGES.otherProject };
      return ALLOW;
    case "adminKey":
      return rule.adminKey ? ALLOW : { allow: false, status: 403, message: MESSAGES.scope };
    case "user": {
      const roles = method === "GET" || method === "HEAD" ? rule.roles.read : rule.roles.write;
      return roles.includes(principal.role) ? ALLOW : { allow: false, status: 403, message: MESSAGES.role(principal.role) };
    }
  }
}
