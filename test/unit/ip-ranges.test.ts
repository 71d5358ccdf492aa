import test from 'ava';
import { createClientIpResolver } from '../../src/http/client-ip.ts';
import ipaddr from 'ipaddr.js';
import { IpRangeList, isIpAddress, isIpOrCidr, parseIp, parseStrictIp } from '../../src/net/ip-ranges.ts';

test('allow lists: exact, CIDR, IPv6, IPv4-mapped, star and empty', (t) => {
  const list = new IpRangeList(['10.0.0.1', '192.168.0.0/16', '2001:db8::/32']);
  t.true(list.contains('10.0.0.1'));
  t.false(list.contains('10.0.0.2'));
  t.true(list.contains('192.168.44.3'));
  t.true(list.contains('::ffff:192.168.1.1'));
  t.true(list.contains('2001:db8::42'));
  t.false(list.contains('2001:db9::1'));
  t.false(list.contains('garbage'));
  t.true(new IpRangeList(['*']).contains('8.8.8.8'));
  t.false(new IpRangeList([]).contains('127.0.0.1'));
  t.throws(() => new IpRangeList(['nope']));
  t.true(isIpOrCidr('::1'));
  t.false(isIpOrCidr('10.0.0.0/33'));
  t.false(isIpOrCidr('10.1'));
});

test('client IP: socket address unless the peer is a trusted proxy', (t) => {
  const untrusting = createClientIpResolver([]);
  t.is(untrusting('::ffff:127.0.0.1', '1.2.3.4'), '127.0.0.1');
  const resolve = createClientIpResolver(['10.0.0.0/8']);
  t.is(resolve('10.0.0.5', '203.0.113.9'), '203.0.113.9');
  t.is(resolve('10.0.0.5', '198.51.100.1, 203.0.113.9, 10.0.0.7'), '203.0.113.9');
  t.is(resolve('198.51.100.2', '203.0.113.9'), '198.51.100.2');
  t.is(resolve('10.0.0.5', 'junk'), '10.0.0.5');
  t.is(resolve('10.0.0.5', undefined), '10.0.0.5');
});

test('the strict check and parse agree with ipaddr: a full dotted quad without leading zeros, or any IPv6', (t) => {
  const texts = ['0.0.0.0', '255.255.255.255', '256.1.1.1', '1.2.3.04', '01.2.3.4', '1.2.3', '1.2.3.4.5', ' 1.2.3.4', '1.2.3.4 ', '0x7f.0.0.1', '10.1',
    '99999999999999999999.1.1.1', '1..2.3', '', '::', '::1', '::ffff:1.2.3.4', '2001:db8::1', 'fe80::1%eth0', '1.2.3.4:80', 'garbage'];
  // And a generated corpus of digits, dots and colons.
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x80000000;
  for (let i = 0; i < 3000; i++) {
    const parts = Array.from({ length: 3 + Math.floor(next() * 3) }, () => (next() < 0.1 ? '0' : '') + String(Math.floor(next() * (next() < 0.2 ? 1000 : 256))));
    texts.push(parts.join(next() < 0.9 ? '.' : ':'));
  }
  for (const text of texts) {
    const strict = text.includes(':') ? ipaddr.IPv6.isValid(text) : ipaddr.IPv4.isValidFourPartDecimal(text);
    t.is(isIpAddress(text), strict, text);
    const parsed = parseStrictIp(text);
    t.is(parsed?.toString() ?? null, strict ? parseIp(text)!.toString() : null, text);
    if (ipaddr.isValid(text)) t.is(parseIp(text)?.toString(), ipaddr.process(text).toString(), text);
  }
});
