import { hash, verify } from '@node-rs/argon2';
import { dictionary } from '@zxcvbn-ts/language-common';
import type { FieldError } from '../../validation/form.ts';

/**
 * Staff passwords: argon2id hashes and Django's four default validators with Django's codes and
 * messages, so that the command line, the web admin and the mobile API refuse the same passwords
 * with the same words.
 */

/** A validator's complaint, in the shape of a form's field error. */
export type PasswordError = FieldError;

/** What the similarity check compares a password with; any of them may be missing. */
export interface PasswordUserAttributes {
  username?: string | null;
  full_name?: string | null;
  email?: string | null;
}

export const MIN_PASSWORD_LENGTH = 12;
export const MAX_SIMILARITY = 0.7;

/**
 * zxcvbn's common-password list (49,233 entries, lower case, MIT licence) as shipped by
 * @zxcvbn-ts/language-common: larger than Django's 20,000-entry list and kept up to date on npm.
 */
const COMMON_PASSWORDS: ReadonlySet<string> = new Set(dictionary['passwords-common'].map((password) => password.toLowerCase()));

export const COMMON_PASSWORD_COUNT = COMMON_PASSWORDS.size;

// Django's verbose names for the attributes, as they read in "too similar to the ...".
const ATTRIBUTE_NAMES: Record<keyof PasswordUserAttributes, string> = {
  username: 'username',
  full_name: 'full name',
  email: 'email address',
};

/** Every validator's errors, in Django's order (similarity, length, common, numeric); empty when the password is acceptable. */
export function validatePassword(password: string, user: PasswordUserAttributes = {}): PasswordError[] {
  const errors: PasswordError[] = [];
  const similar = similarAttribute(password, user);
  if (similar) errors.push({ message: `The password is too similar to the ${ATTRIBUTE_NAMES[similar]}.`, code: 'password_too_similar' });
  if ([...password].length < MIN_PASSWORD_LENGTH) {
    errors.push({
      message: `This password is too short. It must contain at least ${MIN_PASSWORD_LENGTH} characters.`,
      code: 'password_too_short',
    });
  }
  if (COMMON_PASSWORDS.has(password.toLowerCase().trim())) errors.push({ message: 'This password is too common.', code: 'password_too_common' });
  if (/^\p{Nd}+$/u.test(password)) errors.push({ message: 'This password is entirely numeric.', code: 'password_entirely_numeric' });
  return errors;
}

/**
 * Django's UserAttributeSimilarityValidator: the password against each attribute and each of its
 * word-separated parts, with difflib's quick_ratio (a bound on SequenceMatcher's ratio from the
 * shared characters); parts far shorter than the password are skipped, as Django does, because
 * their ratio cannot reach the limit.
 */
function similarAttribute(password: string, user: PasswordUserAttributes): keyof PasswordUserAttributes | undefined {
  const lowered = password.toLowerCase();
  for (const attribute of Object.keys(ATTRIBUTE_NAMES) as (keyof PasswordUserAttributes)[]) {
    const value = user[attribute];
    if (!value) continue;
    const valueLower = value.toLowerCase();
    const parts = [...valueLower.split(/[^\p{L}\p{N}_]+/u), valueLower];
    for (const part of parts) {
      if (exceedsMaximumLengthRatio(lowered, part)) continue;
      if (quickRatio(lowered, part) >= MAX_SIMILARITY) return attribute;
    }
  }
  return undefined;
}

function exceedsMaximumLengthRatio(password: string, value: string): boolean {
  const passwordLength = [...password].length;
  const valueLength = [...value].length;
  return passwordLength >= 10 * valueLength && valueLength < (MAX_SIMILARITY / 2) * passwordLength;
}

/** difflib.SequenceMatcher.quick_ratio: 2 x (characters in common, counted with multiplicity) / (total length). */
export function quickRatio(a: string, b: string): number {
  const left = [...a];
  const right = [...b];
  const total = left.length + right.length;
  if (!total) return 1;
  const available = new Map<string, number>();
  for (const char of right) available.set(char, (available.get(char) ?? 0) + 1);
  let matches = 0;
  for (const char of left) {
    const count = available.get(char) ?? 0;
    if (count > 0) {
      available.set(char, count - 1);
      matches++;
    }
  }
  return (2 * matches) / total;
}

/** argon2id with the library's defaults (19 MiB, 2 passes), as OWASP recommends. */
export function hashPassword(password: string): Promise<string> {
  return hash(password);
}

export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    // a hash that does not parse (hand-edited row) matches nothing
    return false;
  }
}
