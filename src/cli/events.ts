import type { Database } from '../db/database.ts';
import { defineEvent, EventInputError, listEvents, type EventType } from '../modules/events/service.ts';
import { CliError, OPERATOR, parseOptions } from './options.ts';

export async function eventCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  switch (action) {
    case 'define': {
      const { values } = parseOptions(rest, {
        slug: { type: 'string' },
        type: { type: 'string' },
        name: { type: 'string' },
        inactive: { type: 'boolean' },
      });
      if (!values.slug || values.type === undefined) throw new CliError('event define needs --slug S --type 0|1|2', 2);
      const type = Number(values.type);
      try {
        return await defineEvent(knex, { slug: values.slug, name: values.name ?? values.slug, type: type as EventType, active: !values.inactive }, OPERATOR);
      } catch (error) {
        if (error instanceof EventInputError) throw new CliError(error.message, 2);
        throw error;
      }
    }
    case 'list':
      return listEvents(knex);
    default:
      throw new CliError(`Unknown event command: ${action ?? '(none)'} (define, list)`, 2);
  }
}
