CREATE TABLE `flag_insights` (
	`flag_id` text NOT NULL,
	`environment_id` text NOT NULL,
	`day` integer NOT NULL,
	`bucket` integer NOT NULL,
	`variant` text NOT NULL,
	`reason` text NOT NULL,
	`count` integer NOT NULL,
	PRIMARY KEY(`flag_id`, `environment_id`, `day`, `bucket`, `variant`, `reason`),
	FOREIGN KEY (`flag_id`) REFERENCES `flags`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `flag_insights_age` ON `flag_insights` (`day`,`bucket`);--> statement-breakpoint
CREATE INDEX `flag_insights_environment` ON `flag_insights` (`environment_id`);--> statement-breakpoint
CREATE TABLE `flag_last_evaluated` (
	`flag_id` text NOT NULL,
	`environment_id` text NOT NULL,
	`at` integer NOT NULL,
	PRIMARY KEY(`flag_id`, `environment_id`),
	FOREIGN KEY (`flag_id`) REFERENCES `flags`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`environment_id`) REFERENCES `environments`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `flag_last_evaluated_environment` ON `flag_last_evaluated` (`environment_id`);--> statement-breakpoint
CREATE TABLE `flag_stale` (
	`flag_id` text PRIMARY KEY NOT NULL,
	`reason` text NOT NULL,
	`since` text NOT NULL,
	FOREIGN KEY (`flag_id`) REFERENCES `flags`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
ALTER TABLE `projects` ADD `stale_after_days` integer DEFAULT 30 NOT NULL;