/**
 * Editions (decisions §9): `SVC_EDITION` is `ce` (default) or `pro`. This file is the one
 * place that knows what the edition gates, so every Pro endpoint and behaviour asks here:
 * - a Pro-only route declares `{ edition: "pro" }` (the `editionGuard` macro below): on CE it
 *   answers 403 PRO_EDITION_REQUIRED, after the access decision (401/403 come first) and before
 *   the body is validated, and the API document marks the operation `x-flagsvc-edition: pro`;
 * - a Pro behaviour inside a route common to both editions (the honoured session TTL, the
 *   separate session token) branches on `isPro(config)`;
 * - code that must refuse outside a route calls `requirePro(config)`.
 */
import { Elysia } from "elysia";
import type { Config, Edition } from "../config";
import { ApiError, UnreadBody } from "./errors";

export const PRO_REQUIRED_MESSAGE = "This endpoint requires the Pro edition";

export const isPro = (config: Pick<Config, "edition">): boolean => config.edition === "pro";

/** Throws 403 PRO_EDITION_REQUIRED unless this instance runs the Pro edition. */
export function requirePro(config: Pick<Config, "edition">): void {
  if (!isPro(config)) throw new ApiError(403, "PRO_EDITION_REQUIRED", PRO_REQUIRED_MESSAGE);
}

/** Said in a Pro route's OpenAPI description, after its own text. */
export const PRO_ONLY_NOTE = `Pro edition only: on the Community Edition (SVC_EDITION=ce, the default) this endpoint answers 403 PRO_EDITION_REQUIRED ("${PRO_REQUIRED_MESSAGE}"), after the credential and scope checks and before the body is validated.`;

/**
 * The route option `{ edition: "pro" }`. Use it after `accessGuard()` in the plugin, and write
 * `edition` after `access` in the route's options: hooks run in that order, so a caller without
 * access gets 401/403 and never learns the edition from this endpoint.
 */
export const editionGuard = (config: Pick<Config, "edition">) =>
  new Elysia({ name: "flagsvc/edition", seed: config.edition })
    .macro({
      edition: (edition: Exclude<Edition, "ce">) => ({
        detail: { "x-flagsvc-edition": edition } as Record<string, string>,
        // An arrow function: Elysia reads hooks' source, and misreads a minified method (see
        // auth.ts). A body the parser could not take is refused after the edition (UnreadBody).
        transform: (c) => {
          requirePro(config);
          const body = (c as { body?: unknown }).body;
          if (body instanceof UnreadBody) throw body.error;
        },
      }),
    })
    .as("global");
