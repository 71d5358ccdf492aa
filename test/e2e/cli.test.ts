/** The operator command line against a test database: events, rules and sanctions lists. */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

const root = path.resolve(import.meta.dirname, '../..');
const fixtures = path.join(root, 'test/fixtures/sanctions');
let database: TestDatabase;

test.before(async () => {
  database = await createTestDatabase();
});
test.after.always(async () => {
  await database?.drop();
});

async function warden(...args: string[]): Promise<{ code: number; json: unknown; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: database.url },
    });
    return { code: 0, json: JSON.parse(stdout), stderr };
  } catch (error) {
    const failure = error as { code: number; stderr: string };
    return { code: failure.code, json: JSON.parse(failure.stderr.split('\n')[0]!), stderr: failure.stderr };
  }
}

test.serial('event define and list', async (t) => {
  t.deepEqual((await warden('event', 'define', '--slug', 'deposit', '--type', '1', '--name', 'Deposit')).json, {
    slug: 'deposit',
    name: 'Deposit',
    type: 1,
    active: true,
  });
  await warden('event', 'define', '--slug', 'login', '--type', '2', '--inactive');
  const listed = (await warden('event', 'list')).json as Array<{ slug: string; active: boolean }>;
  t.deepEqual(listed.map((event) => [event.slug, event.active]), [['deposit', true], ['login', false]]);
  const bad = await warden('event', 'define', '--slug', 'x', '--type', '7');
  t.is(bad.code, 2);
  t.regex((bad.json as { error: string }).error, /type must be 0/);
  const badSlug = await warden('event', 'define', '--slug', 'Has Spaces', '--type', '1');
  t.is(badSlug.code, 2);
});

test.serial('rules load: the example file, versions bumped on change, bad files refused with the rule named', async (t) => {
  const loaded = (await warden('rules', 'load', 'rules/examples/aml-fraud.json')).json as { created: string[] };
  t.true(loaded.created.length >= 10);
  const again = (await warden('rules', 'load', 'rules/examples/aml-fraud.json')).json as { unchanged: string[]; updated: string[] };
  t.is(again.updated.length, 0);
  t.is(again.unchanged.length, loaded.created.length);

  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-rules-'));
  const changed = path.join(dir, 'one.json');
  await fs.writeFile(changed, JSON.stringify({ rules: [{ code: 'HIGH_AMOUNT_X', name: 'x', target: 'financial', expression: { '>': [{ var: 'record.amount' }, 1] }, score: 5 }] }));
  await warden('rules', 'load', changed);
  await fs.writeFile(changed, JSON.stringify({ rules: [{ code: 'HIGH_AMOUNT_X', name: 'x', target: 'financial', expression: { '>': [{ var: 'record.amount' }, 2] }, score: 5 }] }));
  const replaced = (await warden('rules', 'load', changed, '--replace')).json as { updated: string[]; deactivated: string[] };
  t.deepEqual(replaced.updated, ['HIGH_AMOUNT_X']);
  t.is(replaced.deactivated.length, loaded.created.length);
  const rules = (await warden('rules', 'list')).json as Array<{ code: string; version: number; active: boolean }>;
  t.is(rules.find((rule) => rule.code === 'HIGH_AMOUNT_X')!.version, 2);

  const evil = path.join(dir, 'evil.json');
  await fs.writeFile(evil, JSON.stringify({ rules: [{ code: 'EVIL', name: 'x', target: 'financial', expression: { eval: ['process.exit()'] }, score: 5 }] }));
  const refused = await warden('rules', 'load', evil);
  t.is(refused.code, 1);
  t.regex((refused.json as { error: string }).error, /EVIL/);
  const notJson = path.join(dir, 'broken.json');
  await fs.writeFile(notJson, '{ rules: ');
  t.regex(((await warden('rules', 'load', notJson)).json as { error: string }).error, /not valid JSON/);
  await fs.rm(dir, { recursive: true });
});

test.serial('sanctions import in the three formats, re-import replaces, status counts', async (t) => {
  const ofac = (await warden('sanctions', 'import', '--format', 'ofac', path.join(fixtures, 'sdn.csv'), path.join(fixtures, 'alt.csv'))).json as { imported: number };
  t.true(ofac.imported > 0);
  const un = (await warden('sanctions', 'import', '--format', 'un', path.join(fixtures, 'un.xml'))).json as { imported: number };
  t.true(un.imported > 0);
  const open = (await warden('sanctions', 'import', '--format', 'opensanctions', path.join(fixtures, 'opensanctions.jsonl'))).json as { imported: number };
  t.true(open.imported > 0);
  const again = (await warden('sanctions', 'import', '--format', 'un', path.join(fixtures, 'un.xml'))).json as { imported: number };
  t.is(again.imported, un.imported);
  const status = (await warden('sanctions', 'status')).json as Array<{ source: string; entries: number }>;
  t.deepEqual(status.map((row) => [row.source, Number(row.entries)]), [['ofac', ofac.imported], ['opensanctions', open.imported], ['un', un.imported]]);

  const missing = await warden('sanctions', 'import', '--format', 'un', '/nonexistent.xml');
  t.is(missing.code, 1);
  t.regex((missing.json as { error: string }).error, /Cannot read/);
  const wrongFormat = await warden('sanctions', 'import', '--format', 'csv', 'x');
  t.is(wrongFormat.code, 2);
});

test('verify mrz reads a photographed MRZ without a database and prints lines, fields, validity and timings', async (t) => {
  const expected = JSON.parse(await fs.readFile(path.join(root, 'test/fixtures/mrz/expected.json'), 'utf8'))['td3-tilted.jpg'];
  const { stdout } = await promisify(execFile)(process.execPath, ['bin/warden.js', 'verify', 'mrz', 'test/fixtures/mrz/td3-tilted.jpg'], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
  });
  const result = JSON.parse(stdout);
  t.deepEqual(result.lines, expected.lines);
  t.is(result.valid, true);
  t.is(result.format, 'TD3');
  t.is(typeof result.timings.total_ms, 'number');
  const missing = await warden('verify', 'mrz', '/nonexistent.jpg');
  t.is(missing.code, 1);
});

test('verify doc-front prints the fields, the outline, the portrait box and timings', async (t) => {
  const expected = JSON.parse(await fs.readFile(path.join(root, 'test/fixtures/docfront/expected.json'), 'utf8')).fields;
  const result = (await warden('verify', 'doc-front', 'test/fixtures/docfront/card-photo.jpg')).json as Record<string, any>;
  t.is(result.fields.document_number, expected.document_number);
  t.is(result.fields.birth_date, expected.birth_date);
  t.is(result.document.method, 'outline');
  t.true(result.face_found);
  t.is(result.face.box.length, 4);
  t.true(result.lines.every((line: { box: number[] }) => line.box.length === 4));
  t.is(typeof result.timings.text_recognition_ms, 'number');
});

test('verify face prints faces, similarity, threshold and the verdict; the threshold follows the environment', async (t) => {
  const same = (await warden('verify', 'face', 'test/fixtures/faces/astronaut.jpg', 'test/fixtures/docfront/card-flat.jpg')).json as Record<string, any>;
  t.is(same.model, 'dlib-resnet-v1');
  t.is(same.threshold, 0.48);
  t.is(same.metric, '1 - Euclidean distance');
  t.true(same.similarity >= 0.48, String(same.similarity));
  t.true(same.match);
  t.is(same.verdict, 'same person');
  t.deepEqual(same.images.map((image: { face_count: number }) => image.face_count), [1, 1]);
  const other = (await warden('verify', 'face', 'test/fixtures/faces/astronaut.jpg', 'test/fixtures/faces/cameraman.jpg')).json as Record<string, any>;
  t.false(other.match);
  t.is(other.verdict, 'face too small to compare in test/fixtures/faces/cameraman.jpg');
  t.true(other.images[1].too_small);
  const hopper = (await warden('verify', 'face', 'test/fixtures/faces/astronaut.jpg', 'test/fixtures/faces/grace-hopper.jpg')).json as Record<string, any>;
  t.true(hopper.similarity < hopper.threshold, String(hopper.similarity));
  t.is(hopper.verdict, 'different people');
  const noFace = (await warden('verify', 'face', 'test/fixtures/faces/astronaut.jpg', 'test/fixtures/docfront/card-no-portrait.jpg')).json as Record<string, any>;
  t.is(noFace.similarity, null);
  t.false(noFace.match);
  t.false(noFace.images[1].face_found);
  t.is(noFace.verdict, 'no face found in test/fixtures/docfront/card-no-portrait.jpg');
  const usage = await warden('verify', 'face', 'test/fixtures/faces/astronaut.jpg');
  t.is(usage.code, 2);
});
