/** Lifetimes and limits of the mobile API's identity layer (the spec's Limits table). */
export const ACCESS_TOKEN_TTL_SECONDS = 3600;
export const REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 3600;
export const LOGIN_TICKET_TTL_SECONDS = 5 * 60;
export const REVIEW_TICKET_DEFAULT_DAYS = 30;
export const REVIEW_TICKET_MAX_DAYS = 365;

/** The QR payload's `typ`: tells the app that the code is a Warden login ticket. */
export const QR_TYPE = 'warden-mobile-login';
export const QR_VERSION = 1;

export const MOBILE_PREFIX = '/api/mobile/';
export const PAIRING_PATH = `${MOBILE_PREFIX}auth/qr/`;
export const WEBSOCKET_PATH = `${MOBILE_PREFIX}ws/`;

/** Identity requests are a few short fields; anything larger is refused before it is read. */
export const IDENTITY_BODY_LIMIT_BYTES = 16 * 1024;

export const PLATFORMS = ['ios', 'android', 'other'] as const;
export type Platform = (typeof PLATFORMS)[number];

/** The profile_target model of the user's own record, as the web admin names it. */
export const USER_MODEL = 'auth.user';

/** Device and user ids are UUIDs; anything else is refused before it reaches a uuid column. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
