/** Flags and their per-environment states: routes (api-spec: Flags; decisions §6). */
import { Elysia } from "elysia";
import { accessGuard, authorOf } from "../../http/auth";
import { noContent, queryInt } from "../../http/schema";
import { EDIT_CONFLICTS, IF_MATCH_DOC, IF_NONE_MATCH_DOC, ifMatchOf, NOT_MODIFIED_RESPONSES, PRECONDITION_RESPONSES, tagged, withEtag } from "../../http/etag";
import { MATCHES_MAX_INPUT } from "../../evaluation/engine";
import { OPERATORS, PREREQUISITE_MAX_DEPTH } from "../../evaluation/types";
import { ProjectParams } from "../projects/model";
import { Flag, FlagList, FlagListQuery, FlagParams, FlagPatch, FlagState, FlagStates, LIMITS, NewFlag, PER_PAGE_MAX, StateParams, StatePut } from "./model";
import { flagEtag, stateEtag, type FlagService } from "./service";

const FLAGS = ["Flags"];
const FLAG_ETAG = "The answer carries the flag's `ETag` (strong: a hash of the flag's definition as answered, `stale` aside; it changes with every change of the flag, not with its states, which have their own).";
const STATE_ETAG = "The answer carries the state's `ETag` (strong: a hash of the state as answered, `lastEvaluatedAt` aside; it changes with every change of the state).";
const WHO = "API keys of scope mgmt or full (their own project only: another project's slug is 403 FORBIDDEN), admin keys, and login JWTs (writes: admin and editor roles)";
const DEFINITION = `Variants \`{ key, name?, description?, weight? }\`: keys unique in the flag; either no variant has a weight or all have, summing to 100, at most 3 decimals. Rules \`{ id?, name?, conditions?, enabled?, variant? }\` are evaluated top to bottom, first match wins; conditions of a rule are AND-ed and none matches everyone; \`enabled\` defaults to true; \`variant\` names one of the flag's variants or is null. A rule sent without \`id\` gets a new \`rule_...\`; sent back with its id, it keeps it. Conditions \`{ attribute, operator, value }\`, operators ${OPERATORS.join(", ")}; a value of the wrong type for its operator is a 400 (equals: string, number or boolean; not_equals: string or number; in/not_in: an array of at most ${LIMITS.listValues}; contains/starts_with: string; greater_than/less_than/greater_than_or_equal/less_than_or_equal: number; is_true/is_false: boolean or omitted; semver_equals/semver_greater_than/semver_less_than: a valid semantic version such as 1.2.3, compared as versions (an attribute that is not one never matches); matches: a regular expression in RE2 syntax, found anywhere in a string attribute of at most ${MATCHES_MAX_INPUT} characters (longer never matches; linear time); before/after: an ISO 8601 date-time with a zone such as 2026-01-01T00:00:00Z, the attribute an ISO string or epoch milliseconds; in_segment/not_in_segment: the key of a segment of the project, with attribute userId: an unknown key is a 400 at the condition's value), and an operand its operator cannot use (a version, pattern or time that does not parse) a 400 saying why (docs/targeting.md). \`bucketBy\`: the context attribute percentage rollouts and variant weights hash on (default userId; a missing one is treated as a missing userId); shown on the flag only when it is not userId. Prerequisites \`[{ flagKey, variant? }]\` (docs/targeting.md, Prerequisites): every one must be met (that flag, evaluated for the same context in the same environment, is enabled and serves \`variant\` when given), else the flag answers \`enabled: false, variant: null\`, reason PREREQUISITE_FAILED; an unknown flag, the flag itself, a variant that flag does not have, a cycle (the message names it, \`a -> b -> a\`) and a chain deeper than ${PREREQUISITE_MAX_DEPTH} are 400s. At most ${LIMITS.rules} rules, ${LIMITS.conditions} conditions a rule, ${LIMITS.variants} variants, ${LIMITS.prerequisites} prerequisites. Every problem is listed in \`details\`; a refused write changes nothing.`;

export const flagsRoutes = (flags: FlagService) =>
  new Elysia({ name: "flagsvc/flags" })
    .use(accessGuard())
    .post("/v1/projects/:slug/flags", async ({ params, body, principal, set, status }) => {
      const flag = await flags.createFlag(authorOf({ principal, set }), params.slug, body);
      return status(201, withEtag(set, flag, flagEtag(flag)));
    }, {
      access: "flags",
      params: ProjectParams,
      body: NewFlag,
      response: { 201: Flag },
      detail: {
        tags: FLAGS,
        summary: "Create a flag",
        description: `Key: kebab-case, 1 to 128 characters, unique in the project (a taken key is 409 CONFLICT), immutable. \`rules\` may be sent on create as on PATCH. The flag starts disabled in every environment. ${FLAG_ETAG} ${DEFINITION} ${WHO}.`,
      },
    })
    .get("/v1/projects/:slug/flags", ({ params, query }) => flags.listFlags(params.slug, { ...query, page: queryInt(query.page), perPage: queryInt(query.perPage) }), {
      access: "flags",
      params: ProjectParams,
      query: FlagListQuery,
      response: { 200: FlagList },
      detail: {
        tags: FLAGS,
        summary: "List flags",
        description: `Ordered by key; items hold id, key, name, createdAt, updatedAt, stale. \`stale=true|false\`: only stale flags, or only the others (docs/insights.md: \`stale\` is \`{ reason: not_evaluated | fully_rolled_out, since }\` or null). \`q\`: case-insensitive substring of key or name. \`environment\`: only flags whose state was set in that environment (an unknown environment is 404); with it, \`enabled=true|false\` filters by that state (without it, 400). \`page\` (default 1, 1 to 999999999) and \`perPage\` (default 20, 1 to ${PER_PAGE_MAX}); out of range is 400; a page past the end is empty. \`include=states\`: each item also holds \`states\`, its state in every environment exactly as \`GET .../flags/{key}/states\` answers them (\`lastEvaluatedAt\` included, environments in the order they were added) plus \`etag\`, the state's ETag as its GET answers it in the header (what a PUT of it sends as \`If-Match\`), read for the whole page at once (a list of flags with their states in one request, as the console's list shows them); without it the items are as before. ${WHO}.`,
      },
    })
    .get("/v1/projects/:slug/flags/:key", async ({ params, request, set }) => {
      const flag = await flags.getFlag(params.slug, params.key);
      return tagged(request, set, flag, flagEtag(flag));
    }, {
      access: "flags",
      params: FlagParams,
      response: { 200: Flag },
      detail: {
        tags: FLAGS,
        summary: "Get a flag",
        description: `The whole flag, rules included, and \`stale\`: null, or \`{ reason, since }\` when the flag is stale (docs/insights.md, Stale flags): \`not_evaluated\` (no production evaluation in any environment for the project's staleAfterDays), \`fully_rolled_out\` (one value to everyone in every environment, unchanged that long); never for a flag younger than that; checked every 5 minutes. ${FLAG_ETAG} \`If-None-Match\` naming it is answered 304 with no body. Unknown project or flag: 404. ${WHO}.`,
        parameters: [IF_NONE_MATCH_DOC],
        responses: NOT_MODIFIED_RESPONSES,
      },
    })
    .patch("/v1/projects/:slug/flags/:key", async ({ params, body, principal, set, request }) => {
      const ifMatch = ifMatchOf(request.headers.get("if-match"));
      const flag = await flags.updateFlag(authorOf({ principal, set }), params.slug, params.key, body, ifMatch);
      return withEtag(set, flag, flagEtag(flag));
    }, {
      access: "flags",
      params: FlagParams,
      body: FlagPatch,
      response: { 200: Flag },
      detail: {
        tags: FLAGS,
        summary: "Update a flag",
        description: `Updatable: name, description (null clears it), variants, rules, bucketBy (null or userId: the default), prerequisites. \`rules\` and \`prerequisites\` replace the whole array (\`prerequisites: null\` or \`[]\` removes them). Removing a variant that another flag's prerequisite requires is a 400 at \`body.variants\` naming that flag. \`key\` in the body is a 400: keys are immutable. New variants are checked against the stored rules too: removing a variant a stored rule serves is a 400 at \`body.variants\` naming the rule. A PATCH that changes nothing leaves \`updatedAt\` alone. ${FLAG_ETAG} ${EDIT_CONFLICTS} ${DEFINITION} ${WHO}.`,
        parameters: [IF_MATCH_DOC],
        responses: PRECONDITION_RESPONSES,
      },
    })
    .delete(
      "/v1/projects/:slug/flags/:key",
      async ({ params, principal, set, status }) => {
        await flags.deleteFlag(authorOf({ principal, set }), params.slug, params.key);
        return status(204);
      },
      {
        access: "flags",
        params: FlagParams,
        detail: {
          tags: FLAGS,
          summary: "Delete a flag",
          responses: noContent("Deleted, with its state in every environment"),
          description: `Permanent. Evaluation answers FLAG_NOT_FOUND for its key from the next request on. A flag that is another flag's prerequisite is not deleted: 409 CONFLICT naming the dependants, one \`details\` entry each (\`path: flags.{key}.prerequisites\`). ${WHO}.`,
        },
      },
    )
    .get("/v1/projects/:slug/flags/:key/states", ({ params }) => flags.getStates(params.slug, params.key), {
      access: "flags",
      params: FlagParams,
      response: { 200: FlagStates },
      detail: {
        tags: FLAGS,
        summary: "Get a flag's state in every environment",
        description: `\`{ flagKey, states }\`: one state per environment of the project, in the order the environments were added (as \`GET /v1/projects/{slug}/environments\` lists them), each exactly as \`GET .../states/{environment}\` answers it, \`lastEvaluatedAt\` included (the last production evaluation there, null when never; docs/insights.md): an environment where the state was never set gives \`{ enabled: false, rolloutPercentage: null }\` with the flag's createdAt as updatedAt. Unknown project or flag: 404. ${WHO}.`,
      },
    })
    .get("/v1/projects/:slug/flags/:key/states/:environment", async ({ params, request, set }) => {
      const state = await flags.getState(params.slug, params.key, params.environment);
      return tagged(request, set, state, stateEtag(state));
    }, {
      access: "flags",
      params: StateParams,
      response: { 200: FlagState },
      detail: {
        tags: FLAGS,
        summary: "Get a flag's state in an environment",
        description: `A flag whose state was never set there is disabled: \`{ enabled: false, rolloutPercentage: null }\`, with the flag's createdAt as updatedAt. \`lastEvaluatedAt\`: the last production evaluation of the flag there (test-session overrides do not count; evaluations not yet flushed do), null when never (docs/insights.md). ${STATE_ETAG} \`If-None-Match\` naming it is answered 304 with no body. Unknown project, flag or environment: 404. ${WHO}.`,
        parameters: [IF_NONE_MATCH_DOC],
        responses: NOT_MODIFIED_RESPONSES,
      },
    })
    .put("/v1/projects/:slug/flags/:key/states/:environment", async ({ params, body, principal, set, request }) => {
      const ifMatch = ifMatchOf(request.headers.get("if-match"));
      const state = await flags.putState(authorOf({ principal, set }), params.slug, params.key, params.environment, body, ifMatch);
      return withEtag(set, state, stateEtag(state));
    }, {
      access: "flags",
      params: StateParams,
      body: StatePut,
      response: { 200: FlagState },
      detail: {
        tags: FLAGS,
        summary: "Set a flag's state in an environment",
        description: `\`enabled\` is required. \`rolloutPercentage\`: 0 to 100 with at most 3 decimals; omitted keeps the current value, null clears it (all users). Evaluation sees the new state from the next request on. A PUT that changes nothing writes nothing (updatedAt stays). ${STATE_ETAG} ${EDIT_CONFLICTS} Unknown project, flag or environment: 404. ${WHO}.`,
        parameters: [IF_MATCH_DOC],
        responses: PRECONDITION_RESPONSES,
      },
    });
