import type { Knex } from 'knex';
import * as foundation from './20261122_0001_foundation.ts';
import * as ingestion from './20261122_0002_ingestion.ts';
import * as sanctions from './20261122_0003_sanctions.ts';
import * as kyc from './20261122_0004_kyc.ts';
import * as staff from './20261123_0005_staff.ts';
import * as backoffice from './20261123_0010_backoffice.ts';
import * as hotpath from './20261123_0007_hotpath.ts';
import * as staffExtra from './20261123_0006_staff_extra.ts';
import * as backofficeIndexes from './20261123_0012_backoffice_indexes.ts';
import * as casework from './20261123_0011_casework.ts';
import * as credentialTokenEpoch from './20261123_0016_credential_token_epoch.ts';
import * as csca from './20261123_0008_csca.ts';
import * as live from './20261123_0013_live.ts';
import * as ai from './20261123_0014_ai.ts';
import * as aiDelegationState from './20261124_0017_ai_delegation_state.ts';
import * as hotpathWrite from './20261127_0018_hotpath_write.ts';
import * as alertWrite from './20261127_0019_alert_write.ts';
import * as ruleVersionSets from './20261127_0020_rule_version_sets.ts';
import * as caseWrite from './20261127_0021_case_write.ts';
import * as staffAccessNotify from './20261128_0022_staff_access_notify.ts';
import * as screeningHits from './20261128_0023_screening_hits.ts';
import * as caseWorkbench from './20261128_0024_case_workbench.ts';
import * as nonFinancialCounterparty from './20261128_0025_non_financial_counterparty.ts';
import * as listIndexes from './20261129_0026_list_indexes.ts';
import * as realtimeSpill from './20261129_0027_realtime_spill.ts';
import * as videoCall from './20261129_0028_video_call.ts';

type Migration = { up(knex: Knex): Promise<void>; down(knex: Knex): Promise<void> };

/** Every migration in the order it runs. Add new ones at the end. */
const migrations: [string, Migration][] = [
  ['20261122_0001_foundation', foundation],
  ['20261122_0002_ingestion', ingestion],
  ['20261122_0003_sanctions', sanctions],
  ['20261122_0004_kyc', kyc],
  ['20261123_0005_staff', staff],
  ['20261123_0010_backoffice', backoffice],
  ['20261123_0007_hotpath', hotpath],
  ['20261123_0006_staff_extra', staffExtra],
  ['20261123_0012_backoffice_indexes', backofficeIndexes],
  ['20261123_0011_casework', casework],
  ['20261123_0016_credential_token_epoch', credentialTokenEpoch],
  ['20261123_0013_live', live],
  ['20261123_0008_csca', csca],
  ['20261123_0014_ai', ai],
  ['20261124_0017_ai_delegation_state', aiDelegationState],
  ['20261127_0018_hotpath_write', hotpathWrite],
  ['20261127_0019_alert_write', alertWrite],
  ['20261127_0020_rule_version_sets', ruleVersionSets],
  ['20261127_0021_case_write', caseWrite],
  ['20261128_0022_staff_access_notify', staffAccessNotify],
  ['20261128_0023_screening_hits', screeningHits],
  ['20261128_0024_case_workbench', caseWorkbench],
  ['20261128_0025_non_financial_counterparty', nonFinancialCounterparty],
  ['20261129_0026_list_indexes', listIndexes],
  ['20261129_0027_realtime_spill', realtimeSpill],
  ['20261129_0028_video_call', videoCall],
];

export const migrationSource: Knex.MigrationSource<[string, Migration]> = {
  getMigrations: async () => migrations,
  getMigrationName: ([name]) => name,
  getMigration: async ([, migration]) => migration,
};
