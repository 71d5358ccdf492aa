import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type Router from '@koa/router';
import type { AppContext } from '../../context.ts';
import { registerUpsertRoutes } from '../records/routes.ts';
import { FINANCIAL, NON_FINANCIAL, upsertTransactions } from './service.ts';

const RESULT_FIELDS = ['transaction_ref', 'id', 'action', 'score', 'decision', 'rule_check', 'log_id', 'warnings'];

/** POST /api/transaction/financial/upsert/ and /api/transaction/non-financial/upsert/ (integration spec). */
export function registerTransactionRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry): void {
  registerUpsertRoutes(router, app, docs, [
    {
      path: '/api/transaction/financial/upsert/',
      label: 'financial',
      fields: FINANCIAL.fields,
      resultFields: RESULT_FIELDS,
      handle: (app, records, state) => upsertTransactions(app, FINANCIAL, records, { type: 'merchant', id: state.credential!.id }),
    },
    {
      path: '/api/transaction/non-financial/upsert/',
      label: 'non-financial',
      fields: NON_FINANCIAL.fields,
      resultFields: RESULT_FIELDS,
      handle: (app, records, state) => upsertTransactions(app, NON_FINANCIAL, records, { type: 'merchant', id: state.credential!.id }),
    },
  ]);
}
