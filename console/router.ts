/**
 * A small router over the history API: the path is the state; `navigate` pushes, the back and
 * forward buttons pop. Links are plain `<a href>` (keyboard and middle-click work): a click
 * without a modifier on a same-origin link is taken here instead of loading the page again.
 */
import { useEffect, useState } from "preact/hooks";

const listeners = new Set<() => void>();
const notify = () => {
  for (const l of listeners) l();
};

export function navigate(path: string, replace = false): void {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  notify();
  window.scrollTo(0, 0);
}

/** The current location (path and query), re-rendering on every change. */
export function useLocation(): URL {
  const [, tick] = useState(0);
  useEffect(() => {
    const l = () => tick((n) => n + 1);
    listeners.add(l);
    window.addEventListener("popstate", l);
    return () => {
      listeners.delete(l);
      window.removeEventListener("popstate", l);
    };
  }, []);
  return new URL(location.href);
}

/** Same-origin link clicks become `navigate` (once, for the whole document). */
export function captureLinks(): void {
  document.addEventListener("click", (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element).closest("a");
    if (!a || a.target || a.hasAttribute("download") || a.origin !== location.origin || a.pathname.startsWith("/v1/")) return;
    e.preventDefault();
    navigate(a.pathname + a.search);
  });
}

/** `/projects/:slug/flags` against a path: its parameters, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split("/");
  const s = path.replace(/\/+$/, "").split("/");
  if (p.length !== s.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i]!.startsWith(":")) params[p[i]!.slice(1)] = decodeURIComponent(s[i]!);
    else if (p[i] !== s[i]) return null;
  }
  return params;
}
