CREATE TABLE `schedules` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`flag_id` text NOT NULL,
	`flag_key` text NOT NULL,
	`environment_id` text NOT NULL,
	`environment` text NOT NULL,
	`at` text NOT NULL,
	`state` text NOT NULL,
	`status` text NOT NULL,
	`created_by_type` text NOT NULL,
	`created_by_id` text NOT NULL,
	`created_by_label` text NOT NULL,
	`created_at` text NOT NULL,
	`applied_at` text,
	`error` text,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `schedules_status_at` ON `schedules` (`status`,`at`);--> statement-breakpoint
CREATE INDEX `schedules_project_at` ON `schedules` (`project_id`,`at`);