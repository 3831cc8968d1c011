import { t } from "elysia";

export const Health = t.Object(
  {
    status: t.Union([t.Literal("ok"), t.Literal("unavailable")]),
    version: t.String(),
    edition: t.Union([t.Literal("ce"), t.Literal("pro")]),
    uptimeSeconds: t.Integer({ minimum: 0 }),
    message: t.Optional(t.String({ description: "Why the service is unavailable (503 only)" })),
  },
  { $id: "#/components/schemas/Health", title: "Health" },
);
