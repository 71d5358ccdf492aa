import test from 'ava';
import {
  COMMON_PASSWORD_COUNT,
  hashPassword,
  quickRatio,
  validatePassword,
  verifyPassword,
} from '../../src/modules/staff/passwords.ts';
import { buildPrincipal, type StaffUser } from '../../src/modules/staff/principal.ts';
import { safeNextUrl } from '../../src/modules/backoffice/web/security.ts';

const codes = (password: string, user = {}) => validatePassword(password, user).map((error) => error.code);

test('an acceptable password has no errors', (t) => {
  t.deepEqual(validatePassword('correct horse battery staple', { username: 'anna', email: 'anna@example.org', full_name: 'Anna Berg' }), []);
});

test('minimum length is 12 characters, with Django message and code', (t) => {
  t.deepEqual(validatePassword('Tr0ub4dor&3'), [
    { message: 'This password is too short. It must contain at least 12 characters.', code: 'password_too_short' },
  ]);
  t.deepEqual(codes('Tr0ub4dor&3x'), []);
  // characters, not UTF-16 units: 11 emoji are too short
  t.true(codes('😀'.repeat(11)).includes('password_too_short'));
});

test('common passwords: a list of at least 20,000, compared case-insensitively and trimmed', (t) => {
  t.true(COMMON_PASSWORD_COUNT >= 20000, `${COMMON_PASSWORD_COUNT} entries`);
  t.deepEqual(validatePassword('password'), [
    { message: 'This password is too short. It must contain at least 12 characters.', code: 'password_too_short' },
    { message: 'This password is too common.', code: 'password_too_common' },
  ]);
  t.true(codes(' PassWord ').includes('password_too_common'));
  t.true(codes('1q2w3e4r5t6y').includes('password_too_common'));
  t.false(codes('v8#Lq!z2Pm@9wX').includes('password_too_common'));
});

test('entirely numeric passwords are refused', (t) => {
  t.deepEqual(codes('918273645501928'), ['password_entirely_numeric']);
  t.true(codes('٣٤٥٦٧٨٩٠١٢٣٤٥').includes('password_entirely_numeric'));
  t.false(codes('918273645501928a').includes('password_entirely_numeric'));
});

test('quick_ratio matches difflib', (t) => {
  // difflib.SequenceMatcher(a='abcd', b='bcde').quick_ratio() == 0.75
  t.is(quickRatio('abcd', 'bcde'), 0.75);
  t.is(quickRatio('aab', 'abb'), 2 * 2 / 6);
  t.is(quickRatio('', ''), 1);
  t.is(quickRatio('abc', 'xyz'), 0);
});

test('too similar to the username, full name or email, naming the attribute as Django does', (t) => {
  const user = { username: 'testclient', full_name: 'Test Client', email: 'testclient@example.com' };
  t.deepEqual(validatePassword('testclient12', user)[0], { message: 'The password is too similar to the username.', code: 'password_too_similar' });
  t.is(validatePassword('clienttest99', { full_name: 'Clienttest Fullname' })[0]!.message, 'The password is too similar to the full name.');
  t.is(validatePassword('example.com12', { email: 'someone@example.com' })[0]!.message, 'The password is too similar to the email address.');
  // a part far shorter than the password is skipped (Django's length-ratio shortcut)
  t.false(codes('a-much-longer-passphrase-here', { username: 'ab' }).includes('password_too_similar'));
  t.false(codes('unrelated words 42', user).includes('password_too_similar'));
  t.deepEqual(codes('testclient12', {}), []);
});

test('argon2id hashes verify only the same password; a broken hash matches nothing', async (t) => {
  const hashed = await hashPassword('correct horse battery staple');
  t.true(hashed.startsWith('$argon2id$'));
  t.true(await verifyPassword(hashed, 'correct horse battery staple'));
  t.false(await verifyPassword(hashed, 'correct horse battery stapler'));
  t.false(await verifyPassword('not a hash', 'anything'));
});

const baseUser: StaffUser = {
  id: '00000000-0000-4000-8000-000000000001',
  username: 'anna',
  full_name: '',
  email: '',
  password_hash: null,
  is_active: true,
  is_staff: true,
  is_superuser: false,
  timezone: 'UTC',
  language: 'en',
  mobile: '',
  date_format: 'YYYY-MM-DD',
  time_format: 'HH:mm',
  show_today: true,
  last_login: null,
  date_joined: new Date(),
  password_changed_at: null,
};

test('principal: granted codenames only; a superuser has everything; an inactive user nothing', (t) => {
  const granted = new Set(['customer.view_customer']);
  const plain = buildPrincipal(baseUser, ['Analysts'], granted, null);
  t.true(plain.has('customer.view_customer'));
  t.false(plain.has('customer.change_customer'));
  t.false(plain.isAgent);
  const superuser = buildPrincipal({ ...baseUser, is_superuser: true }, [], new Set(), null);
  t.true(superuser.has('customer.delete_customer'));
  const inactive = buildPrincipal({ ...baseUser, is_active: false, is_superuser: true }, [], granted, null);
  t.false(inactive.has('customer.view_customer'));
  t.false(inactive.has('anything.at_all'));
  t.is(inactive.granted.size, 0);
});

test('next after login: only paths on this site', (t) => {
  t.is(safeNextUrl('/admin/customer/customer/?q=x'), '/admin/customer/customer/?q=x');
  t.is(safeNextUrl('/admin/../admin/'), '/admin/');
  for (const unsafe of ['https://evil.example/', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)', '/admin/\u0000', '', undefined, 'admin/']) {
    t.is(safeNextUrl(unsafe), '/admin/', String(unsafe));
  }
});
