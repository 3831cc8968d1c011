import { t } from "elysia";
import { ResponseInt } from "../../http/schema";

export const Health = t.Object(
  {
    status: t.Union([t.Literal("ok"), t.Literal("unavailable")]),
    version: t.String(),
    edition: t.Union([t.Literal("ce"), t.Literal("pro")]),
    uptimeSeconds: ResponseInt({ minimum: 0 }),
    message: t.Optional(t.String({ description: "Why the service is unavailable (503 only)" })),
  },
  { title: "Health" },
);
