/** The outbound guard (src/lib/outbound.ts): address classes, the policy's entries, URL checks, guarded fetch. */
import { afterAll, describe, expect, test } from "bun:test";
import { loadConfig } from "../../src/config";
import { checkUrl, classifyAddress, guardedFetch, OutboundBlockedError, OutboundPolicy, type AddressKind } from "../../src/lib/outbound";
import { selfSignedPem } from "../e2e/binary";
import { startReceiver } from "../webhook-receiver";

/** The policy as the service builds it: from the setting, parsed by config.ts. */
const policy = (setting: string) => new OutboundPolicy(loadConfig({ SVC_OUTBOUND_ALLOWED_HOSTS: setting }).outboundAllowedHosts);

describe("classifyAddress", () => {
  const cases: [string, AddressKind][] = [
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["10.0.0.1", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["172.32.0.1", "public"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"],
    ["100.127.255.255", "private"],
    ["100.128.0.1", "public"],
    ["169.254.169.254", "link-local"],
    ["169.254.0.1", "link-local"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "reserved"],
    ["240.0.0.1", "reserved"],
    ["192.0.2.10", "reserved"],
    ["8.8.8.8", "public"],
    ["1.1.1.1", "public"],
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["fec0::1", "private"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["febf::1", "link-local"],
    ["ff02::1", "multicast"],
    ["2001:db8::1", "reserved"],
    ["2606:4700:4700::1111", "public"],
    ["2a00:1450:4001::200e", "public"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:10.1.2.3", "private"],
    ["::ffff:169.254.169.254", "link-local"],
    ["::ffff:8.8.8.8", "public"],
    ["64:ff9b::10.0.0.1", "private"],
    ["64:ff9b::8.8.8.8", "public"],
    ["::127.0.0.1", "reserved"], // IPv4-compatible (deprecated): not global unicast
    ["1::", "reserved"],
  ];
  for (const [ip, kind] of cases) test(`${ip} is ${kind}`, () => expect(classifyAddress(ip)).toBe(kind));
});

describe("the policy", () => {
  const allowed = (setting: string, ip: string) => policy(setting).refusal(ip) === null;

  test("external (the default): public addresses only", () => {
    for (const ip of ["8.8.8.8", "2606:4700::1", "::ffff:8.8.8.8"]) expect(allowed("external", ip)).toBe(true);
    for (const ip of ["127.0.0.1", "10.0.0.1", "100.64.0.1", "169.254.169.254", "::1", "fd00::1", "fe80::1", "::", "0.0.0.0", "::ffff:127.0.0.1", "224.0.0.1"]) {
      expect({ ip, allowed: allowed("external", ip) }).toEqual({ ip, allowed: false });
    }
    expect(policy("external").refusal("127.0.0.1")).toBe("loopback");
  });

  test("private, loopback and *", () => {
    expect(allowed("private", "192.168.0.5")).toBe(true);
    expect(allowed("private", "fd00::5")).toBe(true);
    expect(allowed("private", "127.0.0.1")).toBe(false);
    expect(allowed("private", "8.8.8.8")).toBe(false);
    expect(allowed("private", "169.254.169.254")).toBe(false);
    expect(allowed("loopback", "127.0.0.1")).toBe(true);
    expect(allowed("loopback", "::1")).toBe(true);
    expect(allowed("loopback", "::ffff:127.0.0.2")).toBe(true);
    expect(allowed("loopback", "10.0.0.1")).toBe(false);
    for (const ip of ["169.254.169.254", "127.0.0.1", "8.8.8.8", "::", "ff02::1"]) expect(allowed("*", ip)).toBe(true);
    expect(allowed("external,loopback", "127.0.0.1")).toBe(true);
    expect(allowed("external,loopback", "8.8.8.8")).toBe(true);
    expect(allowed("external,loopback", "10.0.0.1")).toBe(false);
  });

  test("IP and CIDR entries, IPv4 and IPv6, mapped addresses judged as IPv4", () => {
    expect(allowed("10.0.0.0/8", "10.200.1.1")).toBe(true);
    expect(allowed("10.0.0.0/8", "11.0.0.1")).toBe(false);
    expect(allowed("10.0.0.0/8", "::ffff:10.9.9.9")).toBe(true);
    expect(allowed("192.168.1.0/25", "192.168.1.127")).toBe(true);
    expect(allowed("192.168.1.0/25", "192.168.1.128")).toBe(false);
    expect(allowed("169.254.169.254", "169.254.169.254")).toBe(true); // explicitly allowed
    expect(allowed("169.254.169.254", "169.254.169.253")).toBe(false);
    expect(allowed("fd00::/8", "fd12::1")).toBe(true);
    expect(allowed("fd00::/8", "fc00::1")).toBe(false);
    expect(allowed("[::1]", "::1")).toBe(true);
    expect(allowed("::ffff:192.168.0.0/112", "192.168.7.7")).toBe(true);
    expect(allowed("0.0.0.0/0", "8.8.8.8")).toBe(true);
    expect(allowed("0.0.0.0/0", "::1")).toBe(false); // an IPv4 network holds no IPv6 address
    expect(allowed("::/0", "2606:4700::1")).toBe(true);
  });

  test("host names and globs allow a host whatever it resolves to", () => {
    const p = policy("hooks.internal,*.example.com");
    expect(p.allowsHostName("hooks.internal")).toBe(true);
    expect(p.allowsHostName("HOOKS.internal.")).toBe(true);
    expect(p.allowsHostName("a.example.com")).toBe(true);
    expect(p.allowsHostName("a.b.example.com")).toBe(true);
    expect(p.allowsHostName("example.com")).toBe(false);
    expect(p.allowsHostName("evil-example.com")).toBe(false);
    expect(p.allowsHostName("xhooks.internal")).toBe(false);
    expect(p.allowsHostName("hooks.internal.evil.com")).toBe(false);
    expect(policy("*").allowsHostName("anything.at.all")).toBe(true);
    expect(policy("external").allowsHostName("example.com")).toBe(false);
  });
});

describe("checkUrl (registration: no DNS)", () => {
  const external = policy("external");
  const cases: [string, string | null][] = [
    ["https://hooks.example.com/x", null],
    ["http://localhost:8080/x", null], // a name: judged at send time
    ["http://8.8.8.8/x", null],
    ["ftp://hooks.example.com/", "Must be an http or https URL"],
    ["https://hooks.example.com/a b", "Must not contain spaces or control characters"],
    ["https://hooks.example.com/a\u0000", "Must not contain spaces or control characters"],
    [" https://hooks.example.com/", "Must not contain spaces or control characters"],
    ["https://hooks.example.com/\t", "Must not contain spaces or control characters"],
    ["https://hooks.example.com/a\u0085b", "Must not contain spaces or control characters"],
    ["https://hooks.example.com/a\u200bb", "Must not contain spaces or control characters"],
    ["https://hooks.example.com/\ufeff", "Must not contain spaces or control characters"],
    ["https://hooks.example.com/caf\u00e9", null],
    ["hooks.example.com/x", "Must be an absolute http or https URL"],
    ["https://u:p@hooks.example.com/", "Must not contain credentials (user:password@)"],
    ["http://127.0.0.1:9000/", "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 127.0.0.1 is loopback"],
    ["http://[::1]/", "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: ::1 is loopback"],
    ["http://10.0.0.1/", "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 10.0.0.1 is private"],
    ["http://169.254.169.254/latest/meta-data/", "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 169.254.169.254 is link-local"],
    ["http://0x7f.1/", "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 127.0.0.1 is loopback"],
    ["http://2130706433/", "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 127.0.0.1 is loopback"],
    ["http://[::ffff:127.0.0.1]/", "blocked by SVC_OUTBOUND_ALLOWED_HOSTS: ::ffff:7f00:1 is loopback"],
  ];
  for (const [url, problem] of cases) test(`${JSON.stringify(url)}: ${problem ?? "ok"}`, () => expect(checkUrl(url, external)).toBe(problem));
  test("what the setting allows passes", () => {
    expect(checkUrl("http://127.0.0.1:9000/", policy("loopback"))).toBeNull();
    expect(checkUrl("http://10.1.1.1/", policy("10.0.0.0/8"))).toBeNull();
  });
});

describe("guardedFetch", () => {
  const rx = startReceiver();
  afterAll(() => rx.stop());
  const post = (url: string, p: OutboundPolicy, init: Parameters<typeof guardedFetch>[1] = {}) => guardedFetch(url, { method: "POST", body: "{}", ...init }, p);

  test("a blocked literal address: nothing is sent", async () => {
    const before = rx.received.length;
    const e = await post(rx.url, policy("external")).catch((err) => err);
    expect(e).toBeInstanceOf(OutboundBlockedError);
    expect(e.message).toBe("blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 127.0.0.1 is loopback");
    expect(rx.received.length).toBe(before);
  });

  test("a name that resolves to a blocked address: refused after resolving, nothing is sent", async () => {
    const before = rx.received.length;
    const e = await post(`http://localhost:${rx.port}/hook`, policy("external")).catch((err) => err);
    expect(e).toBeInstanceOf(OutboundBlockedError);
    expect(e.message).toMatch(/^blocked by SVC_OUTBOUND_ALLOWED_HOSTS: localhost \((127\.0\.0\.1|::1)\) is loopback$/);
    expect(rx.received.length).toBe(before);
  });

  test("an allowed name: sent to the checked address with the original Host header", async () => {
    const res = await post(`http://localhost:${rx.port}/named`, policy("loopback"));
    expect(res.status).toBe(200);
    const last = rx.received.at(-1)!;
    expect(last.path).toBe("/named");
    expect(last.headers.get("host")).toBe(`localhost:${rx.port}`);
  });

  test("a host-name entry allows that host even where its address class is not allowed", async () => {
    expect((await post(`http://localhost:${rx.port}/by-name`, policy("localhost"))).status).toBe(200);
    expect(await post(`http://127.0.0.1:${rx.port}/by-ip`, policy("localhost")).catch((e) => e.message)).toBe("blocked by SVC_OUTBOUND_ALLOWED_HOSTS: 127.0.0.1 is loopback");
  });

  test("redirects are returned, not followed", async () => {
    const target = startReceiver();
    const redirecting = startReceiver({ answer: () => new Response(null, { status: 307, headers: { location: target.url } }) });
    try {
      const res = await post(redirecting.url, policy("loopback"));
      expect(res.status).toBe(307);
      expect(target.received).toEqual([]);
    } finally {
      target.stop();
      redirecting.stop();
    }
  });

  test("https to a name: connected to the checked address, the certificate verified against the name", async () => {
    const { cert, key } = await selfSignedPem(); // CN=localhost, no IP in it
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert, key }, fetch: (req) => new Response(req.headers.get("host")) });
    try {
      const res = await post(`https://localhost:${server.port}/`, policy("loopback"), { tls: { ca: cert } });
      expect(await res.text()).toBe(`localhost:${server.port}`);
      // The same server by its address does not pass verification: the name above is what made it pass.
      expect(await post(`https://127.0.0.1:${server.port}/`, policy("loopback"), { tls: { ca: cert } }).catch((e) => e.code)).toBe("ERR_TLS_CERT_ALTNAME_INVALID");
    } finally {
      server.stop(true);
    }
  });

  test("only http and https", async () => {
    expect(await post("file:///etc/passwd", policy("*")).catch((e) => e.message)).toBe("only http and https URLs may be called, not file:");
  });
});
