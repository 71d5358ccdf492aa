/**
 * doc_front and selfie through the pipeline: upload, vision pool, stored result, websocket message.
 * Images: the rendered ID card (test/fixtures/docfront) and the public-domain faces (test/fixtures/faces).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineTestFlow, openSession, registeredClient, upload, waitFor } from '../helpers/kyc.ts';
import { verifyArtifact } from '../../src/modules/kyc/pipeline.ts';
import { animated, bombPng, twoFaces } from '../helpers/images.ts';

const UPLOAD = '/api/document/upload_document/';
const fixtures = path.resolve(import.meta.dirname, '../fixtures');
const read = (name: string) => fs.readFile(path.join(fixtures, name));

let app: TestApp;
let token: string;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineTestFlow(app.context, 'id-card', ['doc_front', 'selfie'], { default: true });
  await defineTestFlow(app.context, 'selfie-only', ['selfie']);
});
test.after.always(async () => {
  await app?.close();
});

async function result(artifactId: string) {
  return waitFor(async () => (await app.database.knex('verification_results').where({ artifact_id: artifactId }).first()) ?? undefined, 90_000);
}

async function send(sessionToken: string, artifactType: string, bytes: Buffer, name = 'image.jpg', type = 'image/jpeg') {
  const uploaded = await upload(app, UPLOAD, { token: sessionToken, artifact_type: artifactType, file: { bytes, name, type } });
  if (uploaded.status !== 200) throw new Error(uploaded.text);
  return result(uploaded.body.artifact_id as string);
}

async function customer(ref: string, fields: Record<string, unknown>) {
  const response = await app.request('POST', '/api/customer/upsert/', { token, json: { customer_ref: ref, migration: true, ...fields } });
  if (response.status !== 200) throw new Error(response.text);
}

/** An artifact row with its file, written without a queued job, so a test can run the verifier itself. */
async function unqueuedArtifact(sessionId: string, artifactType: string, bytes: Buffer): Promise<string> {
  const key = await app.context.files.putBuffer(bytes);
  const id = crypto.randomUUID();
  await app.database.knex('verification_artifacts').insert({ id, session_id: sessionId, artifact_type: artifactType, content_type: 'image/jpeg', size: bytes.length, sha256: key.split('/').at(-1), path: key });
  return id;
}

const HOLDER = { first_name: 'María Elena', last_name: 'Hernández', birth_date: '1985-03-03', nationality: 'ES', gender: 'female', passport_number: 'X4K92L817' };

test('doc_front then selfie: fields read and matched, portrait kept, selfie matched against it; one message each', async (t) => {
  await customer('vision-ok', HOLDER);
  const session = await openSession(app, token, { customer_ref: 'vision-ok' });
  const client = await registeredClient(app.url, session.endpoint_token);
  t.teardown(() => client.socket.close());

  const front = await send(session.endpoint_token, 'doc_front', await read('docfront/card-photo.jpg'));
  t.is(front.type, 'docfront_verification_result');
  t.is(front.code, 'success', front.message);
  t.true(front.data.ocr_read);
  t.true(front.data.face_found);
  t.deepEqual(front.data.mismatched_fields, []);
  t.is(front.data.fields.document_number, 'X4K92L817');
  t.is(front.data.fields.birth_date, '1985-03-03');
  t.true(front.data.timings.total_ms > 0);
  t.is(front.details.document.method, 'outline');
  const portrait = await app.database.knex('verification_artifacts').where({ id: front.details.portrait_artifact_id }).first();
  t.is(portrait.artifact_type, 'doc_portrait');
  t.is((await sharp(await app.context.files.read(portrait.path)).metadata()).format, 'jpeg');

  const selfie = await send(session.endpoint_token, 'selfie', await read('faces/astronaut.jpg'));
  t.is(selfie.type, 'face_verification_result');
  t.is(selfie.code, 'success', selfie.message);
  t.is(selfie.data, null);
  t.is(selfie.details.reference.artifact_type, 'doc_portrait');
  t.is(selfie.details.threshold, app.context.config.face.threshold);
  t.true(selfie.details.similarity >= selfie.details.threshold);
  t.true(selfie.details.match);

  const messages = await waitFor(() => (client.messages.length >= 2 ? (client.messages as Record<string, any>[]) : undefined), 30_000);
  t.deepEqual(messages.map((message) => message.data.type).sort(), ['docfront_verification_result', 'face_verification_result']);
  const faceMessage = messages.find((message) => message.data.type === 'face_verification_result')!;
  t.is(faceMessage.data.result.data, null, 'result.data stays null for face results');
  t.regex(faceMessage.data.result.message, /similarity/);
  const stored = await app.database.knex('verification_sessions').where({ id: session.session_id }).first();
  t.deepEqual([...stored.succeeded_artifact_types].sort(), ['doc_front', 'selfie']);
  t.deepEqual(stored.pending_artifact_types, []);
});

test('doc_front disagreeing with the customer record or with the MRZ read earlier fails and names the fields', async (t) => {
  await customer('vision-other-birth', { ...HOLDER, birth_date: '1985-03-04' });
  const session = await openSession(app, token, { customer_ref: 'vision-other-birth' });
  const front = await send(session.endpoint_token, 'doc_front', await read('docfront/card-flat.jpg'));
  t.is(front.code, 'fail');
  t.deepEqual(front.data.mismatched_fields, ['birth_date']);
  t.regex(front.message, /customer record: birth_date/);

  await customer('vision-mrz', HOLDER);
  const withMrz = await openSession(app, token, { customer_ref: 'vision-mrz' });
  await app.database
    .knex('verification_sessions')
    .where({ id: withMrz.session_id })
    .update({ mrz_data: JSON.stringify({ last_name: 'HERNANDEZ', first_name: 'MARIA ELENA', document_number: 'X4K92L818', birth_date: '1985-03-03', sex: 'F' }) });
  const againstMrz = await send(withMrz.endpoint_token, 'doc_front', await read('docfront/card-flat.jpg'));
  t.is(againstMrz.code, 'fail');
  t.deepEqual(againstMrz.data.mismatched_fields, ['document_number']);
  t.deepEqual(againstMrz.details.mismatches, { customer: [], mrz: ['document_number'] });
  t.regex(againstMrz.message, /the MRZ/);
});

test('doc_front without a portrait, and a photograph that is no document, fail with the reason', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'vision-no-portrait' });
  const noPortrait = await send(session.endpoint_token, 'doc_front', await read('docfront/card-no-portrait.jpg'));
  t.is(noPortrait.code, 'fail');
  t.true(noPortrait.data.ocr_read);
  t.false(noPortrait.data.face_found);
  t.regex(noPortrait.message, /No portrait/);
  const notADocument = await send(session.endpoint_token, 'doc_front', await read('faces/cameraman.jpg'));
  t.is(notADocument.code, 'fail');
  t.false(notADocument.data.ocr_read);
  t.regex(notADocument.message, /could not be read/);
});

test('a selfie sent before the document waits for it and is verified once the document is', async (t) => {
  await customer('vision-selfie-first', HOLDER);
  const session = await openSession(app, token, { customer_ref: 'vision-selfie-first' });
  const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'selfie', file: { bytes: await read('faces/astronaut.jpg'), name: 'selfie.jpg', type: 'image/jpeg' } });
  t.is(uploaded.status, 200, uploaded.text);
  await new Promise((resolve) => setTimeout(resolve, 3000));
  t.falsy(await app.database.knex('verification_results').where({ artifact_id: uploaded.body.artifact_id }).first(), 'no result while the flow still expects a document');
  const front = await send(session.endpoint_token, 'doc_front', await read('docfront/card-flat.jpg'));
  t.is(front.code, 'success', front.message);
  const selfie = await result(uploaded.body.artifact_id);
  t.is(selfie.code, 'success', selfie.message);
  t.is(selfie.details.reference.artifact_type, 'doc_portrait');
});

test('selfie: no reference in a flow without documents, the document photo itself, another person, a face too small, no face, several faces', async (t) => {
  const alone = await openSession(app, token, { customer_ref: 'vision-selfie-alone', flow: 'selfie-only' });
  const early = await send(alone.endpoint_token, 'selfie', await read('faces/astronaut.jpg'));
  t.is(early.code, 'fail');
  t.is(early.details.reason, 'no_reference');
  t.regex(early.message, /no reference portrait/);

  await customer('vision-selfie-fails', HOLDER);
  const session = await openSession(app, token, { customer_ref: 'vision-selfie-fails' });
  t.is((await send(session.endpoint_token, 'doc_front', await read('docfront/card-flat.jpg'))).details.face !== null, true);
  const copy = await send(session.endpoint_token, 'selfie', await read('docfront/card-flat.jpg'));
  t.is(copy.code, 'fail');
  t.is(copy.details.reason, 'same_image');
  const other = await send(session.endpoint_token, 'selfie', await read('faces/grace-hopper.jpg'));
  t.is(other.code, 'fail');
  t.false(other.details.match);
  t.true(other.details.similarity < other.details.threshold);
  t.regex(other.message, /does not match/);

  // The cameraman's face is found, but his eyes are 15 px apart: too little to compare.
  const distant = await send(session.endpoint_token, 'selfie', await read('faces/cameraman.jpg'));
  t.is(distant.code, 'fail');
  t.is(distant.details.reason, 'face_too_small');
  t.regex(distant.message, /too small to compare/);

  const empty = await send(session.endpoint_token, 'selfie', await sharp({ create: { width: 400, height: 300, channels: 3, background: '#9ab' } }).jpeg().toBuffer());
  t.is(empty.code, 'fail');
  t.is(empty.details.reason, 'no_face');

  const several = await send(session.endpoint_token, 'selfie', await twoFaces(await read('faces/astronaut.jpg')));
  t.is(several.code, 'fail');
  t.is(several.details.reason, 'several_faces');
  t.regex(several.message, /2 faces/);
});

test('reference preference: the document-front portrait, then the passport page, then the chip portrait', async (t) => {
  const face = await read('faces/astronaut.jpg');
  const hopper = await read('faces/grace-hopper.jpg');
  const session = await openSession(app, token, { customer_ref: 'vision-references' });
  const selfie = async () => {
    const id = await unqueuedArtifact(session.session_id, 'selfie', face);
    await verifyArtifact(app.context, id, true);
    return app.database.knex('verification_results').where({ artifact_id: id }).first();
  };
  const nfc = await unqueuedArtifact(session.session_id, 'nfc_portrait', hopper);
  const first = await selfie();
  t.is(first.details.reference.artifact_id, nfc);
  t.is(first.code, 'fail', 'the chip portrait is another person');

  // Another photograph of the same person (a selfie that is the very document file is refused).
  const page = await unqueuedArtifact(session.session_id, 'passport_mrz_page', await sharp(face).resize(440).jpeg({ quality: 80 }).toBuffer());
  await app.database.knex('verification_results').insert({ id: crypto.randomUUID(), session_id: session.session_id, artifact_id: page, type: 'mrz_verification_result', code: 'fail', message: 'test', details: '{}', correlation_id: crypto.randomUUID() });
  const second = await selfie();
  t.is(second.details.reference.artifact_id, page);
  t.is(second.code, 'success', second.message);

  const docPortrait = await unqueuedArtifact(session.session_id, 'doc_portrait', await sharp(face).extract({ left: 120, top: 20, width: 220, height: 260 }).jpeg().toBuffer());
  const third = await selfie();
  t.is(third.details.reference.artifact_id, docPortrait);
  t.is(third.code, 'success', third.message);
});

test('a reference portrait without a usable face: the selfie fails with reference_without_face, naming what was skipped', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'vision-faceless-reference' });
  // A chip portrait with no face in it (a grey square), and one whose face is too small to compare.
  const blank = await unqueuedArtifact(session.session_id, 'nfc_portrait', await sharp({ create: { width: 300, height: 380, channels: 3, background: '#8a8f96' } }).jpeg().toBuffer());
  const distant = await unqueuedArtifact(session.session_id, 'doc_portrait', await read('faces/cameraman.jpg'));
  const selfie = await unqueuedArtifact(session.session_id, 'selfie', await read('faces/astronaut.jpg'));
  await verifyArtifact(app.context, selfie, true);
  const stored = await result(selfie);
  t.is(stored.code, 'fail');
  t.is(stored.details.reason, 'reference_without_face');
  t.regex(stored.message, /No usable face could be read from the reference/);
  t.deepEqual(
    stored.details.skipped_references.map((skipped: { artifact_id: string; reason: string }) => [skipped.artifact_id, skipped.reason]),
    [
      [distant, 'face_too_small'],
      [blank, 'no_face'],
    ],
  );
});

test('a selfie whose reference document is still being verified is retried, then waits, and is verified with the document', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'vision-pending' });
  const front = await unqueuedArtifact(session.session_id, 'doc_front', await read('docfront/card-flat.jpg'));
  const selfie = await unqueuedArtifact(session.session_id, 'selfie', await read('faces/astronaut.jpg'));
  await t.throwsAsync(verifyArtifact(app.context, selfie, false), { message: /still being verified/ });
  await verifyArtifact(app.context, selfie, true);
  t.falsy(await app.database.knex('verification_results').where({ artifact_id: selfie }).first(), 'even the last attempt stores nothing while the document is pending');
  await verifyArtifact(app.context, front, true);
  const stored = await result(selfie);
  t.is(stored.code, 'success', stored.message);
});

test('an expired document front fails', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'vision-expired' });
  const front = await unqueuedArtifact(session.session_id, 'doc_front', await read('docfront/card-flat.jpg'));
  await verifyArtifact(app.context, front, true, new Date('2031-11-15T00:00:00Z'));
  const stored = await app.database.knex('verification_results').where({ artifact_id: front }).first();
  t.is(stored.code, 'fail');
  t.is(stored.message, 'The document expired on 2031-11-14.');
});

test('bad images as doc_front and selfie each give a fail result and the worker keeps serving', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'vision-bad' });
  const face = await read('faces/astronaut.jpg');
  const cases: [string, Buffer, string, RegExp][] = [
    ['tiny.png', await sharp(face).resize(16).png().toBuffer(), 'image/png', /16x16/],
    ['animated.gif', await animated(face, 'gif'), 'image/gif', /frames/],
    ['bomb.png', bombPng(), 'image/png', /more than/],
    ['truncated.jpg', face.subarray(0, Math.floor(face.length / 3)), 'image/jpeg', /decoded/],
  ];
  for (const [name, bytes, type, message] of cases) {
    for (const artifactType of ['doc_front', 'selfie']) {
      const stored = await send(session.endpoint_token, artifactType, bytes, name, type);
      t.is(stored.code, 'fail', `${artifactType} ${name}`);
      t.regex(stored.message, message, `${artifactType} ${name}: ${stored.message}`);
      if (artifactType === 'doc_front') t.like(stored.data, { ocr_read: false, face_found: false, mismatched_fields: [] }, 'the check details are there even for an unusable image');
    }
  }
  // CMYK, 16-bit and EXIF-rotated images are no trouble: the selfie finds its one face (and no reference).
  const cmyk = await sharp(face).toColourspace('cmyk').jpeg().toBuffer();
  const sixteen = await sharp(face).toColourspace('rgb16').png().toBuffer();
  const sideways = await sharp(face).rotate(-90).withMetadata({ orientation: 6 }).jpeg().toBuffer();
  for (const [name, bytes] of [['cmyk', cmyk], ['16-bit', sixteen], ['exif', sideways]] as const) {
    const stored = await send(session.endpoint_token, 'selfie', bytes, `${name}.img`, 'image/jpeg');
    t.is(stored.details.reason, 'no_reference', name);
    t.is(stored.details.selfie_face ? 1 : 0, 1, name);
  }
  t.is((await app.request('GET', '/healthz')).status, 200);
});
