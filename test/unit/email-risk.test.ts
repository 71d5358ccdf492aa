import test from 'ava';
import fc from 'fast-check';
import { EMAIL_RISK_WEIGHTS, loadEmailLists, scoreEmail, type EmailRiskInput } from '../../src/modules/screening/email-risk.ts';

const lists = loadEmailLists();

function score(email: string | null | undefined, person: Omit<EmailRiskInput, 'email'> = {}) {
  return scoreEmail({ email, ...person }, lists);
}

const johnSmith = { firstName: 'John', lastName: 'Smith' };

test('the shipped lists are loaded, sizeable and disjoint', (t) => {
  t.true(lists.disposable.size > 5000);
  for (const domain of ['mailinator.com', 'guerrillamail.com', 'yopmail.com', '10minutemail.com', 'sharklasers.com']) {
    t.true(lists.disposable.has(domain), domain);
  }
  for (const domain of ['gmail.com', 'yahoo.co.uk', 'outlook.com', 'hotmail.fr', 'mail.ru', 'yandex.ru', 'gmx.de', 'web.de', 'proton.me', 'icloud.com', 'qq.com', '163.com']) {
    t.true(lists.free.has(domain), domain);
  }
  t.false(lists.disposable.has('# comment'));
  t.deepEqual([...lists.free].filter((domain) => lists.disposable.has(domain)), []);
});

test('a missing or blank email scores 0 with no_email', (t) => {
  for (const email of [null, undefined, '', '   ']) {
    t.deepEqual(score(email), { score: 0, reasons: ['no_email'], valid_format: false });
  }
});

test('a personal address that carries the name scores 0', (t) => {
  t.deepEqual(score('john.smith@gmail.com', johnSmith), { score: 0, reasons: ['free_provider', 'name_match'], valid_format: true });
  t.deepEqual(score('j.smith@acme-corp.com', johnSmith), { score: 0, reasons: ['name_match'], valid_format: true });
  t.deepEqual(score('John.Smith@Gmail.COM', johnSmith).reasons, ['free_provider', 'name_match']);
});

test('an address on a company domain with no person data scores 0', (t) => {
  t.deepEqual(score('anna@acme-corp.com'), { score: 0, reasons: [], valid_format: true });
});

test('free providers add a small weight', (t) => {
  t.deepEqual(score('sunshine@yahoo.com'), { score: 5, reasons: ['free_provider'], valid_format: true });
  t.deepEqual(score('x123@outlook.de').reasons, ['free_provider']);
});

test('disposable domains and their subdomains are flagged', (t) => {
  t.deepEqual(score('anna@mailinator.com'), { score: 60, reasons: ['disposable_domain'], valid_format: true });
  t.deepEqual(score('anna@inbox.mailinator.com').reasons, ['disposable_domain']);
  t.deepEqual(score('anna@yopmail.com', { firstName: 'Anna' }), {
    score: 50,
    reasons: ['disposable_domain', 'name_match'],
    valid_format: true,
  });
});

test('role accounts are flagged, whatever the separators or tag', (t) => {
  for (const email of ['info@acme-corp.com', 'no-reply@acme-corp.com', 'no_reply@acme-corp.com', 'Support+eu@acme.io', 'admin@acme.io']) {
    t.deepEqual(score(email, johnSmith), { score: 20, reasons: ['role_account'], valid_format: true }, email);
  }
  t.deepEqual(score('information.desk@acme.io').reasons, []);
});

test('random local parts are flagged', (t) => {
  t.deepEqual(score('xk7q9zt2w@gmail.com'), { score: 35, reasons: ['free_provider', 'random_local_part'], valid_format: true });
  t.deepEqual(score('xk7q9zt2w@mailinator.com'), { score: 90, reasons: ['disposable_domain', 'random_local_part'], valid_format: true });
  // (A digit does not end a consonant run: 'kl4mnbv' holds the run klmnbv; a separator does.)
  for (const local of ['a8f3k2p9', 'bx9k2mqp', 'user_8f7d6c5b', 'sdfkjhsdf', '3f2b8c1a9e7d', 'zxcvbnm', 'kl4mnbvx']) {
    t.true(score(`${local}@example.org`).reasons.includes('random_local_part'), local);
  }
});

test('real names and the usual name+number patterns are not random', (t) => {
  for (const local of [
    'mkrtchyan',
    'brzeczyszczykiewicz',
    'strc.prst',
    'schwarzkopf',
    'john.smith85',
    'anna1987',
    'qwerty123',
    'nguyen.van.a',
    'j0hn.d03',
    '123456789',
    'tkachenko.o',
    'kl.mnb.vx',
  ]) {
    t.false(score(`${local}@example.org`).reasons.includes('random_local_part'), local);
  }
});

test('a random local part does not also count as a name mismatch', (t) => {
  t.deepEqual(score('xk7q9zt2w@gmail.com', johnSmith).reasons, ['free_provider', 'random_local_part']);
});

test('names match through transliteration, initials, separators and small typos', (t) => {
  const cases: [string, string, string][] = [
    ['ivan.petrov@mail.ru', 'Иван', 'Петров'],
    ['mueller.j@web.de', 'Jürgen', 'Müller'],
    ['jmuller@web.de', 'Jürgen', 'Müller'],
    ['jgarcia@empresa.es', 'José', 'García'],
    ['obrien@eircom.ie', 'Seán', "O'Brien"],
    ['jean_pierre.dupont@orange.fr', 'Jean-Pierre', 'Dupont'],
    ['js1985@gmail.com', 'John', 'Smith'],
    ['smithj@gmail.com', 'John', 'Smith'],
    ['smyth.j@gmail.com', 'John', 'Smith'],
    ['lina88@qq.com', 'Li', 'Na'],
    ['li.wei@163.com', 'Wei', 'Li'],
    ['john.smith+shop@gmail.com', 'John', 'Smith'],
  ];
  for (const [email, firstName, lastName] of cases) {
    t.true(score(email, { firstName, lastName }).reasons.includes('name_match'), email);
  }
});

test('a local part unrelated to the names is a mismatch; too little to compare is neither', (t) => {
  t.deepEqual(score('sunshine.rider@yahoo.com', { firstName: 'Anna', lastName: 'Kowalska' }), {
    score: 15,
    reasons: ['free_provider', 'name_mismatch'],
    valid_format: true,
  });
  t.deepEqual(score('abc@acme.io', johnSmith).reasons, []);
  t.deepEqual(score('123456789@qq.com', johnSmith).reasons, ['free_provider']);
  t.deepEqual(score('sunshine@acme.io').reasons, [], 'no names given');
});

test('a year in the local part is checked against the birth year', (t) => {
  const born1985 = { ...johnSmith, birthDate: '1985-03-02' };
  t.deepEqual(score('john.smith1985@gmail.com', born1985), {
    score: 0,
    reasons: ['free_provider', 'name_match', 'birth_year_match'],
    valid_format: true,
  });
  t.deepEqual(score('john.smith85@gmail.com', born1985).reasons, ['free_provider', 'name_match', 'birth_year_match']);
  t.deepEqual(score('john.smith1979@gmail.com', born1985), {
    score: 5,
    reasons: ['free_provider', 'name_match', 'birth_year_mismatch'],
    valid_format: true,
  });
  t.deepEqual(score('john79.smith@acme.io', born1985).reasons, ['name_match'], 'two digits count only at the end');
  t.deepEqual(score('sunrise2001@acme.io', { birthDate: '1985-03-02' }), {
    score: 10,
    reasons: ['birth_year_mismatch'],
    valid_format: true,
  });
  t.deepEqual(score('john.smith1234@acme.io', born1985).reasons, ['name_match'], '1234 is not a year');
  t.deepEqual(score('john.smith1979@acme.io', johnSmith).reasons, ['name_match'], 'no birth date, no check');
  t.deepEqual(score('john.smith1979@acme.io', { ...johnSmith, birthDate: '03/02/1985' }).reasons, ['name_match']);
});

test('an invalid address scores high and still has its domain judged', (t) => {
  t.deepEqual(score('not-an-email'), { score: 70, reasons: ['invalid_format'], valid_format: false });
  t.deepEqual(score('john smith@gmail.com', johnSmith), { score: 75, reasons: ['invalid_format', 'free_provider'], valid_format: false });
  t.deepEqual(score('a..b@mailinator.com'), { score: 100, reasons: ['invalid_format', 'disposable_domain'], valid_format: false });
  t.deepEqual(score('john@localhost').reasons, ['invalid_format']);
  t.deepEqual(score('@gmail.com').reasons, ['invalid_format']);
  t.deepEqual(score(`${'a'.repeat(250)}@gmail.com`).reasons, ['invalid_format'], 'over 254 characters');
});

test('domains one keystroke away from a major provider are typos', (t) => {
  for (const domain of ['gmaill.com', 'gamil.com', 'gmail.co', 'gmail.con', 'hotmal.com', 'yahooo.com', 'outlok.com', 'icloud.co']) {
    t.deepEqual(score(`john@${domain}`).reasons, ['domain_typo'], domain);
  }
  t.deepEqual(score('john@ymail.com').reasons, ['free_provider'], 'a real provider next to gmail.com');
  t.deepEqual(score('john@aon.com').reasons, [], 'short targets are not compared');
});

test('weights stay within 0..100 when combined', (t) => {
  const positive = Object.values(EMAIL_RISK_WEIGHTS).filter((weight) => weight > 0);
  t.true(positive.every((weight) => weight <= 100));
  t.is(score('xk7q9zt2w@mailinator.com', { birthDate: '1990-01-01' }).score, 90);
});

const person = fc.record(
  {
    firstName: fc.option(fc.string(), { nil: null }),
    lastName: fc.option(fc.string({ unit: 'grapheme' }), { nil: undefined }),
    birthDate: fc.option(fc.oneof(fc.string(), fc.date({ noInvalidDate: true }).map((date) => date.toISOString().slice(0, 10)))),
  },
  { requiredKeys: [] },
);

function assertWellFormed(result: ReturnType<typeof scoreEmail>): boolean {
  return (
    Number.isInteger(result.score) &&
    result.score >= 0 &&
    result.score <= 100 &&
    (result.score === 0 || result.reasons.length > 0) &&
    result.reasons.every((reason) => reason in EMAIL_RISK_WEIGHTS) &&
    typeof result.valid_format === 'boolean'
  );
}

test('never throws and always scores 0..100 on arbitrary input', (t) => {
  const email = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary', maxLength: 400 }),
    fc.emailAddress(),
    fc.tuple(fc.string(), fc.constantFrom('gmail.com', 'mailinator.com', 'gmial.com', 'x.y')).map(([local, domain]) => `${local}@${domain}`),
    fc.constantFrom(null, undefined),
  );
  fc.assert(
    fc.property(email, person, (address, details) => assertWellFormed(scoreEmail({ email: address, ...details }, lists))),
    { numRuns: 3000 },
  );
  t.pass();
});

test('valid addresses from the generator are reported as valid', (t) => {
  fc.assert(
    fc.property(fc.emailAddress(), (address) => {
      const result = scoreEmail({ email: address }, lists);
      return result.valid_format === !result.reasons.includes('invalid_format');
    }),
    { numRuns: 1000 },
  );
  t.pass();
});
