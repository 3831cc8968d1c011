/** Health and version: `GET /v1/health` as the server answers it. */
import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { ErrorBanner, Loading } from "../ui";

export function HealthPage() {
  const [health, setHealth] = useState<Record<string, unknown> | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    api<Record<string, unknown>>("GET", "/v1/health").then(setHealth, setError);
  }, []);
  return (
    <>
      <h1>Health</h1>
      <ErrorBanner error={error} />
      {health === null ? (
        !error && <Loading />
      ) : (
        <dl class="facts">
          {Object.entries(health)
            .filter(([, v]) => typeof v !== "object")
            .map(([k, v]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{String(v)}</dd>
              </div>
            ))}
        </dl>
      )}
    </>
  );
}
