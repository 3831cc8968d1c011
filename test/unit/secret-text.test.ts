/** src/lib/secret-text.ts: every form a secret travels in is masked, in one pass, longest first. */
import { describe, expect, test } from "bun:test";
import { secretForms, secretMask } from "../../src/lib/secret-text";

const b64 = (text: string) => Buffer.from(text).toString("base64");

describe("secretMask(secretForms(values))", () => {
  const secret = 'k3y w"th/+&=é';
  const mask = secretMask(secretForms([secret]));

  test("raw, Bearer, URL-encoded, form-encoded, JSON-escaped once and twice", () => {
    for (const form of [secret, `Bearer ${secret}`, encodeURIComponent(secret), new URLSearchParams({ v: secret }).toString().slice(2), JSON.stringify(secret).slice(1, -1), JSON.stringify(JSON.stringify(secret)).slice(1, -1)]) {
      expect(mask(`<${form}>`)).not.toContain("k3y");
    }
    expect(mask(`Bearer ${secret}`)).toBe("Bearer ********");
  });

  test("base64: value:, :value and alone whole; inside any other base64 text at each offset", () => {
    for (const whole of [`${secret}:`, `:${secret}`, secret]) expect(mask(`Basic ${b64(whole)}`)).toBe("Basic ********");
    for (const user of ["u", "us", "use", "a-longer-user"]) {
      const encoded = b64(`${user}:${secret}`);
      const masked = mask(encoded);
      expect(masked).toContain("********");
      // What is left is at most the letters that share bits with the neighbours: two on each side.
      expect(masked.replace("********", "").length).toBeLessThanOrEqual(b64(`${user}:`).length + 4);
    }
  });

  test("a URL's path and query travel alone (a proxy in apiHost): masked too", () => {
    const url = "https://hooks.slack.com/services/T0/B0/x\"y z";
    const m = secretMask(secretForms([url]));
    expect(m(`url=http://127.0.0.1:1234${new URL(url).pathname}`)).toBe("url=http://127.0.0.1:1234********");
    expect(m(`sent to ${url}`)).toBe("sent to ********");
  });

  test("longest first: a secret inside another is masked whole; no secrets: the text as it is", () => {
    const m = secretMask(secretForms(["abc", "xxabcxx"]));
    expect(m("xxabcxx and abc")).toBe("******** and ********");
    expect(secretMask(secretForms([]))("nothing $& secret")).toBe("nothing $& secret");
    expect(secretMask(secretForms(["a.b*c"]))("a.b*c axbbc")).toBe("******** axbbc");
  });
});
