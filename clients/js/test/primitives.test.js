// Primitives beyond the vectors: bounds, exactness on explicit words, the CSPRNG source, float
// formatting, and the separation of the test-only stream from the main entry.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as main from '../src/index.js';
import {
  ClientError, CryptoSource, bernoulli, bernoulliRational, exactRatio, parseDomain, pyFloat, uniformInt,
} from '../src/index.js';
import { ChaCha20Source, ListSource } from '../src/testing.js';

test('the main entry exports no deterministic stream', () => {
  assert.equal('ChaCha20Source' in main, false);
  assert.equal('ListSource' in main, false);
  assert.equal('chacha20Block' in main, false);
});

test('CryptoSource: words are 32-bit integers and vary', () => {
  const s = new CryptoSource();
  const words = Array.from({ length: 600 }, () => s.u32());
  assert.ok(words.every((w) => Number.isInteger(w) && w >= 0 && w < 2 ** 32));
  assert.ok(new Set(words).size > 590); // 600 uniform 32-bit words collide with probability < 1e-4
});

test('uniformInt refuses n outside 1..2^1024 and rejects words at and above the limit', () => {
  const s = new ListSource([0]);
  assert.throws(() => uniformInt(s, 0), ClientError);
  assert.throws(() => uniformInt(s, 2n ** 1024n + 1n), ClientError);
  assert.throws(() => uniformInt(s, 1.5), ClientError);
  // n = 3: lim = 2^32 - 1, so the word 2^32 - 1 is rejected
  assert.equal(uniformInt(new ListSource([2 ** 32 - 1, 5]), 3), 2);
  // n = 2^32 + 1 takes two words per try, the first the lowest
  assert.equal(uniformInt(new ListSource([7, 0]), 2n ** 32n + 1n), 7n);
});

test('bernoulli compares the top 53 bits with p 2^53 exactly', () => {
  // U = hi 2^21 + (lo >>> 11); p = 0.5 is U < 2^52
  assert.equal(bernoulli(new ListSource([2 ** 32 - 1, 2 ** 31 - 1]), 0.5), true);
  assert.equal(bernoulli(new ListSource([0, 2 ** 31]), 0.5), false);
  assert.equal(bernoulli(new ListSource([0, 0]), 0), false);
  assert.equal(bernoulli(new ListSource([2 ** 32 - 1, 2 ** 32 - 1]), 1), true);
  assert.throws(() => bernoulli(new ListSource([0, 0]), 1.5), ClientError);
  assert.throws(() => bernoulli(new ListSource([0, 0]), Number.NaN), ClientError);
});

test('bernoulliRational: a = b and a = 0 draw no word; digits equal to a/b draw the next', () => {
  const s = new ListSource([]);
  assert.equal(bernoulliRational(s, 3, 3), true);
  assert.equal(bernoulliRational(s, 0, 3), false);
  assert.equal(s.used, 0);
  // 1/2 = 0.8000_0000 (base 2^32): the word 2^31 equals the digit, remainder 0: false after one word
  const t = new ListSource([2 ** 31]);
  assert.equal(bernoulliRational(t, 1, 2), false);
  assert.equal(t.used, 1);
});

test('exactRatio is Python float.as_integer_ratio', () => {
  assert.deepEqual(exactRatio(1), [1n, 1n]);
  assert.deepEqual(exactRatio(0.5), [1n, 2n]);
  assert.deepEqual(exactRatio(0.1), [3602879701896397n, 36028797018963968n]);
  assert.deepEqual(exactRatio(3.0), [3n, 1n]);
  assert.deepEqual(exactRatio(5e-324), [1n, 2n ** 1074n]);
});

test('pyFloat writes Python repr', () => {
  const cases = [[1, '1.0'], [0.1, '0.1'], [1e-5, '1e-05'], [1e16, '1e+16'], [123456.75, '123456.75'], [0.0001, '0.0001'],
    [1234567890123456.8, '1234567890123456.8'], [1.2345678901234568e17, '1.2345678901234568e+17'], [-2.5, '-2.5'], [5e-324, '5e-324'],
    [0, '0.0'], [1.7976931348623157e308, '1.7976931348623157e+308'], [100, '100.0']];
  for (const [v, want] of cases) assert.equal(pyFloat(v), want, String(v));
});

test('domains: blanks are ASCII only; bounds', () => {
  assert.deepEqual(parseDomain('a,b\u00a0').labels, ['a', 'b\u00a0']);
  assert.equal(parseDomain('+1..5').size, 5);
  assert.equal(parseDomain('-9007199254740992..-9007199254740991').size, 2);
  assert.throws(() => parseDomain('0..1000000000'), /domain.syntax: .*10\^9/);
  assert.throws(() => parseDomain('0..9007199254740993'), /domain.syntax/);
});

test('the ChaCha20 stream counts its words', () => {
  const s = new ChaCha20Source('x');
  for (let i = 0; i < 40; i++) s.u32();
  assert.equal(s.used, 40);
  assert.throws(() => new ChaCha20Source(3), ClientError);
});

test('without globalThis.crypto the source falls back to node:crypto', async () => {
  const { spawnSync } = await import('node:child_process');
  const code = `Object.defineProperty(globalThis, 'crypto', { value: undefined, configurable: true, writable: true });
    const m = await import('./src/index.js');
    const s = new m.CryptoSource();
    const w = Array.from({ length: 300 }, () => s.u32());
    process.stdout.write(JSON.stringify([globalThis.crypto === undefined, new Set(w).size, m.newBatchId().length]));`;
  const res = spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: new URL('..', import.meta.url), encoding: 'utf8' });
  assert.equal(res.status, 0, res.stderr);
  const [noGlobal, distinct, idLength] = JSON.parse(res.stdout);
  assert.equal(noGlobal, true);
  assert.ok(distinct > 290);
  assert.equal(idLength, 32);
});

test('the samplers release their channel: frequencies within 5 standard deviations (fixed seed)', async () => {
  const { parseMechanism, sampleIndex } = await import('../src/index.js');
  const n = 20000;
  const within = (count, p, what) => {
    const sd = Math.sqrt(n * p * (1 - p));
    assert.ok(Math.abs(count - n * p) <= 5 * sd, `${what}: ${count} vs ${n * p} +- ${5 * sd}`);
  };
  const s = new ChaCha20Source('law');
  const krr = parseMechanism('krr(k=4,eps=1.0)');
  let keep = 0;
  for (let i = 0; i < n; i++) keep += sampleIndex(krr, 2, s) === 2 ? 1 : 0;
  within(keep, Math.E / (Math.E + 3), 'krr keep');
  const geo = parseMechanism('geometric(k=10,eps=0.5)');
  const r = Math.exp(-0.5);
  let zero = 0;
  for (let i = 0; i < n; i++) zero += sampleIndex(geo, 4, s) === 4 ? 1 : 0;
  within(zero, (1 - r) / (1 + r), 'geometric zero');
  const duchi = parseMechanism('duchi(k=4,eps=1.0)');
  let plus = 0;
  for (let i = 0; i < n; i++) plus += sampleIndex(duchi, 3, s);
  within(plus, 0.5 + 0.5 * 0.75 * Math.tanh(0.5), 'duchi +B');
});
