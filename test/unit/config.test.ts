import test from 'ava';
import { ConfigError, loadConfig } from '../../src/config.ts';

test('defaults give a complete, frozen config', (t) => {
  const config = loadConfig({});
  t.is(config.port, 8080);
  t.is(config.tokenTtlSeconds, 3600);
  t.is(config.databaseUrl, undefined);
  t.true(config.dataDir.endsWith('/data'));
  t.true(Object.isFrozen(config));
  t.true(Object.isFrozen(config.trustedProxies));
});

test('a bad value stops start-up with a message naming the variable', (t) => {
  const cases: Record<string, string> = {
    PORT: 'eighty',
    DATABASE_URL: 'mysql://localhost/x',
    WARDEN_TOKEN_TTL_SECONDS: '-5',
    WARDEN_JWT_SECRET: 'short',
    LOG_LEVEL: 'loud',
    WARDEN_TRUSTED_PROXIES: '10.0.0.1,not-an-ip',
  };
  for (const [name, value] of Object.entries(cases)) {
    const error = t.throws(() => loadConfig({ [name]: value }), { instanceOf: ConfigError });
    t.true(error!.message.includes(name), `${name}: ${error!.message}`);
  }
});

test('lists and numbers are parsed', (t) => {
  const config = loadConfig({ PORT: '9000', WARDEN_TRUSTED_PROXIES: '10.0.0.1, 172.16.0.0/12', DATABASE_URL: 'postgres://u@h/db' });
  t.is(config.port, 9000);
  t.deepEqual(config.trustedProxies, ['10.0.0.1', '172.16.0.0/12']);
  t.is(config.databaseUrl, 'postgres://u@h/db');
});
