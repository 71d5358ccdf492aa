/**
 * `npm run bench [name...]`: runs the named benchmarks (all by default), prints them and writes
 * each to its section of bench/RESULTS.md.
 */
import { benchBackoffice } from './backoffice.ts';
import { benchCasePage } from './case-page.ts';
import { benchDashboard } from './dashboard.ts';
import { benchExport } from './export.ts';
import { benchLiveSocket } from './live-socket.ts';
import { benchIngest } from './ingest.ts';
import { benchMobileIdentity } from './mobile-identity.ts';
import { benchAlerts } from './alerts.ts';
import { benchReplay } from './replay.ts';
import { benchSanctionsRecall } from './sanctions-recall.ts';
import { benchTokenCheck } from './token-check.ts';
import { benchSoak, benchUpsertLoad } from './upsert-load.ts';
import { benchIngestFloor, benchSingleRecord } from './single-record.ts';
import { benchVision } from './vision.ts';

const BENCHMARKS: Record<string, () => Promise<void>> = {
  'token-check': benchTokenCheck,
  ingest: benchIngest,
  'upsert-load': benchUpsertLoad,
  'single-record': benchSingleRecord,
  'ingest-floor': benchIngestFloor,
  soak: benchSoak,
  vision: benchVision,
  backoffice: benchBackoffice,
  'case-page': benchCasePage,
  'mobile-identity': benchMobileIdentity,
  'live-socket': benchLiveSocket,
  dashboard: benchDashboard,
  export: benchExport,
  replay: benchReplay,
  alerts: benchAlerts,
  'sanctions-recall': benchSanctionsRecall,
};

const selected = process.argv.slice(2);
for (const name of selected.length ? selected : Object.keys(BENCHMARKS)) {
  const benchmark = BENCHMARKS[name];
  if (!benchmark) {
    console.error(`Unknown benchmark ${name}; known: ${Object.keys(BENCHMARKS).join(', ')}`);
    process.exit(2);
  }
  console.log(`\n# ${name}`);
  await benchmark();
}
process.exit(0);
