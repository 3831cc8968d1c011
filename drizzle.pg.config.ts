import { defineConfig } from "drizzle-kit";

/** The PostgreSQL backend's schema (src/db/pg/schema.ts): `npm run db:generate:pg -- --name NAME`. */
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/pg/schema.ts",
  out: "./src/db/pg/migrations",
});
