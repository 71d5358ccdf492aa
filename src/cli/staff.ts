import type { Database } from '../db/database.ts';
import { permissionCodenames } from '../app/registrations.ts';
import { createGroup, createUser, deactivateUser, describeUser, grant, listUsers, StaffInputError } from '../modules/staff/service.ts';
import { CliError, OPERATOR, parseOptions } from './options.ts';

export async function staffCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  try {
    switch (action) {
      case 'create': {
        const { values } = parseOptions(rest, {
          username: { type: 'string' },
          password: { type: 'string' },
          email: { type: 'string' },
          'full-name': { type: 'string' },
          superuser: { type: 'boolean' },
          'video-call-agent': { type: 'boolean' },
          group: { type: 'string', multiple: true },
        });
        if (!values.username || values.password === undefined) throw new CliError('staff create needs --username U --password P', 2);
        const created = await createUser(
          knex,
          {
            username: values.username,
            password: values.password,
            email: values.email,
            full_name: values['full-name'],
            is_superuser: values.superuser,
            video_call_agent: values['video-call-agent'],
            groups: values.group,
          },
          { actor: OPERATOR, known: new Set(permissionCodenames()) },
        );
        return await describeUser(knex, created.id);
      }
      case 'grant': {
        const { values } = parseOptions(rest, {
          username: { type: 'string' },
          perm: { type: 'string', multiple: true },
          group: { type: 'string', multiple: true },
        });
        if (!values.username) throw new CliError('staff grant needs --username U and at least one --perm or --group', 2);
        if (!values.perm?.length && !values.group?.length) throw new CliError('staff grant needs at least one --perm APP_LABEL.CODENAME or --group G', 2);
        return await grant(knex, values.username, { permissions: values.perm, groups: values.group }, { actor: OPERATOR, known: new Set(permissionCodenames()) });
      }
      case 'deactivate': {
        const { values } = parseOptions(rest, { username: { type: 'string' } });
        if (!values.username) throw new CliError('staff deactivate needs --username U', 2);
        return await deactivateUser(knex, values.username, OPERATOR);
      }
      case 'list':
        parseOptions(rest, {});
        return await listUsers(knex);
      default:
        throw new CliError(`Unknown staff command: ${action ?? '(none)'} (create, grant, deactivate, list)`, 2);
    }
  } catch (error) {
    if (error instanceof StaffInputError) throw new CliError(error.message);
    throw error;
  }
}

export async function groupCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  if (action !== 'create') throw new CliError(`Unknown group command: ${action ?? '(none)'} (create)`, 2);
  const { values } = parseOptions(rest, { name: { type: 'string' }, perm: { type: 'string', multiple: true } });
  if (!values.name) throw new CliError('group create needs --name G', 2);
  try {
    return await createGroup(knex, { name: values.name, permissions: values.perm }, { actor: OPERATOR, known: new Set(permissionCodenames()) });
  } catch (error) {
    if (error instanceof StaffInputError) throw new CliError(error.message);
    throw error;
  }
}
