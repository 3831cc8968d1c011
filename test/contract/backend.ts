/**
 * What the contract suites (*.contract.ts) are given: a backend typed by interfaces, opened fresh
 * (and migrated) for each test by the runner of one dialect (sqlite.test.ts; later PostgreSQL).
 * The suites reach storage only through `changeLog` and the store interfaces: no SQL, no class of
 * one dialect, no rowid; ids and times are explicit and the clock is fixed.
 */
import { ChangeBus } from "../../src/changes/bus";
import type { Author, ChangeDraft, ChangeEntry, ResourceType } from "../../src/changes/entry";
import type { ChangeLog, Tx } from "../../src/changes/log";
import type { Stores } from "../../src/context";
import type { Clock } from "../../src/lib/clock";
import type { ChangeEventStore, ChangeEventWrites } from "../../src/modules/change-events/store";
import type { CredentialStore } from "../../src/modules/credentials/store";
import type { IntegrationRuntimeStore } from "../../src/modules/integrations/store";
import type { Environment, Project, ProjectStore } from "../../src/modules/projects/store";
import type { Flag, FlagStore } from "../../src/modules/flags/store";
import type { PageRequest } from "../../src/db/paging";
import { TestClock } from "../helpers";

export interface ContractBackend {
  changeLog: ChangeLog;
  stores: Stores;
  /** What the server builds beside `stores`: the change-event queue (on a commit's transaction, or the pool), the integrations' sending side, the credentials. */
  beside: {
    changeEvents(tx?: Tx): ChangeEventStore & ChangeEventWrites;
    integrationRuntime: IntegrationRuntimeStore;
    credentials: CredentialStore;
  };
  close(): void | Promise<void>;
}

/** A fresh, migrated database with the change log and every store on it; `bus` hears the commits. */
export type MakeBackend = (deps: { clock: Clock; bus: ChangeBus }) => Promise<ContractBackend>;

/** Where every test's clock starts (test/helpers.ts `TestClock`): it moves only when the test moves it. */
/** A page that holds every row of a small fixture. */
export const ALL: PageRequest = { limit: 100, offset: 0 };

export const T0 = "2026-11-22T10:00:00.000Z";
export const T1 = "2026-11-22T11:00:00.000Z";
export const T2 = "2026-11-22T12:00:00.000Z";

export const AUTHOR: Author = { actor: { type: "system", id: "system", label: "contract" }, requestId: "req_contract" };

/** An entry's draft for a resource. */
export function change(type: ResourceType, id: string, key: string | null, project: { id: string; slug: string } | null = null, action: ChangeDraft["action"] = "created"): ChangeDraft {
  return { project, environment: null, resource: { type, id, key }, action, changes: { key: { before: null, after: key } } };
}

export function env(id: string, slug: string, createdAt = T0): Environment {
  return { id, slug, name: slug.toUpperCase(), createdAt };
}

export function project(id: string, slug: string, envs: Environment[] = [], createdAt = T0): Project {
  return { id, slug, name: `Project ${slug}`, environments: envs, staleAfterDays: 30, createdAt, updatedAt: createdAt };
}

export function flag(id: string, key: string, over: Partial<Flag> = {}): Flag {
  return { id, key, name: `Flag ${key}`, variants: [], rules: [], createdAt: T0, updatedAt: T0, ...over };
}

/** Project `p1` ("alpha") with environments `e1` ("dev") and `e2` ("prod"). */
export async function seedProject(projects: ProjectStore, id = "p1", slug = "alpha"): Promise<Project> {
  const p = project(id, slug, [env(`${id}-e1`, "dev"), env(`${id}-e2`, "prod")]);
  if (!(await projects.create(AUTHOR, p, change("project", p.id, p.slug, { id, slug })))) throw new Error("seed: project refused");
  return p;
}

export async function seedFlag(flags: FlagStore, p: Project, f: Flag): Promise<Flag> {
  if (!(await flags.create(AUTHOR, p.id, f, change("flag", f.id, f.key, { id: p.id, slug: p.slug })))) throw new Error("seed: flag refused");
  return f;
}

/** A refusal of a `decide`: what a service throws (its HTTP error). */
export class Refused extends Error {}
export function refuse(): never {
  throw new Refused("refused");
}

/** Runs `fn` on a fresh backend (its bus's publications collected in `published`), closed after. */
export async function onFresh(makeBackend: MakeBackend, fn: (b: ContractBackend, t: { clock: TestClock; published: ChangeEntry[][] }) => Promise<void>): Promise<void> {
  const bus = new ChangeBus();
  const published: ChangeEntry[][] = [];
  bus.subscribe("contract", (entries) => void published.push([...entries]));
  const clock = new TestClock(Date.parse(T0));
  const b = await makeBackend({ clock, bus });
  try {
    await fn(b, { clock, published });
  } finally {
    await b.close();
  }
}
