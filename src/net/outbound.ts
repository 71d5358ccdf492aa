import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { IpRangeList } from './ip-ranges.ts';

/**
 * The one policy for every outgoing URL staff can set (a flow's notify_url, a merchant's decision
 * webhook): such a URL may only reach public addresses, never the service's own network (loopback,
 * private, link-local and cloud metadata, CGNAT, multicast, reserved, and the IPv6 forms that
 * carry one of those IPv4 addresses). It is checked when the URL is saved, on the host as written
 * (the WHATWG URL parser reads `0x7f000001`, `2130706433`, `0177.0.0.1` and `127.1` as 127.0.0.1),
 * and again at each delivery after DNS resolution: every address the name resolves to must pass,
 * and the request connects to the checked address itself, so a second lookup (DNS rebinding)
 * cannot swap it. Redirects are never followed. WARDEN_OUTBOUND_ALLOW names addresses and ranges
 * allowed despite the policy (a receiver on the private network, local tests).
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** Thrown when a URL or the address it resolves to is refused; the message says why. */
export class OutboundRefused extends Error {}

/** Resolves a host name to every address it has (the delivery checks all of them). */
export type Resolver = (hostname: string) => Promise<string[]>;

const systemResolver: Resolver = async (hostname) => (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((entry) => entry.address);

function table(entries: ReadonlyArray<readonly [string, string]>): Array<[[Address, number], string]> {
  return entries.map(([cidr, name]) => [ipaddr.parseCIDR(cidr), name]);
}

/** Refused IPv4 ranges, most specific first (the first match names the refusal). */
const IPV4_REFUSED = table([
  ['169.254.169.254/32', 'cloud metadata'],
  ['100.100.100.200/32', 'cloud metadata'],
  ['255.255.255.255/32', 'broadcast'],
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'carrier-grade NAT'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'documentation'],
  ['192.88.99.0/24', 'reserved'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'benchmarking'],
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
]);

/** Refused IPv6 ranges; besides them, anything outside global unicast (2000::/3) is refused. */
const IPV6_REFUSED = table([
  ['fd00:ec2::254/128', 'cloud metadata'],
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['64:ff9b:1::/48', 'local-use NAT64'],
  ['fc00::/7', 'private (unique local)'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'site-local'],
  ['ff00::/8', 'multicast'],
  ['2001::/32', 'Teredo'],
  ['2001:db8::/32', 'documentation'],
  ['2001:2::/48', 'benchmarking'],
  ['2001:10::/28', 'reserved'],
  ['2001:20::/28', 'reserved'],
]);

const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');

/** Host names that are never looked up: they name the machine itself or the cloud's metadata service. */
function namedRefusal(hostname: string): string | null {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return 'loopback';
  if (name === 'metadata.google.internal' || name === 'metadata') return 'cloud metadata';
  return null;
}

function parseAddress(text: string): Address | null {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  if (!net.isIP(bare)) return null;
  const address = ipaddr.parse(bare);
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() ? (address as ipaddr.IPv6).toIPv4Address() : address;
}

function embeddedIpv4(bytes: number[], offset: number): ipaddr.IPv4 {
  return new ipaddr.IPv4(bytes.slice(offset, offset + 4));
}

function classify(address: Address): string | null {
  if (address.kind() === 'ipv4') {
    return IPV4_REFUSED.find(([range]) => address.match(range as never))?.[1] ?? null;
  }
  const v6 = address as ipaddr.IPv6;
  const bytes = v6.toByteArray();
  // Forms that carry an IPv4 address are judged by it (IPv4-mapped was folded by parseAddress).
  if (v6.match(NAT64)) {
    const inner = classify(embeddedIpv4(bytes, 12));
    return inner && `NAT64 of a ${inner}`;
  }
  if (v6.match(SIX_TO_FOUR)) {
    const inner = classify(embeddedIpv4(bytes, 2));
    return inner && `6to4 of a ${inner}`;
  }
  const named = IPV6_REFUSED.find(([range]) => v6.match(range as never))?.[1];
  if (named) return named;
  if (v6.match(IPV4_COMPATIBLE)) return 'IPv4-compatible (deprecated)';
  return v6.match(GLOBAL_UNICAST) ? null : 'reserved';
}

/**
 * Why an address may not be reached by an outgoing URL ("loopback", "private", ...), or null for
 * a public address. IPv4-mapped, NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses are judged
 * by the IPv4 address they carry. Text that is not an IP address is refused too.
 */
export function refusedRange(address: string): string | null {
  const parsed = parseAddress(address);
  return parsed ? classify(parsed) : 'not an IP address';
}

export interface OutboundRequest {
  headers: Record<string, string>;
  body: string;
  /** For the whole attempt: resolution, connection, request and answer. */
  timeoutMs: number;
}

/** The address policy with the operator's exceptions (WARDEN_OUTBOUND_ALLOW). */
export class OutboundPolicy {
  private readonly allow: IpRangeList;
  private readonly resolver: Resolver;
  private readonly ca: string | undefined;

  /**
   * `allow`: IP addresses and CIDR ranges reachable despite the policy; `resolve` (DNS) and `ca`
   * (the certificates https receivers are checked against, instead of the system's) for tests.
   */
  constructor(allow: readonly string[] = [], options: { resolve?: Resolver; ca?: string } = {}) {
    this.allow = new IpRangeList(allow.filter((entry) => entry !== '*'));
    this.resolver = options.resolve ?? systemResolver;
    this.ca = options.ca;
  }

  /** Why this address may not be reached, or null when it may (public, or allowed by the operator). */
  refusal(address: string): string | null {
    const parsed = parseAddress(address);
    if (!parsed) return 'not an IP address';
    return this.allow.contains(parsed.toString()) ? null : classify(parsed);
  }

  /**
   * Why the host of a URL (as `new URL().hostname` gives it) is refused before any lookup, or null:
   * an IP literal by its address, `localhost` names as loopback (both families), the metadata
   * service's name. Other names are judged at delivery, by what they resolve to.
   */
  hostRefusal(hostname: string): string | null {
    if (parseAddress(hostname)) return this.refusal(hostname);
    const named = namedRefusal(hostname);
    if (named === 'loopback') return this.refusal('127.0.0.1') ?? this.refusal('::1');
    return named;
  }

  /** Whether the host is an IP literal that the operator's allow list names (plain http may go there). */
  allowsLiteral(hostname: string): boolean {
    const parsed = parseAddress(hostname);
    return parsed !== null && this.allow.contains(parsed.toString());
  }

  /**
   * The save-time check: parses the URL (normalising obscure address forms), requires http(s),
   * and refuses a host that is a refused address as written. Throws OutboundRefused.
   */
  checkUrl(value: string): URL {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new OutboundRefused(`"${value}" is not a URL.`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new OutboundRefused('the URL must be http or https.');
    const refusal = this.hostRefusal(url.hostname);
    if (refusal) throw new OutboundRefused(`${url.hostname} is a ${refusal} address; outgoing notifications go to public addresses only.`);
    return url;
  }

  /**
   * The delivery-time check: the one address to connect to for this URL. A name is resolved and
   * refused when ANY of its addresses is refused; the first address is returned.
   */
  async vet(url: URL): Promise<string> {
    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const before = this.hostRefusal(url.hostname);
    if (before) throw new OutboundRefused(`${hostname} is a ${before} address`);
    if (net.isIP(hostname)) return hostname;
    let addresses: string[];
    try {
      addresses = await this.resolver(hostname);
    } catch (error) {
      throw new OutboundRefused(`${hostname} could not be resolved: ${(error as Error).message}`);
    }
    if (!addresses.length) throw new OutboundRefused(`${hostname} resolves to no address`);
    for (const address of addresses) {
      const refusal = this.refusal(address);
      if (refusal) throw new OutboundRefused(`${hostname} resolves to ${address}, a ${refusal} address`);
    }
    return addresses[0]!;
  }

  /**
   * POSTs once to a URL that passes the policy, connecting to the vetted address (the Host header
   * and the TLS name stay the URL's). Resolves with the status code, whatever it is: a 3xx is not
   * followed. Rejects when the URL is refused, on a network error, or when time runs out.
   */
  async post(target: string, request: OutboundRequest): Promise<number> {
    const url = this.checkUrl(target);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`no answer within ${request.timeoutMs} ms`)), request.timeoutMs);
    try {
      const address = await Promise.race([
        this.vet(url),
        new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(controller.signal.reason as Error), { once: true })),
      ]);
      return await send(url, address, request, controller.signal, this.ca);
    } catch (error) {
      throw controller.signal.aborted ? (controller.signal.reason as Error) : error;
    } finally {
      clearTimeout(timer);
    }
  }
}

function send(url: URL, address: string, request: OutboundRequest, signal: AbortSignal, ca: string | undefined): Promise<number> {
  const secure = url.protocol === 'https:';
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const options: https.RequestOptions = {
    method: 'POST',
    host: address,
    port: url.port ? Number(url.port) : secure ? 443 : 80,
    path: `${url.pathname}${url.search}`,
    headers: { ...request.headers, host: url.host, 'content-length': String(Buffer.byteLength(request.body)) },
    // A one-off agent: no pooled socket is reused for another host.
    agent: false,
    signal,
    // Should anything still look the name up, it gets the vetted address and nothing else.
    lookup: ((_name: string, lookupOptions: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
      const family = net.isIP(address);
      if (lookupOptions?.all) callback(null, [{ address, family }]);
      else callback(null, address, family);
    }) as never,
  };
  if (url.username || url.password) options.auth = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  // The certificate is checked against the name in the URL (an IP literal is checked as an IP).
  if (secure && !net.isIP(hostname)) options.servername = hostname;
  if (ca) options.ca = ca;
  return new Promise<number>((resolve, reject) => {
    const outgoing = (secure ? https : http).request(options, (response) => {
      const status = response.statusCode ?? 0;
      response.on('error', reject);
      response.on('close', () => (response.complete ? resolve(status) : reject(new Error(`the answer (HTTP ${status}) was cut off`))));
      response.resume();
    });
    outgoing.on('error', reject);
    outgoing.end(request.body);
  });
}

const byConfig = new WeakMap<object, OutboundPolicy>();

/** The policy of a loaded configuration (its WARDEN_OUTBOUND_ALLOW), built once per config. */
export function outboundPolicy(config: { readonly outboundAllow: readonly string[] }): OutboundPolicy {
  let policy = byConfig.get(config);
  if (!policy) {
    policy = new OutboundPolicy(config.outboundAllow);
    byConfig.set(config, policy);
  }
  return policy;
}

/** The policy with no exceptions: only public addresses. */
export const STRICT_OUTBOUND = new OutboundPolicy([]);
