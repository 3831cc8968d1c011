CREATE TABLE `change_log` (
	`position` integer PRIMARY KEY NOT NULL,
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
CREATE INDEX `change_log_key` ON `change_log` (`resource_key`,`position`);--> statement-breakpoint
CREATE INDEX `environments_project` ON `environments` (`project_id`);