DROP INDEX `webhook_deliveries_due`;--> statement-breakpoint
CREATE INDEX `webhook_deliveries_due` ON `webhook_deliveries` (`webhook_id`,`status`,`next_attempt_at`,`id`);