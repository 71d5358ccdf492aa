/**
 * liveness_video with WARDEN_LIVENESS=on, through upload, queue, ffmpeg and the vision pool: the
 * result keeps the spec's format (liveness_result, data null), with code fail and a reason when the
 * check fails. Needs ffmpeg (skipped, and said so, without it); with liveness off the pipeline test
 * covers the plain success.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { twoFaces } from '../helpers/images.ts';
import { defineTestFlow, openSession, upload, waitFor } from '../helpers/kyc.ts';
import { findFfmpeg } from '../../src/vision/video.ts';
import { loadPortrait, PORTRAITS, presentationFrame, seededRandom, type Presentation } from '../../models/liveness/synthetic.ts';

const UPLOAD = '/api/document/upload_document/';
const ffmpeg = findFfmpeg(process.env.WARDEN_FFMPEG);
const withFfmpeg = ffmpeg ? test.serial : test.serial.skip;
if (!ffmpeg) console.log('ffmpeg is not on the PATH: the liveness API tests are skipped');

let app: TestApp;
let token: string;
let dir: string;
test.before(async () => {
  if (!ffmpeg) return;
  app = await startTestApp({ WARDEN_LIVENESS: 'on', WARDEN_FFMPEG: ffmpeg });
  token = await app.merchantToken();
  await defineTestFlow(app.context, 'live', ['selfie', 'liveness_video'], { default: true });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-liveness-api-'));
});
test.after.always(async () => {
  await app?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** An MP4 of PNG frames, two a second. */
function encode(name: string, frames: Buffer[]): Buffer {
  const folder = path.join(dir, name);
  fs.mkdirSync(folder);
  frames.forEach((frame, index) => fs.writeFileSync(path.join(folder, `${index}.png`), frame));
  const video = path.join(folder, 'v.mp4');
  execFileSync(ffmpeg!, ['-v', 'error', '-framerate', '2', '-i', path.join(folder, '%d.png'), '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-vf', 'pad=ceil(iw/2)*2:ceil(ih/2)*2', video]);
  return fs.readFileSync(video);
}

async function presented(kind: Presentation, seed: number): Promise<Buffer[]> {
  const portrait = await loadPortrait(PORTRAITS[1]);
  const frames = [];
  for (let f = 0; f < 8; f++) {
    const frame = await presentationFrame(portrait, kind, seededRandom(seed + f));
    frames.push(await sharp(frame.data, { raw: { width: frame.width, height: frame.height, channels: 3 } }).png().toBuffer());
  }
  return frames;
}

async function livenessResult(customerRef: string, video: Buffer) {
  const session = await openSession(app, token, { customer_ref: customerRef });
  const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'liveness_video', file: { bytes: video, name: 'clip.mp4', type: 'video/mp4' } });
  if (uploaded.status !== 200) throw new Error(uploaded.text);
  const row = await waitFor(async () => (await app.database.knex('verification_results').where({ artifact_id: uploaded.body.artifact_id }).first()) ?? undefined, 60_000);
  return row as { type: string; code: string; message: string; data: unknown; details: Record<string, unknown> };
}

withFfmpeg('a live face: success, with the frames and the attack score', async (t) => {
  const result = await livenessResult('live-ok', encode('live', await presented('bona_fide', 8_000_000)));
  t.is(result.type, 'liveness_result');
  t.is(result.code, 'success', result.message);
  t.is(result.data, null);
  t.is(result.details.frames, 8);
  t.true((result.details.attack_score as number) < (result.details.threshold as number));
});

withFfmpeg('a portrait shown on a screen: fail, presentation_attack', async (t) => {
  const result = await livenessResult('live-screen', encode('screen', await presented('screen', 8_100_000)));
  t.is(result.code, 'fail', result.message);
  t.is(result.details.reason, 'presentation_attack');
  t.regex(result.message, /photograph or a screen/);
});

withFfmpeg('no face in the video: fail, no_face', async (t) => {
  const grey = await sharp({ create: { width: 320, height: 240, channels: 3, background: '#7a8088' } }).png().toBuffer();
  const result = await livenessResult('live-empty', encode('empty', [grey, grey, grey, grey]));
  t.is(result.code, 'fail');
  t.is(result.details.reason, 'no_face');
  t.is(result.details.frames, 4);
});

withFfmpeg('two people in the video: fail, several_faces', async (t) => {
  const face = fs.readFileSync(path.resolve(import.meta.dirname, '../fixtures/faces/astronaut.jpg'));
  const frame = await sharp(await twoFaces(face)).png().toBuffer();
  const result = await livenessResult('live-two', encode('two', [frame, frame, frame, frame]));
  t.is(result.code, 'fail', result.message);
  t.is(result.details.reason, 'several_faces');
});

withFfmpeg('a file that only looks like a video: fail, video_unreadable', async (t) => {
  const fake = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypmp42'), Buffer.from([0, 0, 0, 0]), Buffer.from('mp42isom'), Buffer.alloc(64)]);
  const result = await livenessResult('live-fake', fake);
  t.is(result.code, 'fail');
  t.is(result.details.reason, 'video_unreadable');
  t.regex(result.message, /could not be decoded/);
});
