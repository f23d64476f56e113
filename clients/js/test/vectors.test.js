// Every vector of clients/vectors/vectors-v1.json reproduced bit for bit: the ChaCha20 stream, the
// primitives, XXH64, every mechanism and memoized case (reports, memos and word counts) and every
// negative case (the error code).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  ERROR_CODES, PortableError, bernoulli, bernoulliExp, bernoulliRational, discreteLaplace, drawMemo, encodeValue, parseDomain,
  parseMechanism, reportJSON, sampleIndex, u64, uniformInt, xxh64Bytes, xxh64Le64,
} from '../src/index.js';
import { ChaCha20Source, ListSource, chacha20Block, sha256 } from '../src/testing.js';

const path = fileURLToPath(new URL('../../vectors/vectors-v1.json', import.meta.url));
const raw = readFileSync(path, 'utf8');
const doc = JSON.parse(raw);
const hex = (bytes) => Buffer.from(bytes).toString('hex');
const unhex = (h) => Uint8Array.from(Buffer.from(h.replace(/[\s:]/g, ''), 'hex'));

test('the protocol version and error codes', () => {
  assert.equal(doc.version, 1);
  assert.deepEqual(Object.keys(doc.error_codes).sort(), Object.keys(ERROR_CODES).sort());
});

test('ChaCha20 block of RFC 8439 section 2.3.2', () => {
  const c = doc.chacha20['rfc8439_2.3.2'];
  const words = chacha20Block(unhex(c.key_hex), c.counter, unhex(c.nonce_hex));
  assert.deepEqual(Array.from(words, (w) => w.toString(16).padStart(8, '0')), c.words_hex);
});

test('ChaCha20 streams: SHA-256 keys and first words', () => {
  for (const st of doc.chacha20.streams) {
    assert.equal(hex(sha256(new TextEncoder().encode(st.seed))), st.key_hex ?? st.key, st.seed);
    const s = new ChaCha20Source(st.seed);
    assert.deepEqual(st.words.map(() => s.u32()), st.words, st.seed);
  }
});

test('XXH64', () => {
  for (const c of doc.xxh64) {
    const h = c.input_kind === 'le64' ? xxh64Le64(BigInt(c.input), BigInt(c.seed)) : xxh64Bytes(new TextEncoder().encode(c.input), BigInt(c.seed));
    assert.equal(h.toString(16).padStart(16, '0'), c.xxh64_hex, JSON.stringify(c));
    if (c.input_kind === 'le64') {
      assert.equal(xxh64Bytes(Uint8Array.from(Buffer.from(BigInt(c.input).toString(16).padStart(16, '0'), 'hex').reverse()), BigInt(c.seed)), h);
    }
    if (c.mod !== undefined) assert.equal(Number(h % BigInt(c.mod)), c.h_mod);
  }
});

test('primitives on the ChaCha20 stream', () => {
  const P = doc.primitives;
  for (const c of P.u64 ?? []) {
    const s = new ChaCha20Source(c.seed);
    assert.deepEqual(c.draws.map(() => String(u64(s))), c.draws);
  }
  for (const c of P.uniform_int) {
    const s = new ChaCha20Source(c.seed);
    const n = BigInt(c.n);
    assert.deepEqual(c.draws.map(() => String(uniformInt(s, n))), c.draws, c.seed);
    assert.equal(s.used, c.words, c.seed);
    if (n < 2n ** 53n) {
      const t = new ChaCha20Source(c.seed);
      assert.deepEqual(c.draws.map(() => String(uniformInt(t, Number(n)))), c.draws, `${c.seed} as a Number`);
    }
  }
  for (const c of P.bernoulli) {
    const s = new ChaCha20Source(c.seed);
    assert.deepEqual(c.draws.map(() => (bernoulli(s, c.p) ? 1 : 0)), c.draws, c.seed);
    assert.equal(s.used, c.words, c.seed);
  }
  for (const c of P.uniform_int_rejection ?? []) {
    const s = new ListSource(c.words_in);
    assert.equal(String(uniformInt(s, BigInt(c.n))), c.draw);
    assert.equal(s.used, c.words);
  }
  for (const c of P.bernoulli_exp ?? []) {
    const s = new ChaCha20Source(c.seed);
    assert.deepEqual(c.draws.map(() => (bernoulliExp(s, BigInt(c.a), BigInt(c.b)) ? 1 : 0)), c.draws, c.seed);
    assert.equal(s.used, c.words, c.seed);
  }
  for (const c of P.bernoulli_rational ?? []) {
    const s = new ChaCha20Source(c.seed);
    assert.deepEqual(c.draws.map(() => (bernoulliRational(s, BigInt(c.a), BigInt(c.b)) ? 1 : 0)), c.draws.map(Number), c.seed);
    if (c.words !== undefined) assert.equal(s.used, c.words);
  }
  for (const c of P.discrete_laplace) {
    const s = new ChaCha20Source(c.seed);
    // draws beyond 2^53 are JSON numbers in the file, which JSON.parse rounds: compare them rounded alike
    assert.deepEqual(c.draws.map(() => Number(discreteLaplace(s, BigInt(c.a), BigInt(c.b)))), c.draws, c.seed);
    assert.equal(s.used, c.words, c.seed);
    // and exactly, from the file's text
    const at = raw.indexOf(`"seed": ${JSON.stringify(c.seed)}`);
    const list = raw.slice(raw.indexOf('"draws": [', at) + 10, raw.indexOf(']', raw.indexOf('"draws": [', at)));
    const t = new ChaCha20Source(c.seed);
    assert.deepEqual(list.split(',').map(() => String(discreteLaplace(t, BigInt(c.a), BigInt(c.b)))), list.split(',').map((w) => w.trim()), c.seed);
  }
});

test('primitives on explicit words', () => {
  for (const c of doc.primitives.on_words) {
    const s = new ListSource(c.words_in);
    const a = c.args.map((v) => (typeof v === 'string' ? BigInt(v) : v));
    let r;
    if (c.primitive === 'bernoulli') r = bernoulli(s, Number(c.args[0])) ? 1 : 0;
    else if (c.primitive === 'bernoulli_rational') r = bernoulliRational(s, a[0], a[1]) ? 1 : 0;
    else if (c.primitive === 'uniform_int') r = String(uniformInt(s, BigInt(a[0])));
    else assert.fail(`unknown primitive ${c.primitive}`);
    assert.equal(String(r), String(c.result), JSON.stringify(c));
    assert.equal(s.used, c.words, JSON.stringify(c));
  }
});

function closeTo(got, want, what) {
  if (typeof want === 'number' && !Number.isInteger(want)) {
    assert.ok(Math.abs(got - want) <= 1e-10 * Math.abs(want), `${what}: ${got} vs ${want}`);
  } else if (Array.isArray(want)) {
    want.forEach((w, i) => closeTo(got[i], w, `${what}[${i}]`));
  } else {
    assert.equal(String(got), String(want), what);
  }
}

function checkDerived(mech, derived, what) {
  for (const [key, want] of Object.entries(derived)) {
    if (key in mech.params) closeTo(mech.params[key], want, `${what} derived ${key}`);
  }
}

test('mechanisms: reports and word counts', () => {
  for (const v of doc.mechanisms) {
    const dom = parseDomain(v.domain);
    const mech = parseMechanism(v.spec, dom);
    assert.equal(mech.canonical, v.canonical);
    checkDerived(mech, v.derived, v.canonical);
    assert.deepEqual(v.values.map((x) => encodeValue(dom, String(x))), v.indices, v.canonical);
    const s = new ChaCha20Source(v.seed);
    const reports = v.indices.map((x) => sampleIndex(mech, x, s));
    if (mech.report === 'float') assert.deepEqual(reports, v.reports, v.canonical);
    assert.deepEqual(reports.map((r) => (typeof r === 'string' ? r : String(r))), v.reports_text, v.canonical);
    assert.deepEqual(reports.map((r) => JSON.parse(reportJSON(mech, r))), v.reports.map((r) => JSON.parse(JSON.stringify(r))), v.canonical);
    assert.equal(s.used, v.words, `${v.canonical} words`);
  }
});

test('memoized mechanisms: memos, reports and word counts', () => {
  for (const v of doc.memoized) {
    const dom = parseDomain(v.domain);
    const mech = parseMechanism(v.spec, dom);
    assert.equal(mech.canonical, v.canonical);
    checkDerived(mech, v.derived, v.canonical);
    const s = new ChaCha20Source(v.seed);
    const memos = [];
    const reports = [];
    for (const x of v.indices) {
      const memo = drawMemo(mech, x, s);
      memos.push(memo);
      const row = [];
      for (let r = 0; r < v.rounds; r++) row.push(sampleIndex(mech, x, s, memo));
      reports.push(row);
    }
    assert.deepEqual(memos, v.memos, v.canonical);
    assert.deepEqual(reports.map((row) => row.map(String)), v.reports_text, v.canonical);
    assert.equal(s.used, v.words, `${v.canonical} words`);
  }
});

function codeOf(fn) {
  try {
    fn();
    return null;
  } catch (exc) {
    if (exc instanceof PortableError) return exc.code;
    throw exc;
  }
}

test('negative cases: the error codes', () => {
  for (const c of doc.negative) {
    const code = codeOf(() => {
      const dom = c.domain === null ? null : parseDomain(c.domain);
      const mech = parseMechanism(c.spec, dom);
      if (c.value !== null) sampleIndex(mech, encodeValue(dom, c.value), new ChaCha20Source('negative'));
    });
    assert.equal(code, c.error, JSON.stringify(c));
  }
});

test('negative memo cases: memo.invalid', () => {
  for (const c of doc.negative_memo) {
    const code = codeOf(() => {
      const dom = parseDomain(c.domain);
      const mech = parseMechanism(c.spec, dom);
      sampleIndex(mech, encodeValue(dom, c.value), new ChaCha20Source('negative'), c.memo);
    });
    assert.equal(code, c.error, JSON.stringify(c));
  }
});
