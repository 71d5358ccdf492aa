/**
 * What a fuzz run needs on a fresh app: the OpenAPI document as the service serves it, events,
 * a flow, customers and their transactions, open sessions with their session and agent tokens, a
 * few real images, and the staff side (test/fuzz/staff.ts): identities with live credentials and
 * the registry's models.
 */
import sharp from 'sharp';
import type { TestApp } from '../helpers/app.ts';
import { defineEvents } from '../helpers/fixtures.ts';
import { defineTestFlow, openSession } from '../helpers/kyc.ts';
import type { FuzzTarget, FuzzTokens, OpenApiDocument } from './openapi-fuzz.ts';
import { prepareStaffFuzz } from './staff.ts';

export async function prepareFuzzTarget(app: TestApp) {
  const credential = await app.credential({ name: 'Fuzz Merchant' });
  const issued = await app.request('POST', '/api/merchant/auth/token/', { json: { api_key: credential.apiKey, api_secret: credential.apiSecret } });
  const merchant = issued.body.data.access_token as string;
  await defineEvents(app.context, [
    ['deposit', 1],
    ['login', 2],
  ]);
  await defineTestFlow(app.context, 'fuzz', ['doc_front', 'doc_back', 'selfie', 'liveness_video'], { default: true });
  const session: string[] = [];
  const agent: string[] = [];
  for (const ref of ['fuzz-1', 'fuzz-2', 'fuzz-3', 'fuzz-missing']) {
    if (ref !== 'fuzz-missing') {
      await app.request('POST', '/api/customer/upsert/', { token: merchant, json: { customer_ref: ref, migration: true } });
      await app.request('POST', '/api/transaction/financial/upsert/', {
        token: merchant,
        json: { customer_ref: ref, transaction_ref: `${ref}-t`, event_slug: 'deposit', amount: 10, currency: 'EUR', io_type: 0, event_date: new Date().toISOString() },
      });
    }
    const opened = await openSession(app, merchant, { customer_ref: ref });
    session.push(opened.endpoint_token);
    agent.push((await app.context.tokens.issue('agent', opened.session_id, 3600)).token);
  }
  const tokens: FuzzTokens = { merchant, session, agent };
  const document = (await app.request('GET', '/api/openapi.json')).body as OpenApiDocument;
  const files = await Promise.all([
    sharp({ create: { width: 16, height: 16, channels: 3, background: '#357' } }).jpeg().toBuffer(),
    sharp({ create: { width: 16, height: 16, channels: 4, background: '#abc' } }).png().toBuffer(),
  ]).then((buffers) => buffers.map((buffer) => new Uint8Array(buffer)));
  // The integration side's own rows: deactivating its credential or dropping its events would blind it for good.
  const staff = await prepareStaffFuzz(app, { 'merchant.credential': [credential.id], 'engine.event': ['deposit', 'login'], 'document.flow': ['fuzz'] });
  const target: FuzzTarget = { tokens, files, staff: staff.target };
  return { document, target, credentials: staff.credentials, repairs: staff.repairs };
}
