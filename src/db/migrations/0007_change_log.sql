CREATE TABLE `change_log` (
	`position` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`id` text NOT NULL,
	`at` text NOT NULL,
	`actor_type` text NOT NULL,
	`actor_id` text NOT NULL,
	`actor_label` text NOT NULL,
	`request_id` text,
	`project_id` text,
	`project_slug` text,
	`environment` text,
	`resource_type` text NOT NULL,
	`resource_id` text NOT NULL,
	`resource_key` text,
	`action` text NOT NULL,
	`changes` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `change_log_id_unique` ON `change_log` (`id`);--> statement-breakpoint
CREATE INDEX `change_log_project` ON `change_log` (`project_id`,`position`);--> statement-breakpoint
CREATE INDEX `change_log_project_key` ON `change_log` (`project_id`,`resource_key`,`position`);--> statement-breakpoint
CREATE INDEX `change_log_key` ON `change_log` (`resource_key`,`position`);--> statement-breakpoint
CREATE INDEX `change_log_actor` ON `change_log` (`actor_id`,`position`);