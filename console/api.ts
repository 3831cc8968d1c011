/**
 * The console's only way to the server: the public API, same origin. The session lives in the
 * HttpOnly cookie (the browser sends it; no script can read it); the CSRF token, in memory only,
 * goes with every unsafe method. Errors keep the API's `{error, message, details}`; `fields()`
 * maps `details[].path` (`body.variants[0].key`) to the form field it belongs to.
 */
export type Role = "admin" | "editor" | "viewer";
export interface User {
  id: string;
  email: string;
  role: Role;
}
export interface Session {
  expiresAt: string;
  user: User;
  csrfToken: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: { path: string; message: string }[] = [],
  ) {
    super(message);
  }

  /** Field messages by field path without its `body.`/`query.` prefix (`name`, `variants[0].key`). */
  fields(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const d of this.details) out[d.path.replace(/^(?:body|query|params)\.?/, "") || "_"] ??= d.message;
    return out;
  }
}

let csrf = "";
let expired: () => void = () => {};

/** Called with each session the server gives (sign-in, reload), and when it ends (null). */
export function useSessionToken(token: string | null): void {
  csrf = token ?? "";
}

/** What to do when the server says the session is no more (401 on any call but sign-in). */
export function onExpired(handler: () => void): void {
  expired = handler;
}

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  return (await tagged<T>(method, path, body)).data;
}

/**
 * `api` with edit conflicts (docs/decisions.md): `ifMatch` (the ETag of the version loaded) goes
 * as `If-Match`, so a change made meanwhile by someone else is refused (412, its message says
 * who changed what) instead of overwritten; the answer comes with its new `ETag`.
 */
export async function tagged<T = unknown>(method: string, path: string, body?: unknown, ifMatch?: string | null): Promise<{ data: T; etag: string | null }> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (ifMatch) headers["if-match"] = ifMatch;
  if (UNSAFE.has(method) && csrf !== "") headers["x-csrf-token"] = csrf;
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  } catch {
    throw new ApiError(0, "NETWORK", "The server could not be reached");
  }
  const etag = res.headers.get("etag");
  if (res.status === 204 || res.status === 304) return { data: undefined as T, etag };
  const data = (await res.json().catch(() => null)) as { error?: string; message?: string; details?: { path: string; message: string }[] } | null;
  if (!res.ok) {
    if (res.status === 401 && !path.startsWith("/v1/auth/session")) expired();
    throw new ApiError(res.status, data?.error ?? "ERROR", data?.message ?? `HTTP ${res.status}`, data?.details);
  }
  return { data: data as T, etag };
}

/** What each role may change, as the server's access table says (src/http/access.ts). */
const WRITERS = {
  projects: ["admin"],
  environments: ["admin"],
  flags: ["admin", "editor"],
  /** read and write: viewers do not see webhooks */
  webhooks: ["admin", "editor"],
} as const satisfies Record<string, readonly Role[]>;

export const can = (role: Role, group: keyof typeof WRITERS): boolean => (WRITERS[group] as readonly Role[]).includes(role);

// The API's shapes the console reads.
export interface Environment {
  id: string;
  slug: string;
  name: string;
}
export interface Project {
  id: string;
  slug: string;
  name: string;
  environments: Environment[];
}
export interface FlagItem {
  key: string;
  name: string;
  updatedAt: string;
  stale: { reason: string; since: string } | null;
}
export interface FlagState {
  environment: string;
  enabled: boolean;
  rolloutPercentage: number | null;
}
