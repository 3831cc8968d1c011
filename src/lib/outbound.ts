/**
 * The outbound guard (SSRF): every request flagsvc sends to a URL someone configured (webhooks
 * now; integrations and plugins later) goes through `guardedFetch`, which applies
 * SVC_OUTBOUND_ALLOWED_HOSTS (decisions §1, §10):
 *
 * - the host is resolved (all addresses) and EVERY address must be allowed, else the request
 *   is not sent and `OutboundBlockedError` says why ("blocked by SVC_OUTBOUND_ALLOWED_HOSTS:
 *   127.0.0.1 is loopback");
 * - the connection goes to the address that was checked (the URL's host name is replaced by it,
 *   with the original `Host` header and, for https, the original name as TLS server name and
 *   certificate name), so a DNS answer that changes between check and connect (rebinding)
 *   cannot steer the request elsewhere;
 * - redirects are never followed (`redirect: "manual"`: a 3xx comes back as the response).
 *
 * Entries of the setting (already normalised by src/config.ts): `external` (public addresses),
 * `private` (RFC 1918, CGNAT 100.64.0.0/10, unique-local fc00::/7, site-local fec0::/10),
 * `loopback` (127.0.0.0/8, ::1), `*` (anything), an IP address or CIDR (allows addresses in
 * it), a host name or glob (allows that host whatever it resolves to; `*` in a glob matches
 * any characters, dots included). Link-local (169.254.0.0/16 with the cloud metadata address,
 * fe80::/10), unspecified, multicast and reserved addresses are allowed only by `*` or an
 * explicit IP/CIDR entry. IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) IPv6
 * addresses are judged as the IPv4 address they carry.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";

export type AddressKind = "loopback" | "private" | "link-local" | "unspecified" | "multicast" | "reserved" | "public";

// ---- addresses ------------------------------------------------------------------------------

/** An address as bytes: 4 for IPv4, 16 for IPv6. */
type Bytes = number[];

function ipv4Bytes(ip: string): Bytes {
  return ip.split(".").map(Number);
}

/** 16 bytes of an IPv6 address (brackets and zone id dropped, an IPv4 tail allowed). */
function ipv6Bytes(ip: string): Bytes {
  let s = ip.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  let tail: number[] = [];
  const lastColon = s.lastIndexOf(":");
  if (s.includes(".", lastColon)) {
    const v4 = ipv4Bytes(s.slice(lastColon + 1));
    tail = [(v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!];
    s = s.slice(0, lastColon + 1);
    if (!s.endsWith("::")) s = s.slice(0, -1);
  }
  const groups = (part: string) => (part === "" ? [] : part.split(":").map((g) => parseInt(g, 16)));
  const gap = s.indexOf("::");
  let all: number[];
  if (gap < 0) all = [...groups(s), ...tail];
  else {
    const left = groups(s.slice(0, gap));
    const right = [...groups(s.slice(gap + 2)), ...tail];
    all = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  }
  return all.flatMap((g) => [(g >> 8) & 0xff, g & 0xff]);
}

const MAPPED = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0]; // ::ffff:0:0/96
const NAT64 = [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]; // 64:ff9b::/96

/** The address as bytes; IPv4-mapped and NAT64 IPv6 addresses become the IPv4 address they carry. */
function addressBytes(ip: string): Bytes {
  const family = isIP(ip.replace(/^\[|\]$/g, "").replace(/%.*$/, ""));
  if (family === 4) return ipv4Bytes(ip);
  if (family !== 6) throw new Error(`not an IP address: ${ip}`);
  const b = ipv6Bytes(ip);
  if (inPrefix(b, MAPPED, 96) || inPrefix(b, NAT64, 96)) return b.slice(12);
  return b;
}

function inPrefix(b: Bytes, net: Bytes, bits: number): boolean {
  if (b.length !== net.length) return false;
  for (let i = 0; i < b.length && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((b[i]! & mask) !== (net[i]! & mask)) return false;
  }
  return true;
}

const cidr = (text: string): [Bytes, number] => {
  const [ip, bits] = text.split("/") as [string, string];
  return [ip.includes(":") ? ipv6Bytes(ip) : ipv4Bytes(ip), Number(bits)];
};

/** First match wins. */
const V4_RANGES: [Bytes, number, AddressKind][] = [
  ...(
    [
      ["0.0.0.0/8", "unspecified"],
      ["127.0.0.0/8", "loopback"],
      ["10.0.0.0/8", "private"],
      ["172.16.0.0/12", "private"],
      ["192.168.0.0/16", "private"],
      ["100.64.0.0/10", "private"], // shared address space (CGNAT)
      ["169.254.0.0/16", "link-local"], // includes the cloud metadata address 169.254.169.254
      ["192.0.0.0/24", "reserved"],
      ["192.0.2.0/24", "reserved"],
      ["198.18.0.0/15", "reserved"],
      ["198.51.100.0/24", "reserved"],
      ["203.0.113.0/24", "reserved"],
      ["224.0.0.0/4", "multicast"],
      ["240.0.0.0/4", "reserved"], // includes 255.255.255.255
    ] as const
  ).map(([c, kind]) => [...cidr(c), kind] as [Bytes, number, AddressKind]),
];

const V6_RANGES: [Bytes, number, AddressKind][] = [
  ...(
    [
      ["::/128", "unspecified"],
      ["::1/128", "loopback"],
      ["fc00::/7", "private"], // unique-local
      ["fec0::/10", "private"], // site-local (deprecated)
      ["fe80::/10", "link-local"],
      ["ff00::/8", "multicast"],
      ["2001:db8::/32", "reserved"],
      ["2000::/3", "public"],
      ["::/0", "reserved"], // everything outside global unicast not named above
    ] as const
  ).map(([c, kind]) => [...cidr(c), kind] as [Bytes, number, AddressKind]),
];

/** What kind of address `ip` is (IPv4 or IPv6 text, brackets and zone allowed). */
export function classifyAddress(ip: string): AddressKind {
  const b = addressBytes(ip);
  for (const [net, bits, kind] of b.length === 4 ? V4_RANGES : V6_RANGES) if (inPrefix(b, net, bits)) return kind;
  return "public";
}

// ---- the policy -----------------------------------------------------------------------------

export class OutboundBlockedError extends Error {
  override name = "OutboundBlockedError";
}

type Entry =
  | { type: "any" }
  | { type: "kind"; kind: AddressKind }
  | { type: "cidr"; net: Bytes; bits: number }
  | { type: "host"; pattern: RegExp };

const KEYWORDS: Record<string, AddressKind> = { external: "public", private: "private", loopback: "loopback" };

const normalizeHost = (host: string) => host.toLowerCase().replace(/^\[|\]$/g, "").replace(/\.$/, "");

function parseEntry(raw: string): Entry {
  const e = raw.trim().toLowerCase();
  if (e === "*") return { type: "any" };
  if (KEYWORDS[e]) return { type: "kind", kind: KEYWORDS[e] };
  const ip = e.replace(/^\[|\]$/g, "");
  const slash = ip.indexOf("/");
  const addr = slash >= 0 ? ip.slice(0, slash) : ip;
  if (isIP(addr)) {
    const full = isIP(addr) === 4 ? 32 : 128;
    let bits = slash >= 0 ? Number(ip.slice(slash + 1)) : full;
    let net = isIP(addr) === 4 ? ipv4Bytes(addr) : ipv6Bytes(addr);
    // An IPv4-mapped network is the IPv4 network (addresses are compared in that form).
    if (bits >= 96 && inPrefix(net, MAPPED, 96)) {
      net = net.slice(12);
      bits -= 96;
    }
    return { type: "cidr", net, bits };
  }
  const glob = normalizeHost(e)
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return { type: "host", pattern: new RegExp(`^${glob}$`) };
}

export class OutboundPolicy {
  private readonly entries: Entry[];

  constructor(readonly setting: readonly string[]) {
    this.entries = setting.map(parseEntry);
  }

  /** A host name entry (or `*`) allows this host whatever its addresses. */
  allowsHostName(host: string): boolean {
    const h = normalizeHost(host);
    return this.entries.some((e) => e.type === "any" || (e.type === "host" && e.pattern.test(h)));
  }

  /** Why `ip` is refused, or null when an entry allows it. */
  refusal(ip: string): string | null {
    const bytes = addressBytes(ip);
    const kind = classifyAddress(ip);
    for (const e of this.entries) {
      if (e.type === "any") return null;
      if (e.type === "kind" && e.kind === kind) return null;
      if (e.type === "cidr" && inPrefix(bytes, e.net, e.bits)) return null;
    }
    return kind;
  }
}

const blocked = (who: string, kind: string) => new OutboundBlockedError(`blocked by SVC_OUTBOUND_ALLOWED_HOSTS: ${who} is ${kind}`);

// ---- URLs -----------------------------------------------------------------------------------

export const MAX_URL_LENGTH = 2048;

/**
 * Registration-time check of a URL a user gives (no DNS: a name is judged when it is used).
 * Returns the problem, or null: not http(s), credentials in the URL, or a literal address
 * (also `2130706433`, `0x7f.1`: the URL parser turns those into 127.0.0.1) the policy refuses.
 */
export function checkUrl(url: string, policy: OutboundPolicy): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "Must be an absolute http or https URL";
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return "Must be an http or https URL";
  if (u.username !== "" || u.password !== "") return "Must not contain credentials (user:password@)";
  const host = normalizeHost(u.hostname);
  if (isIP(host) && !policy.allowsHostName(host)) {
    const why = policy.refusal(host);
    if (why) return blocked(host, why).message;
  }
  return null;
}

/** Resolves `host` and checks every address; returns the address to connect to. */
async function resolveAllowed(host: string, policy: OutboundPolicy, signal?: AbortSignal): Promise<string> {
  if (isIP(host)) {
    const why = policy.allowsHostName(host) ? null : policy.refusal(host);
    if (why) throw blocked(host, why);
    return host;
  }
  let addresses: { address: string }[];
  try {
    addresses = await abortable(lookup(host, { all: true }), signal ?? undefined);
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    throw new Error(`cannot resolve ${host}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (addresses.length === 0) throw new Error(`cannot resolve ${host}: no addresses`);
  if (!policy.allowsHostName(host)) {
    for (const { address } of addresses) {
      const why = policy.refusal(address);
      if (why) throw blocked(`${host} (${address})`, why);
    }
  }
  return addresses[0]!.address;
}

function abortable<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

export type GuardedInit = Omit<BunFetchRequestInit, "redirect">;

/**
 * `fetch` through the guard: http(s) only, every resolved address checked against the policy,
 * the connection pinned to the checked address, redirects not followed. Throws
 * OutboundBlockedError for a refused target (nothing was sent), the fetch error otherwise.
 */
export async function guardedFetch(url: string, init: GuardedInit, policy: OutboundPolicy): Promise<Response> {
  const u = new URL(url);
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new OutboundBlockedError(`only http and https URLs may be called, not ${u.protocol}`);
  const host = normalizeHost(u.hostname);
  const address = await resolveAllowed(host, policy, init.signal ?? undefined);
  const headers = new Headers(init.headers);
  const options: BunFetchRequestInit = { ...init, headers, redirect: "manual" };
  let target = u;
  if (!isIP(host)) {
    target = new URL(u);
    target.hostname = isIP(address) === 6 ? `[${address}]` : address;
    headers.set("host", u.host);
    if (u.protocol === "https:") options.tls = { ...init.tls, serverName: host };
  }
  return fetch(target, options);
}
