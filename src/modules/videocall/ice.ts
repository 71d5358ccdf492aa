import { createHmac } from 'node:crypto';
import type { Config, IceServer } from '../../config.ts';

/** How long TURN credentials handed out for a call hold. */
export const TURN_CREDENTIAL_SECONDS = 3600;

/**
 * The ICE servers one party of a call gets: the fixed ones (WARDEN_ICE_SERVERS) and, with
 * WARDEN_TURN_URLS and WARDEN_TURN_SECRET, TURN credentials as coturn's use-auth-secret checks
 * them (the TURN REST API): username `<expiry unix time>:<label>`, password
 * base64(HMAC-SHA1(secret, username)), valid TURN_CREDENTIAL_SECONDS. None set: an empty list,
 * host candidates only (enough on one network).
 */
export function iceServersFor(config: Config, label: string, now = Date.now()): IceServer[] {
  const servers: IceServer[] = config.videoCall.iceServers.map((server) => ({ ...server }));
  const turn = config.videoCall.turn;
  if (turn) {
    const username = `${Math.floor(now / 1000) + TURN_CREDENTIAL_SECONDS}:${label}`;
    const credential = createHmac('sha1', turn.secret).update(username).digest('base64');
    servers.push({ urls: [...turn.urls], username, credential });
  }
  return servers;
}

/** The start-up line about how calls will connect. */
export function describeIceServers(config: Config): string {
  const parts: string[] = [];
  if (config.videoCall.iceServers.length) parts.push(`${config.videoCall.iceServers.length} ICE server(s) from WARDEN_ICE_SERVERS`);
  if (config.videoCall.turn) parts.push(`TURN at ${config.videoCall.turn.urls.join(', ')} with time-limited credentials`);
  return parts.length
    ? `video calls: ${parts.join(' and ')}`
    : 'video calls: no ICE servers set (WARDEN_ICE_SERVERS, WARDEN_TURN_URLS + WARDEN_TURN_SECRET): host candidates only, so both ends must reach each other directly (one network)';
}
