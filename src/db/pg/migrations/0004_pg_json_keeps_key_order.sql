-- jsonb reorders object keys (and drops duplicates): json keeps the text as written, as SQLite does (src/db/pg/schema.ts, `json`).
ALTER TABLE "change_log" ALTER COLUMN "changes" SET DATA TYPE json USING "changes"::json;--> statement-breakpoint
ALTER TABLE "flags" ALTER COLUMN "variants" SET DATA TYPE json USING "variants"::json;--> statement-breakpoint
ALTER TABLE "flags" ALTER COLUMN "rules" SET DATA TYPE json USING "rules"::json;--> statement-breakpoint
ALTER TABLE "flags" ALTER COLUMN "prerequisites" SET DATA TYPE json USING "prerequisites"::json;--> statement-breakpoint
ALTER TABLE "integrations" ALTER COLUMN "config" SET DATA TYPE json USING "config"::json;--> statement-breakpoint
ALTER TABLE "plugins" ALTER COLUMN "config" SET DATA TYPE json USING "config"::json;--> statement-breakpoint
ALTER TABLE "plugins" ALTER COLUMN "secret_keys" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "plugins" ALTER COLUMN "secret_keys" SET DATA TYPE json USING "secret_keys"::json;--> statement-breakpoint
ALTER TABLE "plugins" ALTER COLUMN "secret_keys" SET DEFAULT '[]'::json;--> statement-breakpoint
ALTER TABLE "schedules" ALTER COLUMN "state" SET DATA TYPE json USING "state"::json;--> statement-breakpoint
ALTER TABLE "segments" ALTER COLUMN "conditions" SET DATA TYPE json USING "conditions"::json;--> statement-breakpoint
ALTER TABLE "segments" ALTER COLUMN "included" SET DATA TYPE json USING "included"::json;--> statement-breakpoint
ALTER TABLE "segments" ALTER COLUMN "excluded" SET DATA TYPE json USING "excluded"::json;--> statement-breakpoint
ALTER TABLE "session_overrides" ALTER COLUMN "value" SET DATA TYPE json USING "value"::json;--> statement-breakpoint
ALTER TABLE "webhooks" ALTER COLUMN "events" SET DATA TYPE json USING "events"::json;--> statement-breakpoint
ALTER TABLE "webhooks" ALTER COLUMN "environments" SET DATA TYPE json USING "environments"::json;