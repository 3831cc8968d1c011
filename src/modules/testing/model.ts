/**
 * Testing API: request and response schemas (api-spec: Test session, Testing API; decisions §7,
 * §8). The schemas check shapes; what depends on the edition (the TTL range on Pro) or on the
 * stored session (the override cap, flag keys as batch keys) is checked by the service, before
 * anything is stored.
 */
import { Type } from "@sinclair/typebox";
import { Timestamp } from "../../http/schema";
import { t, type Static } from "elysia";
import { FlagKey, Variant } from "../flags/model";

export const LABEL_MAX = 200;
/** Session lifetime in seconds: the default (and the only value on CE), and Pro's range. */
export const DEFAULT_TTL_SECONDS = 3600;
export const MIN_TTL_SECONDS = 1;
export const MAX_TTL_SECONDS = 86_400;
/** At most this many overrides in one session (decisions §8). */
export const MAX_OVERRIDES = 1000;

/** A flag key as an override's key: the flags' own rule (kebab-case, 1 to 128); the flag need not exist. */
export const OverrideKey = () =>
  FlagKey("The flag to override: a flag key (kebab-case, 1 to 128 characters); the flag need not exist");

/** The variant key rule of flags (decisions §6), reused for string overrides. */
const VARIANT_KEY = Variant.properties.key;
export const VARIANT_KEY_PATTERN = VARIANT_KEY.pattern!;

const OVERRIDE_VALUE_ERROR = "Must be true, false, or a variant key (1 to 64 characters of A-Z, a-z, 0-9, _ or -)";

export const OverrideValue = t.Union([t.Boolean(), t.String({ pattern: VARIANT_KEY_PATTERN })], {
  description:
    "true or false for a boolean flag (sets `enabled`, variant null); a variant key for a multi-variant flag (served as the variant, `enabled` true). The variant is not checked against the flag's variants.",
  error: OVERRIDE_VALUE_ERROR,
});


const Overrides = (description: string) =>
  t.Record(t.String(), t.Union([t.Boolean(), t.String()]), { description });

export const NewSession = t.Object(
  {
    projectId: t.String({
      minLength: 1,
      description: "The API key's own project: its id (`proj_...`) or its slug. Any other value is 403 FORBIDDEN",
      error: "Must be a non-empty string: the project's id or slug",
    }),
    label: t.Optional(
      t.Union([t.String({ maxLength: LABEL_MAX }), t.Null()], {
        description: `Free text to recognise the session, at most ${LABEL_MAX} characters; null or omitted: none`,
        error: `Must be a string of at most ${LABEL_MAX} characters, or null`,
      }),
    ),
    // Plain TypeBox: "60" is a 400, not coerced.
    ttl: t.Optional(
      Type.Number({
        description: `Lifetime in seconds. Pro: an integer from ${MIN_TTL_SECONDS} to ${MAX_TTL_SECONDS}, default ${DEFAULT_TTL_SECONDS}. CE: ignored (always ${DEFAULT_TTL_SECONDS}), but it must still be a number`,
        error: "Must be a number of seconds",
      }),
    ),
  },
  { additionalProperties: false, title: "NewTestSession" },
);
export type NewSession = Static<typeof NewSession>;

export const Session = t.Object(
  {
    id: t.String({ description: "sess_...: names the session in the Testing API" }),
    token: t.String({
      description: "Send it as `X-Service-Session` on evaluation requests. CE: equal to `id`. Pro: a separate secret `svc_sess_` + 32 base62 characters, so the id can be shared without granting override power",
    }),
    projectId: t.String({ description: "proj_...: the id, also when the session was created with the slug" }),
    label: t.Optional(t.String({ description: "Absent when none was given" })),
    overrides: Overrides("Flag key -> override value; empty on creation; keys in alphabetical order"),
    createdAt: Timestamp("ISO 8601 UTC with milliseconds"),
    expiresAt: Timestamp("createdAt plus the TTL; from this instant on the session is gone (404, token ignored)"),
  },
  { title: "TestSession" },
);

export const SessionList = t.Object(
  { sessions: t.Array(Session, { description: "The project's live sessions, oldest first (by createdAt, then id)" }) },
  { title: "TestSessionList" },
);

export const SessionListQuery = t.Object(
  {
    projectId: t.Optional(
      t.String({
        minLength: 1,
        description: "The API key's own project: its id (`proj_...`) or its slug; omitted: the key's project. Any other value is 403 FORBIDDEN",
        error: "Must be a non-empty string: the project's id or slug",
      }),
    ),
  },
  { additionalProperties: false },
);

export const SessionOverrides = t.Object(
  {
    id: t.String({ description: "sess_..." }),
    overrides: Overrides("The session's whole map after the write: flag key -> override value, keys in alphabetical order"),
  },
  { title: "TestSessionOverrides" },
);

export const SessionParams = t.Object({ id: t.String({ description: "Session id (sess_...)" }) });
export const OverrideParams = t.Object({ id: t.String({ description: "Session id (sess_...)" }), flagKey: OverrideKey() });

export const PutOverride = t.Object({ value: OverrideValue }, { additionalProperties: false, title: "TestOverride" });
export type PutOverride = Static<typeof PutOverride>;

export const PutOverrides = t.Object(
  {
    // Keys are checked by the service (flag-key rule), so that the error names the key.
    overrides: t.Object(
      {},
      {
        additionalProperties: OverrideValue,
        // For the API document (TypeBox does not check it; the service does).
        propertyNames: { pattern: FlagKey().pattern, maxLength: FlagKey().maxLength },
        minProperties: 1,
        description: `Flag key -> true, false or a variant key; at least one. Merged into the session's overrides (a key already there is replaced, the others stay)`,
        error: "Must be a non-empty object mapping flag keys to true, false or a variant key",
      },
    ),
  },
  { additionalProperties: false, title: "TestOverridesBatch" },
);
export type PutOverrides = Static<typeof PutOverrides>;
