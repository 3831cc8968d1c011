CREATE TABLE `integrations` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`type` text NOT NULL,
	`config` text NOT NULL,
	`enabled` integer NOT NULL,
	`sent` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`last_error` text,
	`last_sent_at` text,
	`event_position` integer DEFAULT 0 NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `integrations_project` ON `integrations` (`project_id`);--> statement-breakpoint
ALTER TABLE `plugin_events` RENAME TO `change_events`;--> statement-breakpoint
ALTER TABLE `change_events` ADD `actor` text DEFAULT '{}' NOT NULL;--> statement-breakpoint
DROP INDEX `plugin_events_project`;--> statement-breakpoint
CREATE INDEX `change_events_project` ON `change_events` (`project_id`,`position`);
