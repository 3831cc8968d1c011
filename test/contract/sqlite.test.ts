/**
 * Every store's contract suite (test/contract/*.contract.ts) on SQLite: each test gets a fresh,
 * migrated database file, built as the server builds its own (src/server.ts).
 */
import { rmSync } from "node:fs";
import { loadConfig } from "../../src/config";
import { SqliteChangeLog } from "../../src/changes/sqlite";
import { createStores, openStore } from "../../src/server";
import { tempDir } from "../helpers";
import type { MakeBackend } from "./backend";
import { describeAuditStoreContract } from "./audit.contract";
import { describeChangeLogContract } from "./change-log.contract";
import { describeDefinitionsStoreContract } from "./definitions.contract";
import { describeFlagStoreContract } from "./flags.contract";
import { describeInsightsStoreContract } from "./insights.contract";
import { describeAdminKeyStoreContract, describeApiKeyStoreContract, describeUserStoreContract } from "./keys-users.contract";
import { describeIntegrationStoreContract, describePluginStoreContract } from "./plugins-integrations.contract";
import { describeProjectStoreContract } from "./projects.contract";
import { describeScheduleStoreContract } from "./schedules.contract";
import { describeSegmentStoreContract } from "./segments.contract";
import { describeTestSessionStoreContract } from "./test-sessions.contract";
import { describeWebhookStoreContract } from "./webhooks.contract";

/** One function: the lead's `openSqliteBackend` (src/db/backend.ts) takes its place once it lands. */
const makeBackend: MakeBackend = async ({ clock, bus }) => {
  const dir = tempDir("flagsvc-contract-");
  const store = openStore(loadConfig({ SVC_DATA_DIR: dir }));
  const changeLog = new SqliteChangeLog(store, bus, clock);
  return {
    changeLog,
    stores: createStores(changeLog),
    close() {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

describeChangeLogContract(makeBackend);
describeProjectStoreContract(makeBackend);
describeFlagStoreContract(makeBackend);
describeSegmentStoreContract(makeBackend);
describeScheduleStoreContract(makeBackend);
describeUserStoreContract(makeBackend);
describeAdminKeyStoreContract(makeBackend);
describeApiKeyStoreContract(makeBackend);
describeWebhookStoreContract(makeBackend);
describeAuditStoreContract(makeBackend);
describeTestSessionStoreContract(makeBackend);
describeInsightsStoreContract(makeBackend);
describePluginStoreContract(makeBackend);
describeIntegrationStoreContract(makeBackend);
describeDefinitionsStoreContract(makeBackend);
