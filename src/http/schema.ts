/**
 * Schema helpers shared by the modules' model.ts files. Elysia's `t.Integer` (a string or an
 * integer, converted with `+value`) is used nowhere: bodies and responses take TypeBox's plain
 * integer, query strings `QueryInt`.
 */
import { Type, type IntegerOptions, type SchemaOptions, type TLiteral, type TUnion } from "@sinclair/typebox";

export const ResponseInt = (options?: IntegerOptions) => Type.Integer(options);

/** An integer in a request body: plain TypeBox, so `"60"` is a 400 rather than coerced. */
export const BodyInt = (options?: IntegerOptions) => Type.Integer(options);

/**
 * A whole number in a query string, as decimal digits that `pattern` bounds (ONE_TO_100,
 * ONE_OR_MORE); the route reads it with `queryInt`. Elysia's `t.Integer` would take `0x10`,
 * `1e2`, `+1` or ` 5` (it converts with `+value`) and documents a string branch whose
 * `default: 0` makes the API document invalid.
 */
export const QueryInt = (pattern: string, description: string, error: string) => Type.String({ pattern, description, error });
export const ONE_TO_100 = "^(100|[1-9][0-9]?)$";
export const ONE_OR_MORE = "^[1-9][0-9]{0,8}$";
export const queryInt = (value: string | undefined): number | undefined => (value === undefined ? undefined : Number(value));

/**
 * One of `values`, as a union of literals: not `t.UnionEnum`, whose schema gets a `default` (its
 * first value) that Elysia fills into an omitted query parameter.
 */
export const OneOf = <const T extends readonly string[]>(values: T, options: SchemaOptions = {}): TUnion<{ -readonly [K in keyof T]: TLiteral<T[K]> }> =>
  Type.Union(
    values.map((v) => Type.Literal(v)),
    { error: `Must be one of ${values.join(", ")}`, ...options },
  ) as never;

/** Slugs of decisions §2: kebab-case, 1 to 64 characters. */
export const SLUG_PATTERN = "^[a-z0-9]+(-[a-z0-9]+)*$";
export const Slug = (description = "kebab-case, 1 to 64 characters") =>
  Type.String({
    pattern: SLUG_PATTERN,
    minLength: 1,
    maxLength: 64,
    description,
    error: "Must be kebab-case (a-z, 0-9, single hyphens between), 1 to 64 characters",
  });

/**
 * The OpenAPI entry of a 204 route, for `detail.responses`. A `response: { 204: t.Void() }`
 * schema would come out as `content: { type: "void" }`, which is not valid OpenAPI.
 */
export const noContent = (description = "Done; no body") => ({ 204: { description } });

/** A timestamp in a response: ISO 8601 UTC with milliseconds (decisions §2). */
export const Timestamp = (description = "ISO 8601 UTC with milliseconds") => Type.String({ format: "date-time", description });
