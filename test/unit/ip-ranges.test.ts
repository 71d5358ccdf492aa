import test from 'ava';
import { createClientIpResolver } from '../../src/http/client-ip.ts';
import { IpRangeList, isIpOrCidr } from '../../src/net/ip-ranges.ts';

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
