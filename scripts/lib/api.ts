/** Calling a running flagsvc from a bench script: JSON requests and a small concurrency pool. */

/**
 * A JSON caller whose credential defaults to `defaultKey`: JSON in, JSON out; anything but 2xx
 * throws with the answer's body. The binary's certificate is self-signed.
 */
export const apiClient = (defaultKey: string) =>
  async function api(base: string, method: string, path: string, body?: unknown, key = defaultKey): Promise<any> {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      tls: { rejectUnauthorized: false },
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };

/** Runs `task(i)` for i in [0, n), `width` at a time. */
export async function pool(n: number, width: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) await task(next++);
    }),
  );
}
