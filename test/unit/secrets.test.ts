import { describe, expect, test } from "bun:test";
import { generateSecret, sameSecret } from "../../src/lib/secrets";

describe("sameSecret", () => {
  test("equal strings only: a difference anywhere, or another length, is refused", () => {
    const { secret } = generateSecret("svc_sk_eval_");
    expect(sameSecret(`${secret}`, secret)).toBe(true);
    const flip = (i: number) => secret.slice(0, i) + (secret[i] === "A" ? "B" : "A") + secret.slice(i + 1);
    for (const i of [0, 12, secret.length - 1]) expect(sameSecret(flip(i), secret)).toBe(false);
    expect(sameSecret(secret.slice(0, -1), secret)).toBe(false);
    expect(sameSecret(`${secret}x`, secret)).toBe(false);
    expect(sameSecret("", "")).toBe(true);
  });
});
