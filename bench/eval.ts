/**
 * `npm run eval`: the vision pipeline against the real specimens in ../shared/data when present,
 * printed and written to bench/RESULTS.md.
 */
import { evalMrz } from './eval-mrz.ts';
import { writeSection } from './results.ts';

const report = await evalMrz();
console.log(report);
await writeSection('eval-mrz', report);
process.exit(0);
