/**
 * The drizzle schema: the one description of every table. Migrations are generated from it
 * with `npm run db:generate` (drizzle-kit) and embedded into the binary (src/db/migrations).
 * Timestamps are ISO 8601 UTC text with milliseconds: readable, and they sort as they compare.
 */
import { sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const projects = sqliteTable("projects", {
  id: text("id").primaryKey(),
  slug: text("slug").notNull().unique(),
  name: text("name").notNull(),
  createdAt: text("created_at").notNull(),
  updatedAt: text("updated_at").notNull(),
});

export const environments = sqliteTable(
  "environments",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    slug: text("slug").notNull(),
    name: text("name").notNull(),
    createdAt: text("created_at").notNull(),
  },
  (table) => [uniqueIndex("environments_project_slug").on(table.projectId, table.slug)],
);

/** Instance-wide settings and markers (bootstrap time, generated secrets), one row per key. */
export const settings = sqliteTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: text("updated_at").notNull(),
});
