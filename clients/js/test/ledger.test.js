// The privacy ledger: the levels computed here against Python's (vectors-v1.json), the ledger file
// written by Python (clients/vectors/ledger-v1.json) read, totalled and rewritten byte for byte, memo
// groups capped, refusals of bad files, and budgets refused before anything is drawn or sent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ClientError, Ledger, compose, formatG, fsum, ledgerText, levelsOf, makeRelease, memoKey, memoryStorage, parseLedger, parseMechanism,
  perturbValues, releaseOf, submit,
} from '../src/index.js';
import { fileStorage, openLedger } from '../src/node.js';
import { ChaCha20Source } from '../src/testing.js';

const vectors = JSON.parse(readFileSync(fileURLToPath(new URL('../../vectors/vectors-v1.json', import.meta.url)), 'utf8'));
const fixturePath = fileURLToPath(new URL('../../vectors/ledger-v1.json', import.meta.url));
const fixture = readFileSync(fixturePath, 'utf8');
const PLANAR = /^planar-/;

// the vectors carry Python's levels to 12 significant digits
const close = (got, want) => (want === 'inf' ? got === Infinity : want === null ? got === null : Math.abs(got - want) <= 1e-10 * Math.abs(want));

test('levels computed here agree with the Python reference on every vector', () => {
  let n = 0;
  for (const v of [...vectors.mechanisms, ...vectors.memoized]) {
    const mech = parseMechanism(v.spec, v.domain);
    if (PLANAR.test(mech.name)) {
      assert.throws(() => levelsOf(mech), (e) => e instanceof ClientError && /does not compute the level of planar/.test(e.message));
      continue;
    }
    const got = levelsOf(mech);
    assert.ok(close(got.epsilon, v.levels.epsilon_ldp), `${v.spec}: epsilon ${got.epsilon} vs ${v.levels.epsilon_ldp}`);
    if ('eps_perm' in v.levels) {
      assert.ok(close(got.eps_perm, v.levels.eps_perm), `${v.spec}: eps_perm ${got.eps_perm} vs ${v.levels.eps_perm}`);
      assert.ok(close(got.eps_inst, v.levels.eps_inst), `${v.spec}: eps_inst ${got.eps_inst} vs ${v.levels.eps_inst}`);
    } else {
      assert.equal(got.eps_perm, null);
    }
    n += 1;
  }
  assert.ok(n >= 40);
});

test('the ledger written by Python is read, totalled as Python totals it, and rewritten byte for byte', () => {
  const rels = parseLedger(fixture);
  assert.equal(rels.length, vectors.ledger.releases);
  assert.deepEqual(rels.map((_, i) => compose(rels.slice(0, i + 1)).epsilon), vectors.ledger.prefix_epsilon);
  assert.equal(compose(rels).delta, vectors.ledger.delta);
  assert.ok(rels.some((r) => r.eps_perm === Infinity)); // "inf" in the file
  assert.equal(ledgerText(rels), fixture);
  const ledger = new Ledger(memoryStorage(fixture), { name: 'fixture' });
  assert.equal(ledger.total().epsilon, vectors.ledger.prefix_epsilon.at(-1));
  // the releases computed here for the fixture's specs are the ones Python wrote
  for (const r of rels) {
    const domain = r.spec.match(/k=(\d+)/) ? `0..${Number(r.spec.match(/k=(\d+)/)[1]) - 1}` : null;
    const mine = releaseOf(parseMechanism(r.spec, domain), r.reports, { collection: r.collection, time: r.time, memoKey: r.memo_key });
    for (const key of ['spec', 'reports', 'memo_key', 'rr_values']) assert.equal(mine[key], r[key], `${r.spec} ${key}`);
    for (const key of ['epsilon', 'eps_perm', 'eps_inst']) {
      assert.ok(mine[key] === r[key] || Math.abs(mine[key] - r[key]) <= 1e-12 * r[key], `${r.spec} ${key}: ${mine[key]} vs ${r[key]}`);
    }
  }
});

test('memo groups: one report its own level, t >= 2 min(eps_perm, t eps_inst) or eps_perm; order does not matter', () => {
  const lgrr = { spec: 'lgrr(k=3,eps_perm=4.0,eps_1=0.5)', epsilon: 0.5, eps_perm: 4, eps_inst: 0.527 };
  const one = makeRelease({ ...lgrr, memo_key: 'a' });
  assert.equal(compose([one]).epsilon, 0.5);
  assert.equal(compose([one, one]).epsilon, 2 * 0.527);
  assert.equal(compose([one, makeRelease({ ...lgrr, memo_key: 'a', reports: 9 })]).epsilon, 4);
  const loue = makeRelease({ spec: 'loue(k=3,eps_perm=4.0,eps_1=0.5)', epsilon: 0.5, eps_perm: 4, memo_key: 'b', reports: 2 });
  assert.equal(compose([loue]).epsilon, 4); // no eps_inst: eps_perm, never t eps_1
  assert.equal(compose([one, makeRelease({ ...lgrr, memo_key: 'c' })]).epsilon, 1); // two memos compose
  const mixed = [...parseLedger(fixture), one, loue];
  assert.equal(compose([...mixed].reverse()).epsilon, compose(mixed).epsilon);
  assert.throws(() => compose([one, makeRelease({ ...lgrr, memo_key: 'a', eps_perm: 3 })]),
    (e) => e.message === "releases of memo 'a' disagree on eps_perm (['3.0', '4.0']): one memo has one permanent level");
  assert.equal(fsum([1e100, 1, -1e100]), 1);
  assert.equal(fsum([0.1, 0.2, 0.3]), 0.6);
});

test('bad files and releases are refused in one line', () => {
  const doc = JSON.parse(fixture);
  const bad = [
    [{ ...doc, extra: 1 }, /unknown key\(s\) extra; known: format, version, releases/],
    [{ ...doc, version: 2 }, /version 2 is not supported \(this is version 1\)/],
    [{ ...doc, format: 'x' }, /not a localpriv ledger/],
    [{ ...doc, releases: [{ ...doc.releases[0], colour: 'red' }] }, /release 1: release: unknown key\(s\) colour/],
    [{ ...doc, releases: [{ ...doc.releases[0], epsilon: -1 }] }, /release 1: release: epsilon must be >= 0/],
    [{ ...doc, releases: [{ ...doc.releases[0], epsilon: 'infinite' }] }, /epsilon must be a number/],
    [{ ...doc, releases: [{ ...doc.releases[0], reports: 0 }] }, /reports must be an integer in 1\.\.1000000000/],
    [{ ...doc, releases: [{ ...doc.releases[2], eps_perm: null }] }, /a memo_key needs eps_perm/],
  ];
  for (const [obj, re] of bad) {
    assert.throws(() => parseLedger(JSON.stringify(obj), 'ledger x.json'), (e) => e instanceof ClientError && re.test(e.message) && !e.message.includes('\n'), re.source);
  }
  assert.throws(() => parseLedger('{', 'ledger x.json'), /ledger x.json: not a readable JSON file/);
  const minimal = parseLedger('{"format": "localpriv-ledger", "version": 1, "releases": [{"spec": "x(k=2)", "epsilon": "inf"}]}');
  assert.equal(minimal[0].epsilon, Infinity);
  assert.equal(minimal[0].reports, 1);
  assert.match(ledgerText(minimal), /"epsilon": "inf"/);
});

test('the refusal names the current total, the cost and the budget, as Python words it', () => {
  const ledger = new Ledger(memoryStorage(), { name: 'device.json' });
  ledger.record(releaseOf(parseMechanism('krr(eps=1.0)', '0..9'), 3));
  assert.throws(() => ledger.check(5, [releaseOf(parseMechanism('krr(eps=1.0)', '0..9'), 3)]), (e) => e.message === 'privacy budget exceeded: '
    + 'the ledger device.json totals eps 3, this request (3 report(s) of krr(k=10,eps=1.0)) costs eps 3 more, and the budget is 5; nothing was perturbed or sent');
  assert.equal(formatG(1 / 3), '0.333333');
  assert.equal(formatG(1234567), '1.23457e+06');
  assert.equal(formatG(1.5e-7), '1.5e-07');
});

test('perturbValues and submit refuse past the budget before drawing or sending, and record before sending', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-'));
  try {
    const file = join(dir, 'device.json');
    let ledger = openLedger(file);
    assert.equal(ledger.releases.length, 0);
    let drawn = 0;
    const source = { u32: () => { drawn += 1; return 12345; } };
    perturbValues('krr(eps=1.0)', '0..9', ['3', '4'], { source, ledger, budget: 2, collection: 'ages', time: '2026-11-28T10:00:00Z' });
    const used = drawn;
    assert.throws(() => perturbValues('krr(eps=1.0)', '0..9', ['3'], { source, ledger, budget: 2 }), /totals eps 2, this request \(1 report\(s\) of krr\(k=10,eps=1.0\)\) costs eps 1 more, and the budget is 2/);
    assert.equal(drawn, used); // refused before any word was drawn
    ledger = openLedger(file); // what was saved
    assert.equal(ledger.releases.length, 1);
    assert.equal(ledger.releases[0].reports, 2);
    assert.equal(ledger.releases[0].collection, 'ages');
    let calls = 0;
    const fetch = async () => { calls += 1; return new Response('{"status":"accepted"}', { status: 200 }); };
    await assert.rejects(submit({ url: 'http://x', collection: 'ages', token: 't', spec: 'oue(eps=0.5)', domain: '0..9', values: ['1'], ledger, budget: 2.4, fetch }),
      /costs eps 0.5 more, and the budget is 2.4; nothing was perturbed or sent/);
    assert.equal(calls, 0);
    const failing = async () => new Response('{"error":"no"}', { status: 403 });
    await assert.rejects(submit({ url: 'http://x', collection: 'ages', token: 't', spec: 'oue(eps=0.5)', domain: '0..9', values: ['1'], ledger, budget: 3, fetch: failing }));
    assert.equal(openLedger(file).releases.length, 2); // recorded before sending; kept when sending fails
    assert.throws(() => perturbValues('krr(eps=1.0)', '0..9', ['3'], { budget: 2 }), /a budget needs a ledger/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('memoized reports are recorded per memo with its key; a stored memo reused joins its group', () => {
  const ledger = new Ledger(memoryStorage(), { name: 'm' });
  const spec = 'lgrr(eps_perm=2.0,eps_1=1.0)';
  const first = perturbValues(spec, '0..9', ['3', '3', '5'], { source: new ChaCha20Source('ledger-1'), ledger });
  assert.equal(ledger.releases.length, 2);
  const keys = first.memos.map(memoKey);
  assert.deepEqual(ledger.releases.map((r) => r.memo_key), keys);
  assert.deepEqual(ledger.releases.map((r) => r.reports), [2, 1]);
  const lv = levelsOf(parseMechanism(spec, '0..9'));
  assert.equal(ledger.total().epsilon, fsum([Math.min(lv.eps_perm, 2 * lv.eps_inst), lv.epsilon]));
  // the memo of 3 reused: its group grows to 3 reports, capped at eps_perm = 2
  perturbValues(spec, '0..9', ['3'], { source: new ChaCha20Source('ledger-2'), ledger, memos: first.memos });
  assert.equal(ledger.releases.at(-1).memo_key, keys[0]);
  assert.equal(ledger.total().epsilon, fsum([2, lv.epsilon]));
  // a budget refusal for a new memo: nothing drawn, nothing recorded
  assert.throws(() => perturbValues(spec, '0..9', ['7', '8'], { source: { u32: () => assert.fail('drawn') }, ledger, budget: 4 }), /privacy budget exceeded/);
  assert.equal(ledger.releases.length, 3);
});

test('a ledger written here is read by fileStorage and refuses unknown options', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-'));
  try {
    const file = join(dir, 'l.json');
    writeFileSync(file, fixture);
    const ledger = new Ledger(fileStorage(file), { name: file });
    ledger.record(makeRelease({ spec: 'krr(k=10,eps=1.0)', epsilon: 1, reports: 2, rr_values: 10 }));
    assert.equal(readFileSync(file, 'utf8'), ledgerText(ledger.releases));
    assert.equal(openLedger(file).total().epsilon, fsum([vectors.ledger.prefix_epsilon.at(-1), 2]));
    assert.throws(() => new Ledger({}), /needs a storage/);
    assert.throws(() => perturbValues('krr(eps=1.0)', '0..9', ['3'], { ledgr: ledger }), /unknown option "ledgr"/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
