import { IpRangeList, parseIp } from '../net/ip-ranges.ts';

/**
 * Resolves the caller's IP. The socket's address is the truth unless it belongs to a configured
 * trusted proxy; then X-Forwarded-For is walked from the right, skipping trusted proxies, and
 * the first untrusted hop is the caller. Anything a client writes into the header beyond that
 * point is ignored, so a client cannot choose its own address.
 */
export function createClientIpResolver(trustedProxies: readonly string[]) {
  const trusted = new IpRangeList(trustedProxies);
  const anyTrusted = trustedProxies.length > 0;
  return (socketAddress: string | undefined, forwardedFor: string | undefined): string => {
    const direct = normalize(socketAddress ?? '');
    if (!anyTrusted || !forwardedFor || !trusted.contains(direct)) return direct;
    const hops = forwardedFor.split(',').map((hop) => hop.trim()).filter(Boolean);
    for (let index = hops.length - 1; index >= 0; index--) {
      const hop = normalize(hops[index]!);
      if (!parseIp(hop)) return direct;
      if (!trusted.contains(hop)) return hop;
    }
    return direct;
  };
}

function normalize(address: string): string {
  return parseIp(address)?.toString() ?? address;
}
