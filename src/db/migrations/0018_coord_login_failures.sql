CREATE TABLE `login_failures` (
	`email` text PRIMARY KEY NOT NULL,
	`first_at` text NOT NULL,
	`count` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `login_failures_first` ON `login_failures` (`first_at`);