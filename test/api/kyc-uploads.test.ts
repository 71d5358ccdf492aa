import test from 'ava';
import sharp from 'sharp';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { countRows } from '../helpers/fixtures.ts';
import { defineTestFlow, image, openSession, upload } from '../helpers/kyc.ts';

const UPLOAD = '/api/document/upload_document/';
const SNAPSHOT = '/api/document/take_snapshot/';

let app: TestApp;
let token: string;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineTestFlow(app.context, 'docs', ['doc_front', 'doc_back', 'selfie'], { default: true });
});
test.after.always(async () => {
  await app?.close();
});

const jpegFile = async () => ({ bytes: await image('jpeg'), name: 'front.jpg', type: 'image/jpeg' });

test('upload_document stores the file content-addressed and answers success, path, artifact_id, artifact_type', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'up-1' });
  const file = await jpegFile();
  const response = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'doc_back', file, extra_data: '{"side": "back"}' });
  t.is(response.status, 200, response.text);
  t.is(response.body.status, 'success');
  t.is(response.body.artifact_type, 'doc_back');
  t.regex(response.body.path, /^artifacts\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f]{64}$/);
  const row = await app.database.knex('verification_artifacts').where({ id: response.body.artifact_id }).first();
  t.is(Number(row.size), file.bytes.length);
  t.is(row.content_type, 'image/jpeg');
  t.deepEqual(row.extra_data, { side: 'back' });
  t.deepEqual(await app.context.files.read(row.path), file.bytes);
  const stored = await app.database.knex('verification_sessions').where({ id: session.session_id }).first();
  t.deepEqual(stored.succeeded_artifact_types, ['doc_back'], 'a type with nothing to verify completes on upload');
  t.deepEqual(stored.pending_artifact_types, ['doc_front', 'selfie']);

  const ignored = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'doc_front', file, extra_data: '{not json' });
  t.is(ignored.status, 200);
  t.is((await app.database.knex('verification_artifacts').where({ id: ignored.body.artifact_id }).first()).extra_data, null);
});

test('take_snapshot stores an image as a snapshot', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'up-snap' });
  const response = await upload(app, SNAPSHOT, { token: session.endpoint_token, file: { bytes: await image('png'), name: 'frame.png', type: 'image/png' } });
  t.is(response.status, 200, response.text);
  t.is(response.body.status, 'success');
  t.truthy(response.body.artifact_id);
  t.is((await app.database.knex('verification_artifacts').where({ id: response.body.artifact_id }).first()).artifact_type, 'snapshot');
  const video = await upload(app, SNAPSHOT, { token: session.endpoint_token, file: { bytes: mp4(), name: 'clip.mp4', type: 'video/mp4' } });
  t.is(video.status, 415);
});

/** The smallest bytes file-type reads as video/mp4: an ftyp box. */
function mp4(): Buffer {
  return Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypmp42'), Buffer.from([0, 0, 0, 0]), Buffer.from('mp42isom'), Buffer.alloc(64)]);
}

test('every KYC error row of the spec, for both upload endpoints', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'up-errors' });
  const file = await jpegFile();
  const before = await countRows(app.database.knex, 'verification_artifacts', { session_id: session.session_id });
  const expect = async (path: string, parts: Parameters<typeof upload>[2], status: number, reason: string) => {
    const response = await upload(app, path, parts);
    t.is(response.status, status, `${reason}: ${response.text}`);
    t.is(response.body.status, false);
    t.is(response.body.data.reason, reason);
    t.is(typeof response.body.message, 'string');
  };
  for (const path of [UPLOAD, SNAPSHOT]) {
    const artifact = path === UPLOAD ? { artifact_type: 'doc_front' } : {};
    await expect(path, { ...artifact, file }, 401, 'token_missing');
    await expect(path, { token: 'not-a-token', ...artifact, file }, 401, 'token_invalid');
    const expired = await app.context.tokens.issue('session', session.session_id, -10);
    await expect(path, { token: expired.token, ...artifact, file }, 401, 'token_expired');
    const agent = await app.context.tokens.issue('agent', session.session_id, 600);
    await expect(path, { token: agent.token, ...artifact, file }, 403, 'token_wrong_audience');
    const ghost = await app.context.tokens.issue('session', '00000000-0000-0000-0000-000000000000', 600);
    await expect(path, { token: ghost.token, ...artifact, file }, 404, 'session_not_found');
    await expect(path, { token: session.endpoint_token, ...artifact }, 400, 'file_missing');
    await expect(path, { token: session.endpoint_token, ...artifact, file: { bytes: Buffer.alloc(0), name: 'empty.jpg', type: 'image/jpeg' } }, 400, 'file_empty');
    await expect(path, { token: session.endpoint_token, ...artifact, file: { bytes: Buffer.from('just some text, not a picture'), name: 'fake.jpg', type: 'image/jpeg' } }, 415, 'file_type_not_allowed');
  }
  await expect(UPLOAD, { token: session.endpoint_token, file }, 400, 'artifact_type_missing');
  await expect(UPLOAD, { token: session.endpoint_token, artifact_type: 'passport_photo', file }, 400, 'artifact_type_invalid');
  t.is(await countRows(app.database.knex, 'verification_artifacts', { session_id: session.session_id }), before, 'nothing stored for refused uploads');

  const notMultipart = await app.request('POST', UPLOAD, { json: { token: session.endpoint_token } });
  t.is(notMultipart.status, 415);

  const closed = await openSession(app, token, { customer_ref: 'up-closed' });
  const { token: agentToken } = await app.context.tokens.issue('agent', closed.session_id, 600);
  await app.request('POST', '/api/document/end-kyc-session/', { json: { token: agentToken, status: 'completed' } });
  await expect(UPLOAD, { token: closed.endpoint_token, artifact_type: 'doc_front', file }, 409, 'session_closed');
  await expect(SNAPSHOT, { token: closed.endpoint_token, file }, 409, 'session_closed');
});

test('a 26 MB file is refused with 413 while streaming and the server keeps serving', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'up-big' });
  const big = Buffer.concat([await image('jpeg'), Buffer.alloc(26 * 1024 * 1024)]);
  const response = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'doc_front', file: { bytes: big, name: 'big.jpg', type: 'image/jpeg' } });
  t.is(response.status, 413);
  t.is(response.body.data.reason, 'file_too_large');
  t.is((await app.request('GET', '/healthz')).status, 200);
  const ok = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'doc_front', file: await jpegFile() });
  t.is(ok.status, 200);
});

test('a malformed multipart body is a 400, not a 500', async (t) => {
  const response = await fetch(`${app.url}${UPLOAD}`, {
    method: 'POST',
    headers: { 'content-type': 'multipart/form-data; boundary=XYZ' },
    body: '--XYZ\r\nContent-Disposition: form-data; name="token"\r\n\r\nabc\r\n--XYZ\r\nContent-Disposition: form-da',
  });
  t.true(response.status === 400 || response.status === 401, String(response.status));
  const noBoundary = await fetch(`${app.url}${UPLOAD}`, { method: 'POST', headers: { 'content-type': 'multipart/form-data' }, body: 'x' });
  t.is(noBoundary.status, 400);
});

test('a decompression-bomb PNG is accepted as an image at upload (its verification fails, see the pipeline tests)', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'up-bomb' });
  const bomb = await sharp({ create: { width: 12000, height: 12000, channels: 3, background: '#000' } }).png({ compressionLevel: 9 }).toBuffer();
  t.true(bomb.length < 1024 * 1024);
  const response = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'doc_front', file: { bytes: bomb, name: 'bomb.png', type: 'image/png' } });
  t.is(response.status, 200);
});
