CREATE TABLE "login_failures" (
	"email" text PRIMARY KEY NOT NULL,
	"first_at" text NOT NULL,
	"count" integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE "test_session_revision" (
	"id" integer PRIMARY KEY NOT NULL,
	"revision" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "login_failures_first" ON "login_failures" USING btree ("first_at");