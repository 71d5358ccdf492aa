/** `warden csca import` and `csca list` against a test database, with lists made by test/helpers/pki.ts. */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { issue, makeLdif, makeMasterList } from '../helpers/pki.ts';

const root = path.resolve(import.meta.dirname, '../..');
let database: TestDatabase;

test.before(async () => {
  database = await createTestDatabase();
});
test.after.always(async () => {
  await database?.drop();
});

async function warden(...args: string[]): Promise<{ code: number; json: any }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], { cwd: root, env: { ...process.env, DATABASE_URL: database.url } });
    return { code: 0, json: JSON.parse(stdout) };
  } catch (error) {
    const failure = error as { code: number; stderr: string };
    return { code: failure.code, json: JSON.parse(failure.stderr.split('\n')[0]!) };
  }
}

test('csca import: a master list, then an LDIF repeating it adds only what is new; bad files are refused with the reason', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-csca-'));
  const first = await issue('CSCA Utopia', undefined, { ca: true });
  const second = await issue('CSCA Utopia 2', undefined, { ca: true });
  const third = await issue('CSCA Utopia 3', undefined, { ca: true });
  const list = await makeMasterList([first, second], first);
  await fs.writeFile(path.join(dir, 'utopia.ml'), list);
  await fs.writeFile(path.join(dir, 'pkd.ldif'), makeLdif(list, third.der));

  const imported = await warden('csca', 'import', path.join(dir, 'utopia.ml'));
  t.is(imported.code, 0, JSON.stringify(imported.json));
  t.like(imported.json.imported[0], { certificates: 2, added: 2, already_stored: 0 });
  t.deepEqual(imported.json.imported[0].master_lists, [{ certificates: 2, signature_verified: true, signer: 'C=UT, CN=CSCA Utopia' }]);

  const again = await warden('csca', 'import', path.join(dir, 'pkd.ldif'));
  t.like(again.json.imported[0], { certificates: 3, added: 1, already_stored: 2 });
  const listed = await warden('csca', 'list');
  t.deepEqual(listed.json.map((row: { subject: string }) => row.subject), ['C=UT, CN=CSCA Utopia', 'C=UT, CN=CSCA Utopia 2', 'C=UT, CN=CSCA Utopia 3']);

  await fs.writeFile(path.join(dir, 'junk.bin'), 'not a certificate list');
  const junk = await warden('csca', 'import', path.join(dir, 'junk.bin'));
  t.is(junk.code, 1);
  t.regex(junk.json.error, /^.*junk\.bin: /);
  t.is((await warden('csca', 'import', path.join(dir, 'missing.ml'))).code, 1);
  t.is((await warden('csca', 'import')).code, 2);
  t.is((await warden('csca', 'frobnicate')).code, 2);
});
