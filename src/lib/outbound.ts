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
import { BlockList, isIP } from "node:net";

export type AddressKind = "loopback" | "private" | "link-local" | "unspecified" | "multicast" | "reserved" | "public";

// ---- addresses ------------------------------------------------------------------------------
// Address matching is node:net's BlockList (IPv4-mapped IPv6 addresses match IPv4 subnets).

type Family = "ipv4" | "ipv6";

/** `ip` without brackets or zone id, and its family; null when it is not an IP address. */
function parseIp(ip: string): { address: string; family: Family } | null {
  const address = ip.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const family = isIP(address);
  return family === 0 ? null : { address, family: family === 4 ? "ipv4" : "ipv6" };
}

const V4_RANGES: readonly [cidr: string, kind: AddressKind][] = [
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
];

/** Looked up before the IPv4 ranges' NAT64 forms and the catch-all below. */
const V6_RANGES: readonly [cidr: string, kind: AddressKind][] = [
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["fc00::/7", "private"], // unique-local
  ["fec0::/10", "private"], // site-local (deprecated)
  ["fe80::/10", "link-local"],
  ["ff00::/8", "multicast"],
  ["2001:db8::/32", "reserved"],
];

function addCidr(list: BlockList, cidr: string): void {
  const [ip, bits] = cidr.split("/") as [string, string];
  const { address, family } = parseIp(ip)!;
  list.addSubnet(address, Number(bits), family);
}

/**
 * One BlockList per kind, in lookup order (first match wins). An IPv4 range also covers its
 * NAT64 form (64:ff9b::a.b.c.d), judged as the IPv4 address it carries; IPv6 outside global
 * unicast (2000::/3) and not named above is reserved.
 */
const KIND_LISTS: readonly [AddressKind, BlockList][] = (() => {
  const lists = new Map<AddressKind, BlockList>();
  const listOf = (kind: AddressKind) => lists.get(kind) ?? lists.set(kind, new BlockList()).get(kind)!;
  for (const [cidr, kind] of V6_RANGES) addCidr(listOf(kind), cidr);
  for (const [cidr, kind] of V4_RANGES) {
    const [ip, bits] = cidr.split("/") as [string, string];
    addCidr(listOf(kind), cidr);
    addCidr(listOf(kind), `64:ff9b::${ip}/${96 + Number(bits)}`);
  }
  const global = new BlockList();
  global.addSubnet("2000::", 3, "ipv6");
  global.addSubnet("64:ff9b::", 96, "ipv6"); // NAT64 of a public IPv4 address
  global.addSubnet("::ffff:0:0", 96, "ipv6"); // IPv4-mapped, of a public IPv4 address
  return [...lists, ["public", global] as [AddressKind, BlockList]];
})();

/** What kind of address `ip` is (IPv4 or IPv6 text, brackets and zone allowed). */
export function classifyAddress(ip: string): AddressKind {
  const parsed = parseIp(ip);
  if (!parsed) throw new Error(`not an IP address: ${ip}`);
  for (const [kind, list] of KIND_LISTS) if (list.check(parsed.address, parsed.family)) return kind;
  return parsed.family === "ipv4" ? "public" : "reserved";
}

// ---- the policy -----------------------------------------------------------------------------

export class OutboundBlockedError extends Error {
  override name = "OutboundBlockedError";
}

type Entry =
  | { type: "any" }
  | { type: "kind"; kind: AddressKind }
  | { type: "cidr"; list: BlockList }
  | { type: "host"; pattern: RegExp };

const KEYWORDS: Record<string, AddressKind> = { external: "public", private: "private", loopback: "loopback" };

const normalizeHost = (host: string) => host.toLowerCase().replace(/^\[|\]$/g, "").replace(/\.$/, "");

function parseEntry(raw: string): Entry {
  const e = raw.trim().toLowerCase();
  if (e === "*") return { type: "any" };
  if (KEYWORDS[e]) return { type: "kind", kind: KEYWORDS[e] };
  const slash = e.indexOf("/");
  const ip = parseIp(slash >= 0 ? e.slice(0, slash) : e);
  if (ip) {
    const list = new BlockList();
    if (slash >= 0) list.addSubnet(ip.address, Number(e.slice(slash + 1)), ip.family);
    else list.addAddress(ip.address, ip.family);
    return { type: "cidr", list };
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
    const kind = classifyAddress(ip);
    const { address, family } = parseIp(ip)!;
    for (const e of this.entries) {
      if (e.type === "any") return null;
      if (e.type === "kind" && e.kind === kind) return null;
      if (e.type === "cidr" && e.list.check(address, family)) return null;
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
  // The URL parser would drop or encode these silently: the stored URL would not be the one sent.
  // White space, control characters (C0, DEL, C1) and invisible format characters (U+200B, BOM).
  if (/[\s\p{Cc}\p{Cf}]/u.test(url)) return "Must not contain spaces or control characters";
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

/** The response body as text, reading no more than `maxBytes`: null (and the rest cancelled) beyond it. */
export async function readTextCapped(response: Response, maxBytes: number): Promise<string | null> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}
