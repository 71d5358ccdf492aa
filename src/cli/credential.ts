import type { Database } from '../db/database.ts';
import {
  CredentialNotFoundError,
  InvalidInputError,
  createCredential,
  listCredentials,
  rotateSecret,
  setAllowedIps,
  setCredentialActive,
} from '../modules/merchant/service.ts';
import { MerchantCredential } from '../modules/merchant/models.ts';
import { CliError, OPERATOR, parseOptions } from './options.ts';

export async function credentialCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  try {
    switch (action) {
      case 'create': {
        const { values } = parseOptions(rest, {
          name: { type: 'string' },
          'allow-ip': { type: 'string', multiple: true },
        });
        if (!values.name) throw new CliError('credential create needs --name NAME', 2);
        const { credential, apiSecret } = await createCredential(
          knex,
          { client: values.name, allowedIps: values['allow-ip'] ?? [] },
          OPERATOR,
        );
        return {
          client: credential.client,
          api_key: credential.api_key,
          api_secret: apiSecret,
          allowed_ips: credential.allowed_ips,
          note: 'The api_secret is shown only now; store it safely.',
        };
      }
      case 'list':
        return (await listCredentials(knex)).map((credential) => credential.toPublic());
      case 'deactivate':
      case 'activate': {
        const { values } = parseOptions(rest, { 'api-key': { type: 'string' } });
        if (!values['api-key']) throw new CliError(`credential ${action} needs --api-key KEY`, 2);
        return (await setCredentialActive(knex, values['api-key'], action === 'activate', OPERATOR)).toPublic();
      }
      case 'rotate': {
        const { values } = parseOptions(rest, { 'api-key': { type: 'string' } });
        if (!values['api-key']) throw new CliError('credential rotate needs --api-key KEY', 2);
        const { credential, apiSecret } = await rotateSecret(knex, values['api-key'], OPERATOR);
        return {
          client: credential.client,
          api_key: credential.api_key,
          api_secret: apiSecret,
          note: 'The new api_secret is shown only now; the old secret and every token issued before no longer work.',
        };
      }
      case 'allow-ip': {
        const { values } = parseOptions(rest, {
          'api-key': { type: 'string' },
          ip: { type: 'string', multiple: true },
          remove: { type: 'string', multiple: true },
          replace: { type: 'boolean' },
        });
        const apiKey = values['api-key'];
        if (!apiKey) throw new CliError('credential allow-ip needs --api-key KEY', 2);
        const current = await MerchantCredential.query(knex).findOne({ api_key: apiKey });
        if (!current) throw new CredentialNotFoundError(apiKey);
        const added = values.ip ?? [];
        const removed = new Set(values.remove ?? []);
        // Adding a specific IP to an allow-all list narrows it: '*' cannot stand beside entries.
        const base = values.replace ? [] : current.allowed_ips.filter((entry) => !(entry === '*' && added.length));
        const next = [...base, ...added].filter((entry) => !removed.has(entry));
        return (await setAllowedIps(knex, apiKey, next, OPERATOR)).toPublic();
      }
      default:
        throw new CliError(`Unknown credential command: ${action ?? '(none)'} (create, list, deactivate, activate, rotate, allow-ip)`, 2);
    }
  } catch (error) {
    if (error instanceof InvalidInputError || error instanceof CredentialNotFoundError) throw new CliError(error.message);
    throw error;
  }
}
