import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type Router from '@koa/router';
import type { AppContext } from '../../context.ts';
import { registerUpsertRoutes } from '../records/routes.ts';
import { customerFields } from './schemas.ts';
import { upsertCustomers } from './service.ts';

/** POST /api/customer/upsert/ (integration spec). */
export function registerCustomerRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry): void {
  registerUpsertRoutes(router, app, docs, [
    {
      path: '/api/customer/upsert/',
      label: 'customer',
      fields: customerFields,
      resultFields: ['customer_ref', 'id', 'action', 'score', 'decision', 'sanction_score', 'sanction_topic', 'ip_address_score', 'email_risk_score', 'warnings'],
      handle: (app, records, state) => upsertCustomers(app, records, { type: 'merchant', id: state.credential!.id }),
    },
  ]);
}
