/**
 * `npm run eval [-- PART...]`: the vision evaluations, printed and written to bench/RESULTS.md.
 * Parts (all by default, in this order):
 *   mrz     the MRZ reader on the project's synthetic set, the shipped fixtures and, when present,
 *           the real specimens of ../shared/data/mrz (section eval-mrz)
 *   vision  document fronts and faces through the vision pool on ../shared/data (eval-vision)
 *   liveness  presentation-attack detection on the project's synthetic set (eval-liveness)
 *   faces   face verification on the project's own evaluation set (eval-faces; the longest part)
 */
import { evalFaces } from './eval-faces.ts';
import { evalLiveness } from './eval-liveness.ts';
import { evalMrz } from './eval-mrz.ts';
import { evalVision } from './eval-vision.ts';
import { writeSection } from './results.ts';

const PARTS: Record<string, { section: string; run: () => Promise<string> }> = {
  mrz: { section: 'eval-mrz', run: () => evalMrz() },
  vision: { section: 'eval-vision', run: evalVision },
  liveness: { section: 'eval-liveness', run: evalLiveness },
  faces: { section: 'eval-faces', run: evalFaces },
};

const selected = process.argv.slice(2);
const unknown = selected.filter((name) => !PARTS[name]);
if (unknown.length) {
  console.error(`Unknown part ${unknown.join(', ')}; known: ${Object.keys(PARTS).join(', ')}`);
  process.exit(2);
}
for (const name of selected.length ? selected : Object.keys(PARTS)) {
  const part = PARTS[name]!;
  console.log(`\n# ${name}`);
  const markdown = await part.run();
  console.log(markdown);
  await writeSection(part.section, markdown);
}
process.exit(0);
