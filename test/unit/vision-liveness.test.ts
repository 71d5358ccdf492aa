/**
 * Passive liveness: the verdict rules, the texture model on frames it was not trained on, the frame
 * mosaic, ffmpeg sampling (skipped, and said so, where ffmpeg is not installed) and the switch.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { detectFaces } from '../../src/vision/faces.ts';
import { attackProbability, CROP, faceCrop, livenessVerdict, loadLivenessModel, readLiveness, textureFeatures } from '../../src/vision/liveness.ts';
import { findFfmpeg, MOSAIC, sampleFrames, VideoError } from '../../src/vision/video.ts';
import { loadPortrait, PORTRAITS, presentationFrame, seededRandom, type Presentation } from '../../models/liveness/synthetic.ts';

const model = loadLivenessModel();
const ffmpeg = findFfmpeg(process.env.WARDEN_FFMPEG);
const withFfmpeg = ffmpeg ? test : test.skip;
if (!ffmpeg) console.log('ffmpeg is not on the PATH: the video tests are skipped');

/** Eight frames of a portrait presented one way (seeds outside training and evaluation). */
async function frames(kind: Presentation, seed: number) {
  const portrait = await loadPortrait(PORTRAITS[1]);
  return Promise.all(Array.from({ length: 8 }, (_, f) => presentationFrame(portrait, kind, seededRandom(seed + f))));
}

async function mosaic(cells: { width: number; height: number; data: Uint8Array }[]): Promise<Buffer> {
  const { cell, columns, rows } = MOSAIC;
  const composites = await Promise.all(
    cells.map(async (frame, index) => ({
      input: await sharp(frame.data, { raw: { width: frame.width, height: frame.height, channels: 3 } }).png().toBuffer(),
      left: (index % columns) * cell,
      top: Math.floor(index / columns) * cell,
    })),
  );
  return sharp({ create: { width: cell * columns, height: cell * rows, channels: 3, background: '#000' } }).composite(composites).png().toBuffer();
}

test('verdict: no_face when under half the frames show one, else the median against the threshold', (t) => {
  t.is(livenessVerdict(8, [], 0.5), 'no_face');
  t.is(livenessVerdict(8, [0.1, 0.1, 0.1], 0.5), 'no_face');
  t.is(livenessVerdict(8, [0.1, 0.9, 0.2, 0.3], 0.5), 'live');
  t.is(livenessVerdict(8, [0.6, 0.9, 0.2, 0.7], 0.5), 'attack');
  t.is(livenessVerdict(3, [0.5, 0.5], 0.5), 'attack', 'the threshold itself fails');
});

test('texture measures need the crop size they were trained on', (t) => {
  t.throws(() => textureFeatures({ width: 32, height: 32, channels: 3, data: new Uint8Array(32 * 32 * 3) }), { message: /64x64 RGB/ });
  const flat = textureFeatures({ width: CROP, height: CROP, channels: 3, data: new Uint8Array(CROP * CROP * 3).fill(128) });
  t.true(flat.every(Number.isFinite), 'a flat crop gives finite measures');
});

for (const [kind, want] of [['bona_fide', 'live'], ['screen', 'attack'], ['print', 'attack']] as const) {
  test(`a ${kind} video (seeds never trained on) is judged ${want}`, async (t) => {
    const shown = await frames(kind, 7_000_000);
    const scores: number[] = [];
    for (const frame of shown) {
      const face = (await detectFaces(frame))[0];
      if (face) scores.push(attackProbability(model, textureFeatures(faceCrop(frame, face.box))));
    }
    t.log(kind, scores.map((score) => score.toFixed(2)).join(' '));
    t.is(livenessVerdict(shown.length, scores, model.threshold), want);
  });
}

test('the mosaic: blank cells are not frames; frames without a face count as such', async (t) => {
  const live = await frames('bona_fide', 7_100_000);
  const result = await readLiveness(await mosaic(live.slice(0, 5)), model);
  t.is(result.frames, 5);
  t.true(result.frames_with_face >= 4, `${result.frames_with_face} faces`);
  t.is(result.frame_scores.length, result.frames_with_face);
  const grey = { width: MOSAIC.cell, height: MOSAIC.cell, data: new Uint8Array(MOSAIC.cell * MOSAIC.cell * 3).fill(120) };
  const empty = await readLiveness(await mosaic([grey, grey, grey]), model);
  t.is(empty.frames, 3);
  t.is(empty.frames_with_face, 0);
  t.is(empty.attack_score, null);
});

withFfmpeg('ffmpeg samples a video into the mosaic; what it cannot decode is a VideoError', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-liveness-test-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const live = await frames('bona_fide', 7_200_000);
  for (const [index, frame] of live.slice(0, 3).entries()) {
    await sharp(frame.data, { raw: { width: frame.width, height: frame.height, channels: 3 } }).png().toFile(path.join(dir, `${index}.png`));
  }
  execFileSync(ffmpeg!, ['-v', 'error', '-framerate', '2', '-i', path.join(dir, '%d.png'), '-c:v', 'libx264', '-pix_fmt', 'yuv420p', path.join(dir, 'v.mp4')]);
  const sampled = await sampleFrames(ffmpeg!, fs.readFileSync(path.join(dir, 'v.mp4')));
  const metadata = await sharp(sampled).metadata();
  t.is(metadata.width, MOSAIC.cell * MOSAIC.columns);
  t.is(metadata.height, MOSAIC.cell * MOSAIC.rows);
  const result = await readLiveness(sampled, model);
  t.is(result.frames, 3, 'a 1.5 s video at 2 frames a second');
  await t.throwsAsync(sampleFrames(ffmpeg!, Buffer.from('ftypmp42 not a video')), { instanceOf: VideoError, message: /could not be decoded/ });
});

test('WARDEN_LIVENESS: off by default; on needs an ffmpeg', (t) => {
  t.false(loadConfig({}).liveness.enabled);
  t.throws(() => loadConfig({ WARDEN_LIVENESS: 'on', WARDEN_FFMPEG: '/nonexistent/ffmpeg' }), { instanceOf: ConfigError, message: /WARDEN_LIVENESS: on needs ffmpeg.*WARDEN_FFMPEG/ });
  t.throws(() => loadConfig({ WARDEN_LIVENESS: 'yes' }), { instanceOf: ConfigError, message: /WARDEN_LIVENESS/ });
  if (ffmpeg) t.deepEqual(loadConfig({ WARDEN_LIVENESS: 'on', WARDEN_FFMPEG: ffmpeg }).liveness, { enabled: true, ffmpeg });
});
