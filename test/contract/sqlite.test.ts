/**
 * Every store's contract suite (test/contract/*.contract.ts) on SQLite: each test gets a fresh,
 * migrated database file, opened as the server opens its own (`openSqliteBackend`).
 */
import { rmSync } from "node:fs";
import { loadConfig } from "../../src/config";
import { openSqliteBackend } from "../../src/db/sqlite-backend";
import { SqliteChangeEventStore } from "../../src/modules/change-events/store";
import { tempDir } from "../helpers";
import type { MakeBackend } from "./backend";
import { describeAuditStoreContract } from "./audit.contract";
import { describeChangeEventQueueContract } from "./change-events.contract";
import { describeChangeLogContract } from "./change-log.contract";
import { describeDefinitionsStoreContract } from "./definitions.contract";
import { describeFlagStoreContract } from "./flags.contract";
import { describeInsightsStoreContract } from "./insights.contract";
import { describeAdminKeyStoreContract, describeApiKeyStoreContract, describeUserStoreContract } from "./keys-users.contract";
import { describeIntegrationStoreContract, describePluginStoreContract } from "./plugins-integrations.contract";
import { describeLeaseStoreContract } from "./leases.contract";
import { describeProjectStoreContract } from "./projects.contract";
import { describeScheduleStoreContract } from "./schedules.contract";
import { describeSegmentStoreContract } from "./segments.contract";
import { describeTestSessionStoreContract } from "./test-sessions.contract";
import { describeTransferStoreContract } from "./transfer.contract";
import { describeWebhookStoreContract } from "./webhooks.contract";
import { describeLoginFailureStoreContract } from "./login-failures.contract";

const makeBackend: MakeBackend = async ({ clock, bus }) => {
  const dir = tempDir("flagsvc-contract-");
  const backend = openSqliteBackend(loadConfig({ SVC_DATA_DIR: dir }), bus, clock);
  return {
    changeLog: backend.changeLog,
    stores: backend.stores,
    beside: {
      changeEvents: () => new SqliteChangeEventStore(backend.changeLog.sqlite),
      integrationRuntime: backend.integrationRuntime,
      credentials: backend.credentials,
    },
    close() {
      backend.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

describeChangeLogContract(makeBackend);
describeTransferStoreContract(makeBackend);
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
describeChangeEventQueueContract(makeBackend);
describeLoginFailureStoreContract(makeBackend);
describeLeaseStoreContract(makeBackend, { exclusive: false });
