import { Writable } from 'node:stream';
import test from 'ava';
import { createLogger } from '../../src/logger.ts';

test('authorization headers, secrets and tokens are redacted from log lines', (t) => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger('info', sink);
  logger.info(
    {
      req: { headers: { authorization: 'Bearer abc.def.ghi', 'user-agent': 'curl' } },
      api_secret: 'sekrit',
      body: { api_secret: 'sekrit2', token: 'tok', access_token: 'acc' },
    },
    'hello',
  );
  const line = lines.join('');
  for (const secret of ['abc.def.ghi', 'sekrit', 'sekrit2', '"tok"', '"acc"']) t.false(line.includes(secret), secret);
  t.true(line.includes('curl'));
  t.true(line.includes('[redacted]'));
});
