DROP INDEX `environments_project`;--> statement-breakpoint
ALTER TABLE `environments` ADD `seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `environments_project_seq` ON `environments` (`project_id`,`seq`);--> statement-breakpoint
ALTER TABLE `admin_keys` ADD `seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `api_keys` ADD `seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `integrations` ADD `seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `plugins` ADD `seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `webhook_deliveries` ADD `seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `webhook_deliveries_seq` ON `webhook_deliveries` (`seq`);--> statement-breakpoint
ALTER TABLE `webhooks` ADD `seq` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Backfill: existing rows keep the order they had (they were read in rowid order).
UPDATE `environments` SET `seq` = rowid;--> statement-breakpoint
UPDATE `admin_keys` SET `seq` = rowid;--> statement-breakpoint
UPDATE `api_keys` SET `seq` = rowid;--> statement-breakpoint
UPDATE `integrations` SET `seq` = rowid;--> statement-breakpoint
UPDATE `plugins` SET `seq` = rowid;--> statement-breakpoint
UPDATE `webhook_deliveries` SET `seq` = rowid;--> statement-breakpoint
UPDATE `webhooks` SET `seq` = rowid;
