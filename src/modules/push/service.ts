import type { Config } from '../../config.ts';
import { ApnsClient } from './apns.ts';
import { FcmClient } from './fcm.ts';
import type { PushMessage, PushOutcome } from './types.ts';

export type PushProvider = 'fcm' | 'apns';
/** The provider name older app builds send for FCM (its predecessor, Google Cloud Messaging). */
export const LEGACY_PROVIDERS: Readonly<Record<string, PushProvider>> = { gcm: 'fcm' };

/**
 * The push field of pairing, refresh and me/: the provider the app should register with and its
 * app id (the Firebase project, or the APNs topic = the iOS bundle id), or null without push.
 * FCM is named first when both are configured: it reaches Android and iOS alike.
 */
export function pushIdentity(config: Config): { provider: PushProvider; app_id: string } | null {
  if (config.push.fcm) return { provider: 'fcm', app_id: config.push.fcm.projectId };
  if (config.push.apns) return { provider: 'apns', app_id: config.push.apns.topic };
  return null;
}

/** The provider a devices/push-token request names, or null when the installation does not push through it. */
export function acceptedProvider(config: Config, name: string): PushProvider | null {
  const provider = (LEGACY_PROVIDERS[name] ?? name) as PushProvider;
  if (provider === 'fcm' && config.push.fcm) return 'fcm';
  if (provider === 'apns' && config.push.apns) return 'apns';
  return null;
}

/** The configured provider clients. */
export class PushService {
  constructor(
    readonly fcm: FcmClient | null,
    readonly apns: ApnsClient | null,
  ) {}

  static fromConfig(config: Config): PushService {
    return new PushService(config.push.fcm ? new FcmClient(config.push.fcm) : null, config.push.apns ? new ApnsClient(config.push.apns) : null);
  }

  async send(provider: string, token: string, message: PushMessage): Promise<PushOutcome> {
    const client = provider === 'fcm' ? this.fcm : provider === 'apns' ? this.apns : null;
    if (!client) return { kind: 'rejected', reason: `push provider ${provider} is not configured` };
    return client.send(token, message);
  }

  close(): void {
    this.apns?.close();
  }
}
