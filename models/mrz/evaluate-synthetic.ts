/**
 * End-to-end accuracy of the MRZ reader on held-out synthetic photographs (seeds disjoint from the
 * training renderer's and the fixtures'), for models/mrz/CARD.md. Needs fonts-ocr-b.
 *
 *   node --import tsx models/mrz/evaluate-synthetic.ts [DOCUMENTS_PER_FORMAT] [typical|hard]
 *
 * Conditions are drawn per document: tilt up to 15 degrees (a fifth upside down), keystone up to
 * 0.1, shade up to 0.5, and the page always wholly inside a 1000 x 750 frame. "typical": the page
 * spans 55 to 95 % of the frame's width, blur sigma 0.3 to 1.5 px, noise up to 12 grey levels, JPEG
 * quality 45 to 90. "hard": 35 to 60 % (MRZ capitals 6 to 11 px tall), blur 0.8 to 2.2 px, noise up
 * to 20, quality 25 to 70.
 */
import type { MrzFormat } from '../../src/modules/kyc/mrz/decode.ts';
import { readMrz } from '../../src/modules/kyc/mrz/read.ts';
import { seededRandom } from './render-training-data.ts';
import { photograph, randomDocument, renderPage } from './synthetic-document.ts';

const FORMATS: MrzFormat[] = ['TD3', 'TD2', 'TD1', 'MRVA', 'MRVB'];

/** The largest coverage that keeps the whole tilted page (keystone included) inside the frame. */
function fullyInFrame(aspect: number, angle: number, width: number, height: number): number {
  const cos = Math.abs(Math.cos((angle * Math.PI) / 180));
  const sin = Math.abs(Math.sin((angle * Math.PI) / 180));
  return 0.92 * Math.min(1 / (cos + aspect * sin), height / (width * (sin + aspect * cos)));
}

async function main(): Promise<void> {
  const perFormat = Number(process.argv[2] ?? '40');
  const hard = process.argv[3] === 'hard';
  const profile = hard
    ? { coverage: [0.35, 0.6], blur: [0.8, 2.2], noise: 20, quality: [25, 70] }
    : { coverage: [0.55, 0.95], blur: [0.3, 1.5], noise: 12, quality: [45, 90] };
  const between = (random: () => number, [low, high]: number[]) => low! + (high! - low!) * random();
  console.log('| format | documents | found | valid check digits | lines exact | valid but wrong | median ms |');
  console.log('|---|---|---|---|---|---|---|');
  const failures: string[] = [];
  for (const [formatIndex, format] of FORMATS.entries()) {
    let found = 0;
    let valid = 0;
    let exact = 0;
    let validButWrong = 0;
    const times: number[] = [];
    for (let index = 0; index < perFormat; index++) {
      const random = seededRandom(900_000 + formatIndex * 10_000 + index);
      const document = randomDocument(random, format);
      const page = renderPage(document, random, 8);
      const upsideDown = random() < 0.2;
      const angle = (random() * 2 - 1) * 15 + (upsideDown ? 180 : 0);
      const options = {
        width: 1000,
        height: 750,
        coverage: Math.min(between(random, profile.coverage), fullyInFrame(page.height / page.width, angle, 1000, 750)),
        angle,
        perspective: 0.1 * random(),
        shadow: 0.5 * random(),
        blur: between(random, profile.blur),
        noise: profile.noise * random(),
        quality: Math.round(between(random, profile.quality)),
      };
      const image = await photograph(page, random, options);
      const result = await readMrz(image);
      times.push(result.timings.total_ms);
      const same = result.lines.join('\n') === document.lines.join('\n');
      if (result.found) found++;
      if (result.valid) valid++;
      if (same) exact++;
      if (result.valid && !same) validButWrong++;
      if (!same && result.found) {
        const conditions = `angle ${options.angle.toFixed(1)}, coverage ${options.coverage.toFixed(2)}, blur ${options.blur.toFixed(2)}, noise ${options.noise.toFixed(1)}, q ${options.quality}`;
        failures.push(`${format} #${index} (${conditions}): ${result.valid ? 'VALID ' : ''}${result.lines.join(' / ')} (expected ${document.lines.join(' / ')})`);
      }
    }
    times.sort((a, b) => a - b);
    const share = (count: number) => `${count}/${perFormat}`;
    console.log(`| ${format} | ${perFormat} | ${share(found)} | ${share(valid)} | ${share(exact)} | ${validButWrong} | ${times[Math.floor(times.length / 2)]!.toFixed(0)} |`);
  }
  if (failures.length) console.log(`\nRead, but not exactly:\n${failures.map((line) => `- ${line}`).join('\n')}`);
}

await main();
