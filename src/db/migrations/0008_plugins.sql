CREATE TABLE `plugin_downloads` (
	`package_name` text PRIMARY KEY NOT NULL,
	`installs` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `plugin_events` (
	`position` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`project_id` text NOT NULL,
	`payload` text NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `plugin_events_project` ON `plugin_events` (`project_id`,`position`);--> statement-breakpoint
CREATE TABLE `plugins` (
	`id` text PRIMARY KEY NOT NULL,
	`project_id` text NOT NULL,
	`package_name` text NOT NULL,
	`version` text NOT NULL,
	`enabled` integer NOT NULL,
	`status` text NOT NULL,
	`config` text NOT NULL,
	`error_message` text,
	`event_position` integer DEFAULT 0 NOT NULL,
	`events_handled` integer DEFAULT 0 NOT NULL,
	`errors` integer DEFAULT 0 NOT NULL,
	`last_event_at` text,
	`evaluations_dropped` integer DEFAULT 0 NOT NULL,
	`installed_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `plugins_project` ON `plugins` (`project_id`);