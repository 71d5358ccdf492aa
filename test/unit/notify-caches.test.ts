/**
 * The rule and event caches are dropped when a change is announced (NOTIFY). A read that was
 * already on its way when the announcement arrived may carry the old rows: it answers its caller,
 * but the cache must not keep it, or the old rules would score every later record until the next
 * change (as the credential cache already guarded).
 */
import test, { type ExecutionContext } from 'ava';
import type { Knex } from 'knex';
import { CHANNELS, type NotificationHub } from '../../src/db/notifications.ts';
import { EventCache } from '../../src/modules/events/service.ts';
import { RuleCache } from '../../src/modules/rules/store.ts';

/** A database whose every read waits until the test answers it, and a hub whose announcements the test sends. */
function fakes() {
  const reads: Array<(rows: unknown[]) => void> = [];
  // The query ends with orderBy in both caches: the read starts there.
  const chain: Record<string, unknown> = { orderBy: () => new Promise<unknown[]>((answer) => reads.push(answer)) };
  for (const method of ['select', 'where']) chain[method] = () => chain;
  const db = (() => chain) as unknown as Knex;
  const handlers = new Map<string, () => void>();
  const hub = { healthy: true, subscribe: (channel: string, handler: () => void) => handlers.set(channel, handler), onReset: () => {} } as unknown as NotificationHub;
  return { db, hub, reads, announce: (channel: string) => handlers.get(channel)!() };
}

/**
 * The scenario of both caches: a read overtaken by an announcement on `channel` answers its
 * caller (given `firstRows`, its value checked by `checkFirst`) but is not kept; the next read,
 * with no announcement meanwhile, is kept.
 */
async function overtakenReadNotKept<T>(
  t: ExecutionContext,
  open: (db: Knex, hub: NotificationHub) => () => Promise<T>,
  channel: string,
  firstRows: unknown[],
  checkFirst: (value: T) => void,
): Promise<void> {
  const { db, hub, reads, announce } = fakes();
  const read = open(db, hub);
  const first = read();
  announce(channel);
  reads[0]!(firstRows);
  checkFirst(await first);
  const second = read();
  t.is(reads.length, 2, 'the next call reads again');
  reads[1]!([]);
  await second;
  await read();
  t.is(reads.length, 2, 'a read with no announcement meanwhile is kept');
}

test('rules read while a change was announced are used once, not kept', (t) =>
  overtakenReadNotKept(
    t,
    (db, hub) => {
      const cache = new RuleCache(db, hub);
      return () => cache.active();
    },
    CHANNELS.rules,
    [],
    (rules) => t.deepEqual(rules, []),
  ));

test('events read while a change was announced are used once, not kept', (t) =>
  overtakenReadNotKept(
    t,
    (db, hub) => {
      const cache = new EventCache(db, hub);
      return () => cache.all();
    },
    CHANNELS.events,
    [{ slug: 'deposit', name: 'Deposit', type: 1, active: true }],
    (events) => t.is(events.size, 1),
  ));
