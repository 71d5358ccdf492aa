/**
 * `npm run eval`: the vision pipeline against the real specimens in ../shared/data when present,
 * printed and written to bench/RESULTS.md (sections eval-mrz and eval-vision).
 */
import { evalMrz } from './eval-mrz.ts';
import { evalVision } from './eval-vision.ts';
import { writeSection } from './results.ts';

const mrz = await evalMrz();
console.log(mrz);
await writeSection('eval-mrz', mrz);
const vision = await evalVision();
console.log(vision);
await writeSection('eval-vision', vision);
process.exit(0);
