/**
 * Face detection, alignment and embedding on the public-domain test faces (test/fixtures/faces),
 * the configurable embedding model, and the image intake's refusals shared by every reader.
 */
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { loadConfig, ConfigError } from '../../src/config.ts';
import { DEFAULT_EMBEDDER, loadEmbedderSpec } from '../../src/vision/embedder.ts';
import { alignFace, alignmentTemplate, detectFaces, faceScore, MIN_EYE_DISTANCE, readFaces, similarityTransform } from '../../src/vision/faces.ts';
import { decodeImage, ImageError } from '../../src/vision/image.ts';
import { readDocumentFront } from '../../src/vision/docfront.ts';
import { animated, bombPng, twoFaces } from '../helpers/images.ts';

const faces = path.resolve(import.meta.dirname, '../fixtures/faces');
const astronaut = fs.readFileSync(path.join(faces, 'astronaut.jpg'));
const cameraman = fs.readFileSync(path.join(faces, 'cameraman.jpg'));
const spec = loadEmbedderSpec(DEFAULT_EMBEDDER);

test('one face in the astronaut photograph, landmarks where a face has them', async (t) => {
  const image = await decodeImage(astronaut, { channels: 3, maxPixels: 1e7 });
  const found = await detectFaces(image);
  t.is(found.length, 1);
  const [face] = found;
  const { right_eye, left_eye, nose, mouth } = face!.landmarks;
  t.true(right_eye.x < left_eye.x, 'the subject\'s right eye is on the image\'s left');
  t.true(nose.y > right_eye.y && mouth.y > nose.y, 'eyes above the nose above the mouth');
  t.true(face!.box.x < right_eye.x && face!.box.x + face!.box.width > left_eye.x);
});

test('the same face after a crop, a smaller size and other light is taken for the same person; another person is not', async (t) => {
  const reference = await readFaces(astronaut, spec);
  const variant = await sharp(astronaut).extract({ left: 80, top: 0, width: 360, height: 360 }).resize(300).modulate({ brightness: 1.15 }).jpeg({ quality: 70 }).toBuffer();
  const same = await readFaces(variant, spec);
  const other = await readFaces(cameraman, spec);
  const score = (a: number[], b: number[]) => faceScore(a, b, spec.metric);
  const sameSimilarity = score(reference.embedding!, same.embedding!);
  const otherSimilarity = other.embedding ? score(reference.embedding!, other.embedding) : -1;
  t.true(sameSimilarity >= spec.threshold, `same: ${sameSimilarity}`);
  // A close-up whose face is several times the model's input is shrunk smoothly before alignment.
  const closeUp = await sharp(astronaut).extract({ left: 160, top: 50, width: 160, height: 180 }).resize(1280).jpeg().toBuffer();
  const close = await readFaces(closeUp, spec);
  t.true(close.faces[0]!.box[2] > 650, `a large face: ${close.faces[0]!.box[2]}`);
  t.true(score(reference.embedding!, close.embedding!) >= spec.threshold, `close-up: ${score(reference.embedding!, close.embedding!)}`);
  t.true(otherSimilarity < spec.threshold, `other: ${otherSimilarity}`);
  const hopper = await readFaces(fs.readFileSync(path.join(faces, 'grace-hopper.jpg')), spec);
  t.true(score(reference.embedding!, hopper.embedding!) < spec.threshold - 0.1, `another woman, well below the threshold: ${score(reference.embedding!, hopper.embedding!)}`);
  t.is(reference.embedding!.length, 128);
  // dlib's vectors are compared by Euclidean distance as the model gives them (not scaled to unit length).
  t.is(spec.metric, 'euclidean');
  t.true(Math.abs(Math.hypot(...reference.embedding!) - 1) > 0.05, 'raw vector');
});

test('dlib\'s model gets dlib\'s face chip: eyes, nose and mouth where its mean face shape puts them', async (t) => {
  t.is(spec.template, 'dlib');
  const [right, left, nose, mouth] = alignmentTemplate(spec);
  // get_face_chip_details(shape, 150, 0.25): the mean shape's unit square spans pixels 25 to 125.
  t.true(Math.abs(right!.x - 47.5) < 0.1 && Math.abs(left!.x - 100.5) < 0.1 && Math.abs(right!.y - 46.6) < 0.1, JSON.stringify([right, left]));
  t.true(Math.abs(nose!.y - 76.6) < 0.1 && Math.abs(mouth!.y - 105.4) < 0.1);
  // The former ArcFace placement put the eyes a fifth of the crop lower.
  const arcface = alignmentTemplate({ ...spec, template: 'arcface' });
  t.true(arcface[0]!.y - right!.y > 20);
  // The aligned crop of the astronaut has her eyes at the template's points: the darkest pixels of
  // each eye region are within a few pixels of them.
  const image = await decodeImage(astronaut, { channels: 3, maxPixels: 1e7 });
  const [face] = await detectFaces(image);
  const crop = alignFace(image, face!, spec);
  t.is(crop.width, 150);
  for (const eye of [right!, left!]) {
    let darkest = { value: 999, x: 0, y: 0 };
    for (let y = Math.round(eye.y) - 8; y <= eye.y + 8; y++) {
      for (let x = Math.round(eye.x) - 8; x <= eye.x + 8; x++) {
        const i = (y * 150 + x) * 3;
        const value = crop.data[i]! + crop.data[i + 1]! + crop.data[i + 2]!;
        if (value < darkest.value) darkest = { value, x, y };
      }
    }
    t.true(Math.hypot(darkest.x - eye.x, darkest.y - eye.y) < 6, `eye at ${JSON.stringify(darkest)}, template ${JSON.stringify(eye)}`);
  }
});

test('faceScore: cosine similarity, or 1 minus the Euclidean distance', (t) => {
  t.is(faceScore([1, 0], [0, 1], 'cosine'), 0);
  t.true(Math.abs(faceScore([0.3, 0.4], [0, 0], 'euclidean') - 0.5) < 1e-12);
  t.is(faceScore([1, 2], [1, 2], 'euclidean'), 1);
});

test('a face cut by the edge of a tall photograph is found (square tiles), and matched', async (t) => {
  // The astronaut at the left edge of a tall frame (654 x 2424) with an eighth of her face outside
  // it: fitted whole into the detector's square, the face is too small and cut to be found.
  const cut = await sharp(astronaut).extract({ left: 185, top: 0, width: 327, height: 512 }).resize({ width: 654 }).toBuffer();
  const tall = await sharp(cut).extend({ bottom: 1400, background: '#445' }).jpeg().toBuffer();
  const image = await decodeImage(tall, { channels: 3, maxPixels: 1e7 });
  const found = await detectFaces(image);
  t.is(found.length, 1);
  t.true(found[0]!.box.x < 0, 'the box reaches past the frame edge');
  const read = await readFaces(tall, spec);
  const reference = await readFaces(astronaut, spec);
  t.true(faceScore(reference.embedding!, read.embedding!, spec.metric) >= spec.threshold);
});

test('a face too small to compare is found but not embedded, with its eye distance', async (t) => {
  // The astronaut shrunk to 280 px in a 580 px wide frame: eyes about 24 px apart.
  const small = await sharp(await sharp(astronaut).resize(280).toBuffer()).extend({ right: 300, bottom: 300, background: '#888' }).jpeg().toBuffer();
  const read = await readFaces(small, spec);
  t.is(read.faces.length, 1);
  t.true(read.too_small);
  t.is(read.embedding, null);
  t.true(read.eye_distance! < MIN_EYE_DISTANCE, String(read.eye_distance));
  const full = await readFaces(astronaut, spec);
  t.false(full.too_small);
  t.true(full.eye_distance! >= MIN_EYE_DISTANCE);
});

test('two faces side by side: both found, largest first', async (t) => {
  const read = await readFaces(await twoFaces(astronaut), spec);
  t.is(read.faces.length, 2);
  t.true(read.faces[0]!.box[2] >= read.faces[1]!.box[2]);
});

test('no face in a picture of text', async (t) => {
  const read = await readFaces(fs.readFileSync(path.resolve(import.meta.dirname, '../fixtures/docfront/card-no-portrait.jpg')), spec);
  t.deepEqual(read.faces, []);
  t.is(read.embedding, null);
});

test('similarityTransform maps points exactly when they are a rotated, scaled, shifted copy', (t) => {
  const from = [
    { x: 0, y: 0 },
    { x: 10, y: 0 },
    { x: 5, y: 8 },
  ];
  const angle = 0.3;
  const to = from.map((p) => ({ x: 2 * (p.x * Math.cos(angle) - p.y * Math.sin(angle)) + 7, y: 2 * (p.x * Math.sin(angle) + p.y * Math.cos(angle)) - 3 }));
  const m = similarityTransform(from, to);
  from.forEach((p, i) => {
    t.true(Math.abs(m[0]! * p.x + m[1]! * p.y + m[2]! - to[i]!.x) < 1e-9);
    t.true(Math.abs(m[3]! * p.x + m[4]! * p.y + m[5]! - to[i]!.y) < 1e-9);
  });
});

test('another embedding model is chosen by configuration, with its own input size and threshold', async (t) => {
  const specPath = path.join(faces, 'pixels-test-model.json');
  const config = loadConfig({ WARDEN_FACE_MODEL: specPath });
  t.is(config.face.model.name, 'pixels-test-model');
  t.is(config.face.threshold, 0.5);
  t.is(loadConfig({ WARDEN_FACE_MODEL: specPath, WARDEN_FACE_THRESHOLD: '0.8' }).face.threshold, 0.8);
  const read = await readFaces(astronaut, config.face.model);
  t.is(read.embedding!.length, 48);
  t.is(loadConfig({}).face.model.name, 'dlib-resnet-v1');
});

test('a missing or malformed embedding model description stops the configuration with its name', (t) => {
  t.throws(() => loadConfig({ WARDEN_FACE_MODEL: '/nonexistent/model.json' }), { instanceOf: ConfigError, message: /WARDEN_FACE_MODEL/ });
  const bad = path.join(fs.mkdtempSync('/tmp/warden-face-'), 'bad.json');
  fs.writeFileSync(bad, JSON.stringify({ name: 'x', file: 'x.onnx', input_size: 112 }));
  t.throws(() => loadConfig({ WARDEN_FACE_MODEL: bad }), { instanceOf: ConfigError, message: /threshold/ });
  t.throws(() => loadConfig({ WARDEN_VISION_WORKERS: '2', WARDEN_ONNX_THREADS: '64' }), { instanceOf: ConfigError, message: /WARDEN_ONNX_THREADS/ });
  t.throws(() => loadConfig({ WARDEN_FACE_THRESHOLD: '  ' }), { instanceOf: ConfigError, message: /WARDEN_FACE_THRESHOLD/ }, 'blank is not 0');
  t.throws(() => loadConfig({ WARDEN_FACE_THRESHOLD: '1.5' }), { instanceOf: ConfigError, message: /WARDEN_FACE_THRESHOLD/ });
});

test('unusable images are refused with a reason: tiny, huge, animated, truncated, not an image', async (t) => {
  const refusal = async (image: Buffer) => (await t.throwsAsync(readFaces(image, spec), { instanceOf: ImageError }))!.reason;
  t.is(await refusal(await sharp(astronaut).resize(20).jpeg().toBuffer()), 'image_too_small');
  const strip = await sharp({ create: { width: 64, height: 20_000, channels: 3, background: '#777' } }).png().toBuffer();
  t.is(await refusal(strip), 'image_too_small', 'a strip too narrow once scaled to be read');
  t.is((await t.throwsAsync(readDocumentFront(strip), { instanceOf: ImageError }))!.reason, 'image_too_small');
  t.is(await refusal(bombPng()), 'image_too_large');
  const gif = await animated(astronaut, 'gif');
  t.is(await refusal(gif), 'image_animated');
  t.is(await refusal(await animated(astronaut, 'webp')), 'image_animated');
  t.is(await refusal(astronaut.subarray(0, astronaut.length / 2)), 'image_unreadable');
  t.is(await refusal(Buffer.from('not an image at all, just some text')), 'image_unreadable');
  t.is(await refusal(Buffer.alloc(0)), 'image_empty');
  // The same intake guards the document reader.
  t.is((await t.throwsAsync(readDocumentFront(gif), { instanceOf: ImageError }))!.reason, 'image_animated');
});

test('CMYK, 16-bit and EXIF-rotated photographs are read like ordinary ones', async (t) => {
  const reference = await readFaces(astronaut, spec);
  const cmyk = await sharp(astronaut).toColourspace('cmyk').jpeg().toBuffer();
  t.is((await sharp(cmyk).metadata()).space, 'cmyk');
  const sixteen = await sharp(astronaut).toColourspace('rgb16').png().toBuffer();
  t.is((await sharp(sixteen).metadata()).depth, 'ushort');
  // Stored sideways with an EXIF tag saying "rotate 90 degrees clockwise to view".
  const sideways = await sharp(astronaut).rotate(-90).withMetadata({ orientation: 6 }).jpeg().toBuffer();
  t.is((await sharp(sideways).metadata()).orientation, 6);
  for (const [name, image] of [['cmyk', cmyk], ['16-bit', sixteen], ['exif', sideways]] as const) {
    const read = await readFaces(image, spec);
    t.is(read.faces.length, 1, name);
    t.true(faceScore(reference.embedding!, read.embedding!, spec.metric) > 0.8, name);
  }
});
