import { createHash, randomBytes, randomInt } from 'node:crypto';

/** Secrets are stored only as this hash; a lookup hashes what the client sent. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** A login ticket: 32 random bytes, base64url (fits a small QR code). */
export function newLoginTicket(): string {
  return randomBytes(32).toString('base64url');
}

/** A refresh token: 48 random bytes as the spec asks, base64url. */
export function newRefreshToken(): string {
  return randomBytes(48).toString('base64url');
}

// Crockford's base32: no I, L, O or U, so a code read aloud or typed from paper is not misread.
const CODE_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CODE_LENGTH = 24; // 120 bits
const CODE_GROUP = 4;

/** A review ticket code, typed by hand on the app's manual entry screen: XXXX-XXXX-... */
export function newReviewCode(): string {
  let code = '';
  for (let index = 0; index < CODE_LENGTH; index++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code.match(new RegExp(`.{${CODE_GROUP}}`, 'g'))!.join('-');
}

/**
 * The form a review code is hashed in: upper case without separators, with the letters Crockford
 * reads as digits mapped to them. Returns null for text that cannot be a review code.
 */
export function canonicalReviewCode(text: string): string | null {
  const compact = text
    .toUpperCase()
    .replace(/[\s-]/g, '')
    .replace(/O/g, '0')
    .replace(/[IL]/g, '1');
  if (compact.length !== CODE_LENGTH) return null;
  for (const character of compact) if (!CODE_ALPHABET.includes(character)) return null;
  return compact;
}
