CREATE TABLE `session_overrides` (
	`session_id` text NOT NULL,
	`flag_key` text NOT NULL,
	`value` text NOT NULL,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`session_id`, `flag_key`),
	FOREIGN KEY (`session_id`) REFERENCES `test_sessions`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `test_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`token` text NOT NULL,
	`label` text,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `test_sessions_token_unique` ON `test_sessions` (`token`);--> statement-breakpoint
CREATE INDEX `test_sessions_project` ON `test_sessions` (`project_id`);--> statement-breakpoint
CREATE INDEX `test_sessions_expires` ON `test_sessions` (`expires_at`);