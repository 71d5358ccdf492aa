/**
 * The web admin's pages and forms, fuzzed beside the API: a request carries a staff identity's live
 * session cookie and CSRF token most of the time (sometimes none, another identity's token, a wrong
 * one, a foreign Origin), names a registered model and one of its live rows, and posts the model's
 * form fields (registry-fuzz.ts) with plausible and hostile values; the case-work forms post the
 * fields the OpenAPI document gives their mobile twins.
 */
import fc from 'fast-check';
import { CSRF_FIELD } from '../../src/modules/backoffice/web/layout.tsx';
import { SESSION_COOKIE } from '../../src/modules/backoffice/web/session.ts';
import { ANONYMOUS_CSRF_COOKIE, LOGIN_PATH, LOGOUT_PATH } from '../../src/modules/backoffice/web/shell.tsx';
import type { FuzzRequest } from './openapi-fuzz.ts';
import { identityChoice, modelForm, modelQuery, staffPath, type FuzzModel, type StaffFuzzTarget } from './registry-fuzz.ts';
import { encodePairs, hostileString, live, percentEncode } from './values.ts';

/** The session a request presents: cookie, the CSRF token its form carries, and any extra header. */
interface WebSession {
  headers: Record<string, string>;
  csrf: Array<[string, string]>;
}

function sessionOf(staff: StaffFuzzTarget): fc.Arbitrary<WebSession> {
  const identity = identityChoice(staff);
  const cookie = (name: string) => ({ cookie: `${SESSION_COOKIE}=${live(`cookie:${name}`)}` });
  const token = (value: string): Array<[string, string]> => [[CSRF_FIELD, value]];
  return fc.oneof<fc.MaybeWeightedArbitrary<WebSession>[]>(
    { arbitrary: identity.map((name) => ({ headers: cookie(name), csrf: token(live(`csrf:${name}`)) })), weight: 24 },
    {
      arbitrary: fc.tuple(identity, fc.constantFrom(...staff.identities), fc.option(hostileString, { nil: undefined })).map(([name, other, wrong]) => ({
        headers: cookie(name),
        csrf: token(wrong ?? live(`csrf:${other}`)),
      })),
      weight: 1,
    },
    { arbitrary: identity.map((name) => ({ headers: { ...cookie(name), origin: 'https://evil.example' }, csrf: token(live(`csrf:${name}`)) })), weight: 1 },
    { arbitrary: identity.map((name) => ({ headers: cookie(name), csrf: [] })), weight: 1 },
    {
      arbitrary: fc.constantFrom<WebSession>({ headers: {}, csrf: [] }, { headers: { cookie: `${SESSION_COOKIE}=x` }, csrf: token('x') }, { headers: { cookie: `${SESSION_COOKIE}=${'a'.repeat(43)}; ${SESSION_COOKIE}=` }, csrf: [] }),
      weight: 1,
    },
  );
}

type FormBuilder = (model: FuzzModel | null) => fc.Arbitrary<Array<[string, string]>>;

interface Page {
  method: 'GET' | 'POST';
  template: string;
  weight: number;
  /** POST: the form's fields for the chosen model (without the CSRF token); GET: the query. */
  fields?: FormBuilder;
}

const none: FormBuilder = () => fc.constant([]);

/**
 * Every page of the web admin (backoffice/web/pages.tsx, cases/web.tsx, the shell's login and
 * logout), weighted towards the forms that write. `formFor(route)` gives the fields of a mobile
 * route's documented JSON body as form pairs.
 */
export function adminRequests(staff: StaffFuzzTarget, formFor: (route: string) => fc.Arbitrary<Array<[string, string]>>): fc.Arbitrary<FuzzRequest> {
  const models = new Map(staff.models.map((model) => [model.key, model]));
  const userModel = models.get('auth.user') ?? null;
  const form: FormBuilder = (model) => {
    const fields = model ? modelForm(model, staff) : fc.constant([]);
    return fc.tuple(fields, fc.subarray(['_save', '_continue', '_addanother'], { maxLength: 1 })).map(([pairs, buttons]) => [...pairs, ...buttons.map((button): [string, string] => [button, '1'])]);
  };
  const action: FormBuilder = (model) =>
    fc
      .record({
        action: fc.oneof(fc.constantFrom(...(model?.actions.length ? model.actions : ['delete_selected']), ''), hostileString),
        selected: fc.subarray(model?.pks ?? []),
        post: fc.constantFrom('yes', 'no', undefined),
        filters: fc.option(modelQuery(model).map(encodePairs), { nil: undefined }),
      })
      .map(({ action: name, selected, post, filters }) => [
        ['action', name],
        ...selected.map((pk): [string, string] => ['_selected_action', pk]),
        ...(post ? [['post', post] as [string, string]] : []),
        ...(filters !== undefined ? [['_changelist_filters', filters] as [string, string]] : []),
      ]);
  const password: FormBuilder = () =>
    fc
      .record({
        old: fc.oneof(fc.constantFrom(...staff.identities).map((name) => live(`password:${name}`)), hostileString),
        first: fc.oneof(fc.constantFrom(...(staff.knownValues.new_password1 ?? ['x'])), hostileString),
        second: fc.oneof(fc.constantFrom(...(staff.knownValues.new_password1 ?? ['x'])), hostileString),
      })
      .map(({ old, first, second }) => [['old_password', old], ['new_password1', first], ['new_password2', second]]);
  const savedFilter: FormBuilder = (model) =>
    fc.tuple(fc.oneof(fc.string({ minLength: 1, maxLength: 20 }), hostileString), modelQuery(model).map(encodePairs)).map(([name, query]) => [['name', name], ['query', query]]);
  const login: FormBuilder = () =>
    fc
      .record({
        username: fc.oneof(fc.constantFrom(...staff.identities).map((name) => live(`username:${name}`)), hostileString),
        password: fc.oneof(fc.constantFrom(...staff.identities).map((name) => live(`password:${name}`)), hostileString),
        next: fc.option(fc.oneof(fc.constantFrom('/admin/', '//evil.example/', '/admin/\\evil'), hostileString), { nil: undefined }),
      })
      .map(({ username, password: secret, next }) => [['username', username], ['password', secret], ...(next !== undefined ? [['next', next] as [string, string]] : [])]);

  const pages: Page[] = [
    { method: 'GET', template: '/admin/', weight: 1 },
    { method: 'GET', template: '/admin/{app}/{model}/', weight: 4, fields: modelQuery },
    { method: 'GET', template: '/admin/{app}/{model}/autocomplete/', weight: 1, fields: modelQuery },
    { method: 'GET', template: '/admin/{app}/{model}/add/', weight: 1 },
    { method: 'GET', template: '/admin/{app}/{model}/{pk}/change/', weight: 3 },
    { method: 'GET', template: '/admin/{app}/{model}/{pk}/delete/', weight: 1 },
    { method: 'GET', template: '/admin/{app}/{model}/{pk}/history/', weight: 1 },
    { method: 'GET', template: '/admin/auth/user/{user}/change/', weight: 1 },
    { method: 'GET', template: '/admin/{app}/{model}/{pk}/{pk}/', weight: 1 },
    { method: 'POST', template: '/admin/{app}/{model}/add/', weight: 4, fields: form },
    { method: 'POST', template: '/admin/{app}/{model}/{pk}/change/', weight: 4, fields: form },
    { method: 'POST', template: '/admin/auth/user/{user}/change/', weight: 1, fields: () => form(userModel) },
    { method: 'POST', template: '/admin/{app}/{model}/{pk}/delete/', weight: 1, fields: () => fc.constantFrom([['post', 'yes']], []) },
    { method: 'POST', template: '/admin/{app}/{model}/', weight: 2, fields: action },
    { method: 'POST', template: '/admin/{app}/{model}/saved-filters/', weight: 1, fields: savedFilter },
    { method: 'POST', template: '/admin/{app}/{model}/saved-filters/{id}/delete/', weight: 1, fields: none },
    { method: 'POST', template: '/admin/auth/user/{user}/password/', weight: 1, fields: password },
    { method: 'POST', template: '/admin/auth/user/{user}/pairing/', weight: 1, fields: none },
    { method: 'POST', template: '/admin/approval/{model}/{pk}/process/', weight: 1, fields: () => formFor('/api/mobile/data/approval/{model}/{pk}/process/') },
    { method: 'POST', template: '/admin/{app}/{model}/{pk}/decision/', weight: 1, fields: () => formFor('/api/mobile/data/{app}/{model}/{pk}/decision/') },
    { method: 'POST', template: LOGOUT_PATH, weight: 1, fields: none },
  ];

  const requests = pages.map(({ method, template, weight, fields }) => ({
    weight,
    arbitrary: fc.tuple(staffPath(template, staff), sessionOf(staff)).chain(([{ path, model }, session]) =>
      (fields ?? none)(model).map((pairs): FuzzRequest => {
        const route = `${method} ${template}`;
        if (method === 'GET') return { method, route, path: pairs.length ? `${path}?${encodePairs(pairs)}` : path, headers: session.headers };
        return {
          method,
          route,
          path,
          headers: { ...session.headers, 'content-type': 'application/x-www-form-urlencoded' },
          body: encodePairs([...session.csrf, ...pairs]),
        };
      }),
    ),
  }));

  // Before login there is no session: the login form's token is the double-submit cookie's, any well-formed value.
  const anonymous = fc.tuple(login(null), fc.constantFrom('a'.repeat(43), 'short', '')).map(([pairs, token]): FuzzRequest => ({
    method: 'POST',
    route: `POST ${LOGIN_PATH}`,
    path: LOGIN_PATH,
    headers: { cookie: `${ANONYMOUS_CSRF_COOKIE}=${'a'.repeat(43)}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: encodePairs([[CSRF_FIELD, token], ...pairs]),
  }));
  const loginPage = fc.option(hostileString, { nil: undefined }).map((next): FuzzRequest => ({ method: 'GET', route: `GET ${LOGIN_PATH}`, path: next === undefined ? LOGIN_PATH : `${LOGIN_PATH}?next=${percentEncode(next)}`, headers: {} }));
  // Bodies a browser never sends: not urlencoded, broken percent escapes, a JSON body.
  const raw = fc.tuple(staffPath('/admin/{app}/{model}/{pk}/change/', staff), sessionOf(staff), fc.constantFrom(
    ['application/x-www-form-urlencoded', '%zz=%ff&%=%'],
    ['application/x-www-form-urlencoded', `${CSRF_FIELD}=${live('csrf:super')}&a=%ff%fe%00`],
    ['application/json', `{"${CSRF_FIELD}": "${live('csrf:super')}"}`],
    ['multipart/form-data; boundary=x', '--x\r\n'],
    ['', ''],
  )).map(([{ path }, session, [contentType, body]]): FuzzRequest => ({
    method: 'POST',
    route: 'POST /admin/{app}/{model}/{pk}/change/ (raw body)',
    path,
    headers: { ...session.headers, ...(contentType ? { 'content-type': contentType } : {}) },
    body,
  }));

  return fc.oneof(...requests, { arbitrary: anonymous, weight: 1 }, { arbitrary: loginPage, weight: 1 }, { arbitrary: raw, weight: 1 });
}
