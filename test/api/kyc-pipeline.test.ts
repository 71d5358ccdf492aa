/**
 * The verification pipeline end to end in one process: uploads become durable jobs, the vision
 * pool reads MRZs, results are stored once and pushed to the session's websocket clients only.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineTestFlow, openSession, registeredClient, upload, waitFor } from '../helpers/kyc.ts';
import { dg1, dg2 } from '../helpers/lds.ts';
import { verifyArtifact } from '../../src/modules/kyc/pipeline.ts';

const UPLOAD = '/api/document/upload_document/';
const fixtures = path.resolve(import.meta.dirname, '../fixtures/mrz');

let app: TestApp;
let token: string;
let expected: Record<string, { lines: string[]; fields: Record<string, string> }>;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineTestFlow(app.context, 'passport', ['passport_mrz_page', 'nfc_raw', 'liveness_video', 'recording'], { default: true });
  expected = JSON.parse(await fs.readFile(path.join(fixtures, 'expected.json'), 'utf8'));
});
test.after.always(async () => {
  await app?.close();
});

async function result(artifactId: string) {
  return waitFor(async () => (await app.database.knex('verification_results').where({ artifact_id: artifactId }).first()) ?? undefined, 60_000);
}

/** An artifact row written directly, without a queued job, so a test can run the verifier itself. */
async function unqueuedArtifact(sessionId: string, file: { path: string; size: number; sha256: string }): Promise<string> {
  const id = crypto.randomUUID();
  await app.database.knex('verification_artifacts').insert({ id, session_id: sessionId, artifact_type: 'passport_mrz_page', content_type: 'image/jpeg', ...file });
  return id;
}

async function customer(ref: string, fields: Record<string, unknown>) {
  await app.request('POST', '/api/customer/upsert/', { token, json: { customer_ref: ref, migration: true, ...fields } });
}

test('register: a valid token joins its session; an invalid or expired one gets an error message', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'ws-1' });
  const good = await registeredClient(app.url, session.endpoint_token);
  t.deepEqual(good.reply, { event: 'registered', data: { session_id: session.session_id } });
  good.socket.close();
  const bad = await registeredClient(app.url, 'garbage');
  t.is(bad.reply.event, 'error');
  t.is(bad.reply.data.reason, 'token_invalid');
  bad.socket.close();
  const expired = await app.context.tokens.issue('session', session.session_id, -1);
  const late = await registeredClient(app.url, expired.token);
  t.is(late.reply.data.reason, 'token_expired');
  late.socket.close();
});

test('a passport page: MRZ read, fields compared with the customer, one message to this session only', async (t) => {
  const fixture = expected['td3-flat.jpg']!;
  await customer('ws-mrz', { first_name: fixture.fields.first_name, last_name: fixture.fields.last_name, birth_date: fixture.fields.birth_date });
  const session = await openSession(app, token, { customer_ref: 'ws-mrz' });
  const other = await openSession(app, token, { customer_ref: 'ws-other' });
  const mine = await registeredClient(app.url, session.endpoint_token);
  const theirs = await registeredClient(app.url, other.endpoint_token);
  t.teardown(() => {
    mine.socket.close();
    theirs.socket.close();
  });

  const bytes = await fs.readFile(path.join(fixtures, 'td3-flat.jpg'));
  const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'passport_mrz_page', file: { bytes, name: 'page.jpg', type: 'image/jpeg' } });
  t.is(uploaded.status, 200, uploaded.text);
  const message = await waitFor(() => (mine.messages[0] as Record<string, any> | undefined), 60_000);
  t.is(message.event, 'broadcast');
  t.is(typeof message.client_id, 'string');
  t.true(Math.abs(message.timestamp - Date.now()) < 60_000);
  t.regex(message.correlation_id, /^[0-9a-f-]{36}$/);
  t.deepEqual(Object.keys(message.data).sort(), ['delivery', 'result', 'to', 'type']);
  t.is(message.data.to, session.session_id);
  t.is(message.data.type, 'mrz_verification_result');
  t.is(message.data.result.code, 'success', message.data.result.message);
  for (const [name, value] of Object.entries(fixture.fields)) {
    if (name in message.data.result.data) t.is(message.data.result.data[name], value, name);
  }
  t.deepEqual(message.data.result.data.mismatched_fields, []);

  await new Promise((resolve) => setTimeout(resolve, 300));
  t.is(mine.messages.length, 1, 'exactly one message');
  t.is(theirs.messages.length, 0, 'another session hears nothing');
  const stored = await app.database.knex('verification_sessions').where({ id: session.session_id }).first();
  t.true(stored.succeeded_artifact_types.includes('passport_mrz_page'));
  t.false(stored.pending_artifact_types.includes('passport_mrz_page'));
  t.deepEqual(stored.mrz_data.lines, fixture.lines);
  const again = await openSession(app, token, { customer_ref: 'ws-mrz' });
  t.is((again as unknown as { mrz_data: { document_number: string } }).mrz_data.document_number, fixture.fields.document_number!);
});

test('a customer record that disagrees with the document fails with the mismatched fields', async (t) => {
  await customer('ws-mismatch', { first_name: 'Somebody', last_name: 'Else' });
  const session = await openSession(app, token, { customer_ref: 'ws-mismatch' });
  const bytes = await fs.readFile(path.join(fixtures, 'td3-flat.jpg'));
  const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'passport_mrz_page', file: { bytes, name: 'page.jpg', type: 'image/jpeg' } });
  const stored = await result(uploaded.body.artifact_id);
  t.is(stored.code, 'fail');
  t.deepEqual(stored.data.mismatched_fields, ['first_name', 'last_name']);
});

test('no MRZ, a truncated JPEG and a decompression bomb each give a fail result; the server keeps serving', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'ws-bad-images' });
  const noMrz = await fs.readFile(path.join(fixtures, 'no-mrz.jpg'));
  const truncated = noMrz.subarray(0, Math.floor(noMrz.length / 3));
  const bomb = await sharp({ create: { width: 12000, height: 12000, channels: 3, background: '#000' } }).png({ compressionLevel: 9 }).toBuffer();
  const files = [
    ['no-mrz.jpg', noMrz, 'image/jpeg'],
    ['truncated.jpg', truncated, 'image/jpeg'],
    ['bomb.png', bomb, 'image/png'],
  ] as const;
  for (const [name, bytes, type] of files) {
    const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'passport_mrz_page', file: { bytes, name, type } });
    t.is(uploaded.status, 200, uploaded.text);
    const stored = await result(uploaded.body.artifact_id);
    t.is(stored.code, 'fail', `${name}: ${stored.message}`);
    t.is(stored.type, 'mrz_verification_result');
  }
  t.is((await app.request('GET', '/healthz')).status, 200);
});

test('nfc_raw: DG1 checked against the MRZ already read, DG2 portrait kept; bad chip data fails', async (t) => {
  const fixture = expected['td3-flat.jpg']!;
  const session = await openSession(app, token, { customer_ref: 'ws-nfc' });
  const page = await upload(app, UPLOAD, {
    token: session.endpoint_token,
    artifact_type: 'passport_mrz_page',
    file: { bytes: await fs.readFile(path.join(fixtures, 'td3-flat.jpg')), name: 'page.jpg', type: 'image/jpeg' },
  });
  t.is((await result(page.body.artifact_id)).code, 'success');

  const portrait = await sharp({ create: { width: 16, height: 20, channels: 3, background: '#caa' } }).jpeg().toBuffer();
  const chip = Buffer.from(JSON.stringify({ dg1: dg1(fixture.lines).toString('base64'), dg2: dg2(portrait).toString('base64') }));
  const nfc = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'nfc_raw', file: { bytes: chip, name: 'chip.json', type: 'application/json' } });
  t.is(nfc.status, 200, nfc.text);
  const stored = await result(nfc.body.artifact_id);
  t.is(stored.type, 'nfc_raw_result');
  t.is(stored.code, 'success', stored.message);
  t.is(stored.data, null);
  const kept = await app.database.knex('verification_artifacts').where({ id: stored.details.portrait_artifact_id }).first();
  t.deepEqual(await app.context.files.read(kept.path), portrait);

  const otherLines = [fixture.lines[0]!, fixture.lines[1]!.replace(/^./, fixture.lines[1]![0] === 'X' ? 'Y' : 'X')];
  const mismatch = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'nfc_raw', file: { bytes: dg1(otherLines), name: 'chip.bin', type: 'application/octet-stream' } });
  t.is((await result(mismatch.body.artifact_id)).code, 'fail');
  const garbage = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'nfc_raw', file: { bytes: Buffer.from('\xff\x00garbage'), name: 'chip.bin', type: 'application/octet-stream' } });
  const garbageResult = await result(garbage.body.artifact_id);
  t.is(garbageResult.code, 'fail');
  t.regex(garbageResult.message, /chip data could not be read/);
});

test('liveness_video and recording: stored, checked to be video, always success', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'ws-video' });
  const video = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypmp42'), Buffer.from([0, 0, 0, 0]), Buffer.from('mp42isom'), Buffer.alloc(64)]);
  for (const [type, resultType] of [['liveness_video', 'liveness_result'], ['recording', 'recording_result']] as const) {
    const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: type, file: { bytes: video, name: 'clip.mp4', type: 'video/mp4' } });
    t.is(uploaded.status, 200, uploaded.text);
    const stored = await result(uploaded.body.artifact_id);
    t.is(stored.type, resultType);
    t.is(stored.code, 'success');
    t.is(stored.data, null);
  }
  const final = await app.database.knex('verification_sessions').where({ id: session.session_id }).first();
  t.true(final.succeeded_artifact_types.includes('liveness_video'));
  t.true(final.succeeded_artifact_types.includes('recording'));
});

test('a verifier that keeps failing: retried while attempts remain, a fail result on the last one', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'ws-lost-file' });
  const client = await registeredClient(app.url, session.endpoint_token);
  t.teardown(() => client.socket.close());
  // An artifact whose file is gone.
  const artifactId = await unqueuedArtifact(session.session_id, { size: 1, sha256: '0'.repeat(64), path: 'artifacts/00/00/missing' });
  await t.throwsAsync(verifyArtifact(app.context, artifactId, false), undefined, 'an attempt that is not the last throws, so the queue retries');
  t.is(await app.database.knex('verification_results').where({ artifact_id: artifactId }).first(), undefined);
  await verifyArtifact(app.context, artifactId, true);
  const stored = await result(artifactId);
  t.is(stored.code, 'fail');
  t.regex(stored.message, /could not be completed/);
  const message = await waitFor(() => client.messages[0] as { data: { result: { code: string } } } | undefined);
  t.is(message.data.result.code, 'fail');
  await verifyArtifact(app.context, artifactId, true);
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.is(client.messages.length, 1, 'a repeated job does not emit a second message');
});

test('an expired document fails with its expiry date, and its MRZ data is still kept', async (t) => {
  const fixture = expected['td3-flat.jpg']!;
  const session = await openSession(app, token, { customer_ref: 'ws-expired' });
  const bytes = await fs.readFile(path.join(fixtures, 'td3-flat.jpg'));
  const key = await app.context.files.putBuffer(bytes);
  // Verified as of a day after the document's expiry.
  const artifactId = await unqueuedArtifact(session.session_id, { size: bytes.length, sha256: key.split('/').at(-1)!, path: key });
  const dayAfter = new Date(Date.parse(`${fixture.fields.expiry_date}T00:00:00Z`) + 86_400_000);
  await verifyArtifact(app.context, artifactId, false, dayAfter);
  const stored = await result(artifactId);
  t.is(stored.code, 'fail');
  t.is(stored.message, `The document expired on ${fixture.fields.expiry_date}.`);
  t.is(stored.data.document_number, fixture.fields.document_number);
  const row = await app.database.knex('verification_sessions').where({ id: session.session_id }).first();
  t.false(row.succeeded_artifact_types.includes('passport_mrz_page'));
  t.deepEqual(row.mrz_data.lines, fixture.lines);
});
