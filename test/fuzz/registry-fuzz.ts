/**
 * The staff side's part of the fuzzer: what the back-office registry says about each model (its
 * form fields, filters, columns, actions) turned into paths, query strings and bodies, so requests
 * to data/<app>/<model>/<pk>/ and the web admin name real models and real rows (live pks, read at
 * each checkpoint) as often as hostile ones, and carry a staff identity's live credentials.
 */
import fc from 'fast-check';
import { anyJson, corrupt, hostileNumber, hostileString, live, percentEncode } from './values.ts';

export interface FuzzField {
  name: string;
  /** The registry's field type (string, decimal, fk, m2m, json, ...). */
  type: string;
  required: boolean;
  maxLength: number | null;
  choices: string[];
  /** fk and m2m: the related model's key. */
  related: string | null;
}

export interface FuzzModel {
  key: string;
  app: string;
  model: string;
  /** Placeholders of the pks of up to PK_SLOTS of its rows, read again at each checkpoint. */
  pks: string[];
  fields: FuzzField[];
  /** Filter parameter names (`decision__exact`, `score__range__gte`, ...). */
  filters: string[];
  /** List column names (`o` takes their 1-based indexes). */
  columns: string[];
  /** Stored column names (`fields` asks for them). */
  storedColumns: string[];
  actions: string[];
}

/** What the fuzzer knows of the staff side; the values are mostly placeholders filled at send time. */
export interface StaffFuzzTarget {
  /** Staff identities with live credentials: `access:<identity>`, `cookie:<identity>`, ... */
  identities: readonly string[];
  models: FuzzModel[];
  /** Values of path parameters other than a model's app, model and pk, by name (`id`, `session`, `pk`). */
  pathValues: Record<string, string[]>;
  /** Values a body field of that name may take besides generated ones: real refresh tokens and device ids, the current password, fresh tickets. */
  knownValues: Record<string, string[]>;
  /** Well-formed bearer tokens that must be refused: a revoked device's, a merchant's, a KYC session's. */
  deadTokens: string[];
}

/** How many rows of each model the fuzzer names by pk (pk:<model>:0 .. pk:<model>:PK_SLOTS-1). */
export const PK_SLOTS = 3;

export function pkPlaceholders(key: string): string[] {
  return Array.from({ length: PK_SLOTS }, (_, slot) => live(`pk:${key}:${slot}`));
}

/** A path segment as sent (percent-encoded); known values are placeholders or plain names, which need no encoding. */
const hostileSegment = fc.oneof(
  { arbitrary: fc.constantFrom('1', '0', '-1', '00000000-0000-0000-0000-000000000000', 'x', 'autocomplete', '2147483648', '9'.repeat(30)).map(percentEncode), weight: 3 },
  { arbitrary: hostileString.filter((text) => text.length > 0).map(percentEncode), weight: 3 },
  { arbitrary: fc.constantFrom('%ff', '%c0%af', '%00', '%2e%2e', '..', '%'), weight: 1 },
);

/** Any model: a registered one most of the time, else an unknown or hostile app and model. */
function modelChoice(target: StaffFuzzTarget, app: string | null): fc.Arbitrary<{ app: string; model: string; chosen: FuzzModel | null }> {
  const candidates = target.models.filter((model) => app === null || model.app === app);
  const registered = fc.constantFrom(...(candidates.length ? candidates : target.models)).map((chosen) => ({ app: chosen.app, model: chosen.model, chosen }));
  const unknown = fc
    .tuple(fc.oneof(fc.constantFrom(...new Set(target.models.map((model) => model.app))), hostileSegment), hostileSegment)
    .map(([unknownApp, model]) => ({ app: unknownApp, model, chosen: null }));
  return fc.oneof({ arbitrary: registered, weight: 9 }, { arbitrary: unknown, weight: 1 });
}

/** A pk for the model's detail: one of its rows, another model's row, or a hostile segment. */
function pkChoice(target: StaffFuzzTarget, chosen: FuzzModel | null): fc.Arbitrary<string> {
  const others = target.models.flatMap((model) => model.pks);
  return fc.oneof(
    { arbitrary: chosen ? fc.constantFrom(...chosen.pks) : hostileSegment, weight: 6 },
    { arbitrary: fc.constantFrom(...others), weight: 1 },
    { arbitrary: hostileSegment, weight: 2 },
  );
}

/**
 * A path for a route template, the chosen model with it: `{app}`/`{model}` from the registry (or
 * `approval/{model}` from that app), `{pk}` from the model's rows, any other parameter from the
 * known values of its name, each sometimes hostile.
 */
export function staffPath(template: string, target: StaffFuzzTarget): fc.Arbitrary<{ path: string; model: FuzzModel | null }> {
  const names = [...template.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]!);
  const fixedApp = /\/([a-z]+)\/\{model\}/.exec(template)?.[1] ?? null;
  const model = names.includes('model') ? modelChoice(target, names.includes('app') ? null : fixedApp) : fc.constant(null);
  return model.chain((choice) => {
    const values: Record<string, fc.Arbitrary<string>> = {};
    for (const name of names) {
      if (name === 'app' && choice) values[name] = fc.constant(choice.app);
      else if (name === 'model' && choice) values[name] = fc.constant(choice.model);
      else if (name === 'pk' && choice) values[name] = pkChoice(target, choice.chosen);
      else {
        const known = target.pathValues[name] ?? [];
        values[name] = known.length ? fc.oneof({ arbitrary: fc.constantFrom(...known), weight: 4 }, { arbitrary: hostileSegment, weight: 1 }) : hostileSegment;
      }
    }
    return fc.record(values).map((chosen) => ({
      path: names.reduce((path, name) => path.replace(`{${name}}`, chosen[name]!), template),
      model: choice?.chosen ?? null,
    }));
  });
}

/** A staff identity: the first (the superuser, who reaches every permitted path) twice as often as each other. */
export function identityChoice(target: StaffFuzzTarget): fc.Arbitrary<string> {
  const [first, ...others] = target.identities;
  return fc.oneof({ arbitrary: fc.constant(first!), weight: 2 }, ...others.map((name) => ({ arbitrary: fc.constant(name), weight: 1 })));
}

/** The bearer of a staff request: an identity's live token mostly; a tampered, unsigned, dead or missing one otherwise. */
export function staffAuthorization(target: StaffFuzzTarget): fc.Arbitrary<Record<string, string>> {
  const identity = identityChoice(target);
  const refused = fc.oneof(
    fc.tuple(identity, fc.constantFrom('access-tampered', 'access-unsigned', 'access-other-key')).map(([name, kind]) => ({ authorization: `Bearer ${live(`${kind}:${name}`)}` })),
    fc.constantFrom(...target.deadTokens).map((token) => ({ authorization: `Bearer ${token}` })),
    fc.constantFrom<Record<string, string>>({}, { authorization: 'Bearer' }, { authorization: `Basic ${live(`access:${target.identities[0]}`)}` }, { authorization: `Bearer ${live(`access:${target.identities[0]}`)} x` }),
  );
  return fc.oneof(
    { arbitrary: identity.map((name) => ({ authorization: `Bearer ${live(`access:${name}`)}` })), weight: 20 },
    { arbitrary: refused, weight: 2 },
  );
}

/** A value for a body field of this name: a known live value (a real refresh token, the current password) now and then. */
export function knownOr<T>(target: StaffFuzzTarget | undefined, name: string, generated: fc.Arbitrary<T>): fc.Arbitrary<T | string> {
  const known = target?.knownValues[name];
  return known?.length ? fc.oneof({ arbitrary: fc.constantFrom(...known), weight: 2 }, { arbitrary: generated, weight: 1 }) : generated;
}

const DATE_TEXT = fc.date({ min: new Date('1900-01-01'), max: new Date('2100-01-01'), noInvalidDate: true });

/** A plausible value of a form field, as JSON (typed) or as a web form's text. */
function plausible(field: FuzzField, target: StaffFuzzTarget, form: boolean): fc.Arbitrary<unknown> {
  const relatedPks = () => target.models.find((model) => model.key === field.related)?.pks ?? [];
  switch (field.type) {
    case 'integer':
      return form ? fc.integer({ min: -5, max: 1000 }).map(String) : fc.integer({ min: -5, max: 1000 });
    case 'float':
    case 'decimal':
      return fc.oneof(fc.double({ min: -1, max: 1000, noNaN: true }), fc.constantFrom('12.34', '0.005', '100', '1e3')).map((value) => (form ? String(value) : value));
    case 'boolean':
    case 'nullboolean':
      return form ? fc.constantFrom('on', 'true', 'false', '') : fc.oneof(fc.boolean(), fc.constant(null));
    case 'date':
      return DATE_TEXT.map((date) => date.toISOString().slice(0, 10));
    case 'datetime':
      return DATE_TEXT.map((date) => (form ? date.toISOString().slice(0, 16) : date.toISOString()));
    case 'time':
      return fc.constantFrom('12:30', '00:00', '23:59:59', '24:00');
    case 'choice':
      return field.choices.length ? fc.constantFrom(...field.choices) : fc.string({ maxLength: 10 });
    case 'fk': {
      const pks = relatedPks();
      return pks.length ? fc.constantFrom(...pks) : fc.uuid();
    }
    case 'm2m': {
      const values = field.choices.length ? field.choices : relatedPks();
      return fc.uniqueArray(values.length ? fc.constantFrom(...values) : fc.uuid(), { maxLength: 3 });
    }
    case 'json':
      return form ? anyJson.map((value) => JSON.stringify(value) ?? 'null') : anyJson;
    case 'uuid':
      return fc.uuid();
    default: {
      const max = field.maxLength ?? 40;
      return fc.oneof({ arbitrary: fc.string({ minLength: 1, maxLength: Math.min(max, 40) }), weight: 4 }, { arbitrary: fc.constant('x'.repeat(max + 1)), weight: 1 });
    }
  }
}

/** A field's value: plausible, or hostile (a hostile string, number or JSON value of any type). */
function fieldValue(field: FuzzField, target: StaffFuzzTarget, form: boolean): fc.Arbitrary<unknown> {
  const hostile = form ? hostileString : fc.oneof(hostileString, hostileNumber, anyJson);
  return knownOr(target, field.name, fc.oneof({ arbitrary: plausible(field, target, form), weight: 4 }, { arbitrary: hostile, weight: 1 }));
}

/** A data write body (flat JSON object of form fields): plausible, corrupted in a place or two, or unknown keys only. */
export function modelBody(model: FuzzModel | null, target: StaffFuzzTarget): fc.Arbitrary<unknown> | null {
  if (!model || !model.fields.length) return null;
  const shape = Object.fromEntries(model.fields.map((field) => [field.name, fieldValue(field, target, false)]));
  const valid = fc.record(shape, { requiredKeys: [] });
  return fc.oneof(
    { arbitrary: valid, weight: 4 },
    { arbitrary: valid.chain(corrupt), weight: 3 },
    { arbitrary: valid.chain(corrupt).chain(corrupt), weight: 1 },
  );
}

/** A web form's fields for the model's add or change page, as name/value pairs (m2m repeated). */
export function modelForm(model: FuzzModel, target: StaffFuzzTarget): fc.Arbitrary<Array<[string, string]>> {
  const fields = fc.subarray(model.fields, { minLength: 0 });
  return fields.chain((chosen) =>
    fc.tuple(...chosen.map((field) => fieldValue(field, target, true).map((value) => [field.name, value] as const))).map((pairs) =>
      pairs.flatMap(([name, value]): Array<[string, string]> => (Array.isArray(value) ? value.map((item) => [name, String(item)]) : [[name, typeof value === 'string' ? value : JSON.stringify(value) ?? '']])),
    ),
  );
}

/** Query parameters for a model's list, detail, schema or autocomplete: known names with plausible and hostile values, unknown names, repeats. */
export function modelQuery(model: FuzzModel | null): fc.Arbitrary<Array<[string, string]>> {
  const relationFields = model?.fields.filter((field) => field.type === 'fk' || field.type === 'm2m').map((field) => field.name) ?? [];
  const columns = model?.columns.length ?? 3;
  const parameter: fc.Arbitrary<[string, string]> = fc.oneof(
    fc.tuple(fc.constantFrom('p', 'page_size'), fc.oneof(fc.integer({ min: 1, max: 250 }).map(String), fc.constantFrom('0', '-1', '1.5', '99999999999', ''))),
    fc.tuple(fc.constant('o'), fc.oneof(fc.array(fc.integer({ min: -columns - 1, max: columns + 1 }), { minLength: 1, maxLength: 3 }).map((order) => order.join('.')), hostileString)),
    fc.tuple(fc.constant('q'), fc.oneof(fc.string({ maxLength: 10 }), hostileString)),
    fc.tuple(fc.constant('fields'), fc.oneof(fc.subarray(model?.storedColumns ?? ['id']).map((names) => names.join(',')), hostileString)),
    fc.tuple(fc.constant('field'), fc.oneof(relationFields.length ? fc.constantFrom(...relationFields) : hostileString, hostileString)),
    fc.tuple(fc.constantFrom('include_inlines', 'object_id'), fc.oneof(fc.constantFrom('1', '0', 'true', 'yes'), model?.pks.length ? fc.constantFrom(...model.pks) : hostileString, hostileString)),
    fc.tuple(
      model?.filters.length ? fc.constantFrom(...model.filters) : fc.constant('decision__exact'),
      fc.oneof(fc.constantFrom('true', 'false', 'ACCEPT', 'REJECT', '1', '2024-01-01', '2024-01-01T00:00:00Z', ''), hostileString),
    ),
    fc.tuple(fc.oneof(fc.constantFrom('x', '__proto__', 'o[]', 'p[x]', 'id__gt'), hostileString.filter((name) => name.length > 0)), hostileString),
  );
  // Most requests send no query or a known one; an unknown name is a 400 before anything else runs.
  return fc.oneof({ arbitrary: fc.constant<Array<[string, string]>>([]), weight: 2 }, { arbitrary: fc.array(parameter, { minLength: 1, maxLength: 3 }), weight: 2 });
}
