/**
 * `flagsvc admin reset-password` through the compiled binary beside a running server (issue 20,
 * point 6): the generated password is printed once, alone on stdout; the user's old token is
 * refused within about a second (the server's credentials-reload job); the new password logs in,
 * the old one does not.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { BANNER_END } from "../../scripts/lib/proc";
import { callServer } from "../helpers";
import { binaryPath, cleanup, runBinary, startBinary, tempDir } from "./binary";

const EMAIL = "root@example.com";
const OLD = "the first password";

beforeAll(async () => {
  await binaryPath();
}, 120_000);
afterAll(() => cleanup());

test(
  "reset while the server runs: the old token gets 401 within ~1 s, the printed password logs in, the old one does not",
  async () => {
    const cwd = tempDir();
    const srv = await startBinary({ cwd, env: { SVC_ADMIN_EMAIL: EMAIL, SVC_ADMIN_PASSWORD: OLD } });
    try {
      await srv.waitFor(BANNER_END);
      const login = (password: string) => callServer(srv.url, "POST", "/v1/auth/login", { body: { email: EMAIL, password } });
      const me = async (token: string) => (await callServer(srv.url, "GET", "/v1/auth/me", { key: token })).status;
      const first = await login(OLD);
      expect(first.status).toBe(200);
      expect(await me(first.body.token)).toBe(200);

      const reset = await runBinary(["admin", "reset-password", "--email", "Root@Example.com", "--data-dir", join(cwd, "data")]);
      const done = performance.now();
      expect(reset.exitCode).toBe(0);
      const password = reset.stdout.trim();
      expect(password).toMatch(/^[A-Za-z0-9]{20}$/);
      expect(reset.stdout).toBe(`${password}\n`); // only the password: P=$(flagsvc admin reset-password ...)
      expect(reset.stderr).toContain("shown only this once");
      expect(reset.stderr).not.toContain(password);

      // Asked every 50 ms, with no login in between (a login would make the server look at once).
      let status = 200;
      while (status === 200 && performance.now() - done < 5_000) {
        await Bun.sleep(50);
        status = await me(first.body.token);
      }
      const refusedAfter = Math.round(performance.now() - done);
      expect({ status, refusedAfter, inTime: refusedAfter < 1_500 }).toEqual({ status: 401, refusedAfter, inTime: true });

      expect((await login(OLD)).status).toBe(401);
      const fresh = await login(password);
      expect(fresh.status).toBe(200);
      expect(await me(fresh.body.token)).toBe(200);
      expect(srv.output()).not.toContain(password); // printed once, by the command only
    } finally {
      expect(await srv.stop()).toBe(0);
    }
  },
  60_000,
);

test("flagsvc help admin and admin reset-password --help list it; unknown email exit 1, short password exit 2", async () => {
  const help = await runBinary(["help", "admin"]);
  expect(help.exitCode).toBe(0);
  expect(help.stdout).toContain("reset-password");
  const own = await runBinary(["admin", "reset-password", "--help"]);
  expect(own.exitCode).toBe(0);
  expect(own.stdout).toContain("--email");
  expect(own.stdout).toContain("--password");

  const dir = tempDir();
  const dataDir = join(dir, "data");
  expect((await runBinary(["migrate", "--data-dir", dataDir])).exitCode).toBe(0);
  const unknown = await runBinary(["admin", "reset-password", "--email", "nobody@example.com", "--data-dir", dataDir]);
  expect(unknown).toEqual({ exitCode: 1, stdout: "", stderr: "flagsvc: User with email nobody@example.com not found\n" });
  const short = await runBinary(["admin", "reset-password", "--email", "nobody@example.com", "--password", "short", "--data-dir", dataDir]);
  expect(short).toEqual({ exitCode: 2, stdout: "", stderr: "flagsvc: --password: Expected a password of 10 to 1024 characters\n" });
}, 60_000);
