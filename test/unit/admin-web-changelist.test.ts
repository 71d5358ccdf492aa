import test from 'ava';
import { h } from 'preact';
import { renderToString } from 'preact-render-to-string';
import type { BoundModel } from '../../src/modules/backoffice/registry.ts';
import { QueryError } from '../../src/modules/backoffice/query.ts';
import { changelistQueryString, Pagination, parseChangelistQuery } from '../../src/modules/backoffice/web/changelist.tsx';

const model = { appLabel: 'transaction', model: 'financialevent', verboseName: 'financial event', verboseNamePlural: 'financial events' } as BoundModel;
const query = { search: '', order: [], page: 1, filters: {} };

test('q, o, p and the filters are read from the query string; the rest are filters', (t) => {
  t.deepEqual(parseChangelistQuery(new URLSearchParams('q=ada&o=2.-1&p=3&decision__exact=REVIEW&score__range__gte=10')), {
    search: 'ada',
    order: [2, -1],
    page: 3,
    filters: { decision__exact: 'REVIEW', score__range__gte: '10' },
  });
  t.deepEqual(parseChangelistQuery(new URLSearchParams('')), query);
  for (const bad of ['o=0', 'o=1..2', 'o=a', 'p=0', 'p=-1', 'p=x']) {
    const error = t.throws(() => parseChangelistQuery(new URLSearchParams(bad)), { instanceOf: QueryError }, bad);
    t.is(error?.parameter, bad.slice(0, 1));
  }
});

test('the query string of a state leaves out empty values and page 1', (t) => {
  t.is(changelistQueryString({ search: 'a b', order: [-3], page: 1, filters: { decision__exact: 'REJECT', score__range__lte: '' } }), '?decision__exact=REJECT&q=a+b&o=-3');
  t.is(changelistQueryString(query), '');
  t.is(changelistQueryString({ ...query, page: 2 }), '?p=2');
});

test('an estimated total reads "about"; an exact one does not', (t) => {
  const estimated = renderToString(h(Pagination, { model, query, result: { rows: [], total: 1_000_000, totalIsEstimate: true, page: 1, pageSize: 200, pages: 5000 } }));
  t.true(estimated.includes('about 1,000,000 financial events · page 1 of about 5,000'));
  t.true(estimated.includes('href="/admin/transaction/financialevent/?p=5000"'), 'a link to the last page');
  t.true(estimated.includes('rel="next"'));
  const exact = renderToString(h(Pagination, { model, query, result: { rows: [], total: 1, totalIsEstimate: false, page: 1, pageSize: 200, pages: 1 } }));
  t.true(exact.includes('1 financial event<'));
  t.false(exact.includes('about'));
  t.false(exact.includes('rel="next"'));
});
