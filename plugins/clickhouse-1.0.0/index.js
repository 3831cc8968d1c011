/**
 * ClickHouse for flagsvc: every flag evaluation becomes a row of a table, inserted through
 * ClickHouse's HTTP interface (`POST {baseUrl}/?query=INSERT INTO <table> FORMAT JSONEachRow`,
 * one JSON object per line), for SQL over raw evaluations.
 * Runs in the flagsvc sandbox: ECMAScript built-ins and `ctx` only.
 */
const DEFAULTS = { baseUrl: "http://localhost:8123", username: "default", password: "", database: "default", table: "flag_evaluations", asyncInsert: false };
/** Table and database names go into SQL unquoted: plain identifiers only. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

function settings(config) {
  const c = { ...DEFAULTS, ...(config ?? {}) };
  if (typeof c.baseUrl !== "string" || !/^https?:\/\/[^\s/]+[^\s]*$/.test(c.baseUrl)) throw new Error(`config.baseUrl must be an http(s) URL, got ${JSON.stringify(c.baseUrl)}`);
  if (typeof c.username !== "string" || c.username === "") throw new Error("config.username must be a non-empty string");
  if (typeof c.password !== "string") throw new Error("config.password must be a string");
  for (const key of ["database", "table"]) {
    if (typeof c[key] !== "string" || !IDENTIFIER.test(c[key])) throw new Error(`config.${key} must be an identifier (letters, digits, underscores; not starting with a digit), got ${JSON.stringify(c[key])}`);
  }
  if (typeof c.asyncInsert !== "boolean") throw new Error("config.asyncInsert must be true or false");
  return { ...c, baseUrl: c.baseUrl.replace(/\/+$/, "") };
}

export function activate(ctx) {
  const s = settings(ctx.config);
  ctx.log("info", `inserting evaluations into ${s.database}.${s.table} at ${s.baseUrl}`);
}

/**
 * Every record is a row (a warehouse wants them all: no de-duplication); one INSERT per batch,
 * as ClickHouse prefers few large inserts to many small ones.
 */
export async function onEvaluations(batch, ctx) {
  if (batch.length === 0) return;
  const s = settings(ctx.config);
  const rows = batch.map((r) =>
    JSON.stringify({
      evaluated_at: dateTime64(r.evaluatedAt),
      flag_key: r.flagKey,
      environment: r.environment,
      enabled: r.enabled,
      variant: r.variant,
      reason: r.reason,
      rule_id: r.ruleId,
      user_id: r.userId === null || r.userId === undefined ? null : String(r.userId),
    }),
  );
  const params = [`database=${encodeURIComponent(s.database)}`, `query=${encodeURIComponent(`INSERT INTO ${s.table} FORMAT JSONEachRow`)}`];
  if (s.asyncInsert) params.push("async_insert=1", "wait_for_async_insert=1");
  const response = await ctx.http({
    method: "POST",
    url: `${s.baseUrl}/?${params.join("&")}`,
    headers: { "x-clickhouse-user": s.username, "x-clickhouse-key": s.password, "content-type": "application/x-ndjson" },
    body: `${rows.join("\n")}\n`,
  });
  if (response.status < 200 || response.status > 299) {
    const message = `ClickHouse answered ${response.status}: ${response.body.slice(0, 300)}`;
    ctx.log("warn", message);
    throw new Error(message);
  }
}

/** ISO 8601 to the `YYYY-MM-DD hh:mm:ss.sss` (UTC) that DateTime64(3, 'UTC') parses without settings. */
function dateTime64(iso) {
  return new Date(iso).toISOString().replace("T", " ").replace("Z", "");
}
