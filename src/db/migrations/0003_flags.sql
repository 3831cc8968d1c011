CREATE TABLE `flag_states` (
	`flag_id` text NOT NULL,
	`environment_id` text NOT NULL,
	`enabled` integer NOT NULL,
	`rollout_percentage` real,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`flag_id`, `environment_id`),
	FOREIGN KEY (`flag_id`) REFERENCES `flags`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `flag_states_environment` ON `flag_states` (`environment_id`);--> statement-breakpoint
CREATE TABLE `flags` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`key` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`variants` text NOT NULL,
	`rules` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `flags_project_key` ON `flags` (`project_id`,`key`);