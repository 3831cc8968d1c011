/**
 * The flagsvc console: sign-in, the layout with its navigation, and the pages, by path.
 * A client of the public API only (api.ts); the session is the HttpOnly cookie.
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, onExpired, useSessionToken, type Session } from "./api";
import { captureLinks, match, navigate, useLocation } from "./router";
import { Field, Loading } from "./ui";
import { ProjectsPage } from "./pages/projects";
import { FlagsPage } from "./pages/flags";
import { NewFlagPage } from "./pages/new-flag";
import { FlagPage } from "./pages/flag";
import { HealthPage } from "./pages/health";
import { PlaygroundPage } from "./pages/playground";
import { HistoryPage } from "./pages/history";
import { AdminKeysPage, ApiKeysPage } from "./pages/keys";
import { UsersPage } from "./pages/users";
import { SegmentPage, SegmentsPage } from "./pages/segments";
import { WebhooksPage } from "./pages/webhooks";
import { PluginsPage, PluginsRedirect } from "./pages/plugins";
import { IntegrationsPage } from "./pages/integrations";
import { TestSessionsPage } from "./pages/test-sessions";

function SignIn({ notice, onSignedIn }: { notice: string; onSignedIn: (s: Session) => void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await api<Session>("POST", "/v1/auth/session", { email, password }));
    } catch (err) {
      setError(err as ApiError);
    } finally {
      setBusy(false);
    }
  };
  const fields = error?.fields() ?? {};
  const message =
    error === null ? "" : error.status === 429 ? `${error.message}. For your safety, sign-in is paused for this e-mail address.` : error.status === 400 ? "Enter your e-mail address and password." : error.message;
  return (
    <main class="signin" id="main">
      <h1>flagsvc</h1>
      <form onSubmit={submit} aria-describedby="signin-status" noValidate>
        <h2>Sign in</h2>
        {notice && (
          <p class="banner info" role="status">
            {notice}
          </p>
        )}
        <Field label="E-mail" type="email" name="email" autocomplete="username" value={email} onInput={setEmail} error={fields.email} required />
        <Field label="Password" type="password" name="password" autocomplete="current-password" value={password} onInput={setPassword} error={fields.password} required />
        <div id="signin-status" aria-live="polite">
          {message && (
            <p class="banner error" role="alert">
              {message}
            </p>
          )}
        </div>
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
      <p class="muted">
        <a href="/v1/docs">API reference</a>
      </p>
    </main>
  );
}

/** The project the pages are about: the one in the path, else the last one visited, else `default`. */
let lastProject = "default";

function Layout({ session, path, onSignOut, children }: { session: Session; path: string; onSignOut: () => void; children: preact.ComponentChildren }) {
  const project = /^\/projects\/([^/]+)/.exec(path)?.[1] ?? lastProject;
  lastProject = project;
  const p = `/projects/${project}`;
  const links: [string, string][] = [
    ["/projects", "Projects"],
    [`${p}/flags`, "Flags"],
    [`${p}/segments`, "Segments"],
    [`${p}/playground`, "Playground"],
    [`${p}/history`, "History"],
    [`${p}/keys`, "API keys"],
    [`${p}/webhooks`, "Webhooks"],
    [`${p}/test-sessions`, "Test sessions"],
    ["/health", "Health"],
    ...(session.user.role === "admin" ? ([[`${p}/plugins`, "Plugins"], [`${p}/integrations`, "Integrations"], ["/admin/keys", "Admin keys"], ["/admin/users", "Users"]] as [string, string][]) : []),
  ];
  const current = (href: string) => (href === "/projects" ? path === "/projects" : path.startsWith(href));
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <a class="brand" href="/projects">
          flagsvc
        </a>
        <span class="project" title="Current project">
          {decodeURIComponent(project)}
        </span>
        <span class="who">
          {session.user.email} <span class="role">{session.user.role}</span>
        </span>
        <button type="button" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <nav aria-label="Main">
        <ul>
          {links.map(([href, label]) => (
            <li key={label}>
              <a href={href} aria-current={current(href) ? "page" : undefined}>
                {label}
              </a>
            </li>
          ))}
          <li>
            <a href="/v1/docs">API docs</a>
          </li>
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}

function Page({ path, session }: { path: string; session: Session }) {
  const role = session.user.role;
  let m: Record<string, string> | null;
  if (path === "/" || path === "/projects") return <ProjectsPage role={role} />;
  if ((m = match("/projects/:slug/flags", path))) return <FlagsPage slug={m.slug!} role={role} />;
  if ((m = match("/projects/:slug/flags/new", path))) return <NewFlagPage slug={m.slug!} role={role} />;
  if ((m = match("/projects/:slug/flags/:key", path))) return <FlagPage slug={m.slug!} flagKey={m.key!} role={role} />;
  if ((m = match("/projects/:slug", path))) return <FlagsPage slug={m.slug!} role={role} />;
  if (path === "/health") return <HealthPage />;
  if ((m = match("/projects/:slug/playground", path))) return <PlaygroundPage key={m.slug} slug={m.slug!} />;
  if ((m = match("/projects/:slug/history", path))) return <HistoryPage key={m.slug} slug={m.slug!} />;
  if ((m = match("/projects/:slug/keys", path))) return <ApiKeysPage slug={m.slug!} role={role} />;
  if (path === "/admin/keys") return <AdminKeysPage role={role} />;
  if (path === "/admin/users") return <UsersPage role={role} me={session.user.id} />;
  if ((m = match("/projects/:slug/segments", path))) return <SegmentsPage slug={m.slug!} role={role} />;
  if ((m = match("/projects/:slug/segments/:key", path))) return <SegmentPage slug={m.slug!} segmentKey={m.key!} role={role} />;
  if ((m = match("/projects/:slug/webhooks", path))) return <WebhooksPage slug={m.slug!} role={role} />;
  if ((m = match("/projects/:slug/plugins", path))) return <PluginsPage key={m.slug} slug={m.slug!} role={role} />;
  if ((m = match("/projects/:slug/integrations", path))) return <IntegrationsPage key={m.slug} slug={m.slug!} role={role} />;
  if (path === "/plugins") return <PluginsRedirect slug={lastProject} />;
  if ((m = match("/projects/:slug/test-sessions", path))) return <TestSessionsPage key={m.slug} slug={m.slug!} role={role} />;
  return (
    <>
      <h1>Not found</h1>
      <p>
        Nothing here. <a href="/projects">Projects</a>
      </p>
    </>
  );
}

function App() {
  const url = useLocation();
  /** undefined: asking the server; null: signed out. */
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [notice, setNotice] = useState("");
  const signedIn = (s: Session | null, message = "") => {
    useSessionToken(s?.csrfToken ?? null);
    setSession(s);
    setNotice(message);
  };
  useEffect(() => {
    onExpired(() => signedIn(null, "Your session expired. Sign in again to continue."));
    api<Session>("GET", "/v1/auth/session").then(
      (s) => signedIn(s),
      () => signedIn(null),
    );
  }, []);
  // The session ends when its token does: back to sign-in, with a message.
  useEffect(() => {
    if (!session) return;
    const left = Date.parse(session.expiresAt) - Date.now();
    const timer = setTimeout(() => signedIn(null, "Your session expired. Sign in again to continue."), Math.max(0, Math.min(left, 2 ** 31 - 1)));
    return () => clearTimeout(timer);
  }, [session]);
  useEffect(() => {
    document.title = session ? "flagsvc console" : "Sign in · flagsvc";
  }, [session]);

  if (session === undefined) return <Loading />;
  if (session === null) {
    return (
      <SignIn
        notice={notice}
        onSignedIn={(s) => {
          signedIn(s);
          if (url.pathname === "/sign-in" || url.pathname === "/") navigate("/projects", true);
        }}
      />
    );
  }
  const signOut = async () => {
    try {
      await api("DELETE", "/v1/auth/session");
    } catch {
      // Already over (401): signed out either way.
    }
    signedIn(null, "You are signed out.");
  };
  const path = url.pathname === "/sign-in" ? "/projects" : url.pathname;
  return (
    <Layout session={session} path={path} onSignOut={signOut}>
      <Page path={path} session={session} />
    </Layout>
  );
}

captureLinks();
render(<App />, document.getElementById("app")!);
