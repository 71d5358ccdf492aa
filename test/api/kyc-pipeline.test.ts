/**
 * The verification pipeline end to end in one process: uploads become durable jobs, the vision
 * pool reads MRZs, results are stored once and pushed to the session's websocket clients only.
 */
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineTestFlow, openSession, registeredClient, upload, waitFor } from '../helpers/kyc.ts';
import { dg1, dg2 } from '../helpers/lds.ts';
import { issue, makeSod } from '../helpers/pki.ts';
import { storeCscas } from '../../src/modules/kyc/verifiers/passive-auth.ts';
import { seededRandom } from '../../models/mrz/render-training-data.ts';
import { photograph, randomDocument, renderPage } from '../../models/mrz/synthetic-document.ts';

interface J2kEncoder {
  getDecodedBuffer(info: { width: number; height: number; bitsPerSample: number; componentCount: number; isSigned: boolean; isUsingColorTransform: boolean }): Uint8Array;
  encode(): void;
  getEncodedBuffer(): Uint8Array;
}
/** OpenJPEG's encoder, to make JPEG 2000 chip portraits. */
const openJpeg = await (createRequire(import.meta.url)('@cornerstonejs/codec-openjpeg/wasmjs') as (module: object) => Promise<{ J2KEncoder: new () => J2kEncoder }>)({ print: () => {}, printErr: () => {} });
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

test('an MRZ whose check digit does not hold fails, naming the field', async (t) => {
  // A rendered passport whose document number check digit is off by one.
  const random = seededRandom(4242);
  const document = randomDocument(random, 'TD3');
  const line = document.lines[1]!;
  const forged = { ...document, lines: [document.lines[0]!, `${line.slice(0, 9)}${(Number(line[9]) + 1) % 10}${line.slice(10)}`] };
  const image = await photograph(renderPage(forged, random, 8), random, { width: 1000, height: 750, coverage: 0.85, angle: 2, perspective: 0, shadow: 0.1, blur: 0.6, noise: 4, quality: 85 });
  const session = await openSession(app, token, { customer_ref: 'ws-check-digit' });
  const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'passport_mrz_page', file: { bytes: image, name: 'page.jpg', type: 'image/jpeg' } });
  const stored = await result(uploaded.body.artifact_id);
  t.is(stored.code, 'fail');
  t.regex(stored.message, /check digits do not hold \(.*document_number/);
});

test('nfc_raw: passive authentication, DG1 checked against the MRZ already read, DG2 portrait kept; bad or forged chip data fails', async (t) => {
  const fixture = expected['td3-flat.jpg']!;
  await customer('ws-nfc', { first_name: fixture.fields.first_name, last_name: fixture.fields.last_name, birth_date: fixture.fields.birth_date });
  const session = await openSession(app, token, { customer_ref: 'ws-nfc' });
  const page = await upload(app, UPLOAD, {
    token: session.endpoint_token,
    artifact_type: 'passport_mrz_page',
    file: { bytes: await fs.readFile(path.join(fixtures, 'td3-flat.jpg')), name: 'page.jpg', type: 'image/jpeg' },
  });
  const pageResult = await result(page.body.artifact_id);
  t.is(pageResult.code, 'success', pageResult.message);

  const portrait = await sharp({ create: { width: 16, height: 20, channels: 3, background: '#caa' } }).jpeg().toBuffer();
  // Before any CSCA is imported, even a well-signed chip cannot be trusted.
  const csca = await issue('CSCA Utopia', undefined, { ca: true });
  const signer = await issue('DS Utopia', csca);
  const groups = { DG1: dg1(fixture.lines), DG2: dg2(portrait) };
  const chip = Buffer.from(JSON.stringify({ dg1: groups.DG1.toString('base64'), dg2: groups.DG2.toString('base64'), sod: (await makeSod(groups, signer)).toString('base64') }));
  const send = async (bytes: Buffer, json = true) =>
    result((await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'nfc_raw', file: { bytes, name: json ? 'chip.json' : 'chip.bin', type: json ? 'application/json' : 'application/octet-stream' } })).body.artifact_id);
  const untrusted = await send(chip);
  t.is(untrusted.code, 'fail');
  t.regex(untrusted.message, /^Passive authentication failed at document_signer: no CSCA certificate has been imported/);

  t.is(await storeCscas(app.database.knex, [csca.certificate], 'test'), 1);
  t.is(await storeCscas(app.database.knex, [csca.certificate], 'test again'), 0, 'stored once');
  const nfc = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'nfc_raw', file: { bytes: chip, name: 'chip.json', type: 'application/json' } });
  t.is(nfc.status, 200, nfc.text);
  const stored = await result(nfc.body.artifact_id);
  t.is(stored.type, 'nfc_raw_result');
  t.is(stored.code, 'success', stored.message);
  t.is(stored.data, null);
  t.true(stored.details.passive_authentication.passed);
  t.deepEqual(stored.details.passive_authentication.checks.map((check: { passed: boolean }) => check.passed), [true, true, true, true]);
  const kept = await app.database.knex('verification_artifacts').where({ id: stored.details.portrait_artifact_id }).first();
  t.deepEqual(await app.context.files.read(kept.path), portrait);

  // A genuine chip of another document: authentic, but not the MRZ photographed.
  const otherDg1 = dg1(expected['td3-tilted.jpg']!.lines);
  const mismatch = await send(Buffer.concat([otherDg1, await makeSod({ DG1: otherDg1 }, signer)]), false);
  t.is(mismatch.code, 'fail');
  t.regex(mismatch.message, /differs from the MRZ read from the document/);
  // The photographed MRZ written into a chip whose SOD hashed other data.
  const forged = await send(Buffer.concat([groups.DG1, await makeSod({ DG1: otherDg1 }, signer)]), false);
  t.regex(forged.message, /^Passive authentication failed at data_group_hashes: the DG1 hash does not match the SOD/);
  const unsigned = await send(groups.DG1, false);
  t.regex(unsigned.message, /^Passive authentication failed at sod: no EF.SOD was sent/);

  // A JPEG 2000 portrait is kept decoded, as JPEG; one that cannot be decoded is not kept, and the result says why.
  const { data, info } = await sharp({ create: { width: 40, height: 50, channels: 3, background: '#a98' } }).raw().toBuffer({ resolveWithObject: true });
  const encoder = new openJpeg.J2KEncoder();
  encoder.getDecodedBuffer({ width: info.width, height: info.height, bitsPerSample: 8, componentCount: 3, isSigned: false, isUsingColorTransform: true }).set(data);
  encoder.encode();
  const j2kGroups = { DG1: groups.DG1, DG2: dg2(Buffer.from(encoder.getEncodedBuffer())) };
  const j2k = await send(Buffer.concat([j2kGroups.DG1, j2kGroups.DG2, await makeSod(j2kGroups, signer)]), false);
  t.is(j2k.code, 'success', j2k.message);
  t.is(j2k.details.portrait_format, 'jpeg2000');
  const decoded = await app.database.knex('verification_artifacts').where({ id: j2k.details.portrait_artifact_id }).first();
  t.is(decoded.content_type, 'image/jpeg');
  t.deepEqual((await sharp(await app.context.files.read(decoded.path)).metadata()).width, 40);
  const brokenGroups = { DG1: groups.DG1, DG2: dg2(Buffer.from([0xff, 0x4f, 0xff, 0x51, 0x00, 0x01, 0x02])) };
  const broken = await send(Buffer.concat([brokenGroups.DG1, brokenGroups.DG2, await makeSod(brokenGroups, signer)]), false);
  t.is(broken.code, 'success', 'the chip is authentic; only its portrait is unusable');
  t.regex(broken.details.portrait_error, /^portrait format not supported: the JPEG 2000 image could not be decoded/);
  t.is(broken.details.portrait_artifact_id, undefined);
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
