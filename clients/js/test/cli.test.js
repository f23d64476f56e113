// The command's contract (docs/clients.md, "The client command"): reports of the vectors with
// --seed, --group, --memo reuse, atomic output, one-line errors with exit status 1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/localpriv-client.js', import.meta.url));
const doc = JSON.parse(readFileSync(fileURLToPath(new URL('../../vectors/vectors-v1.json', import.meta.url)), 'utf8'));
const run = (args, input = '') => spawnSync(process.execPath, [BIN, ...args], { input, encoding: 'utf8' });

test('--seed reproduces the vectors, one report per line', () => {
  for (const v of doc.mechanisms.filter((c) => ['krr', 'olh', 'oue', 'pm', 'geometric'].includes(c.canonical.split('(')[0]))) {
    const res = run([v.spec, '--domain', v.domain, '--seed', v.seed], v.values.map((x) => `${x}\n`).join(''));
    assert.equal(res.status, 0, res.stderr);
    const lines = res.stdout.trimEnd().split('\n');
    assert.deepEqual(lines.map((l) => (l.startsWith('"') ? JSON.parse(l) : l)), v.reports_text, v.canonical);
    if (v.canonical.startsWith('pm(')) assert.deepEqual(lines.map(Number), v.reports);
  }
});

test('--group prints one wire-format group', () => {
  const v = doc.mechanisms.find((c) => c.canonical.startsWith('krr('));
  const res = run([v.spec, '-d', v.domain, '--seed', v.seed, '--group'], v.values.join('\r\n'));
  assert.equal(res.status, 0, res.stderr);
  assert.deepEqual(JSON.parse(res.stdout), { mechanism: v.canonical, reports: v.reports });
  assert.ok(res.stdout.endsWith('}\n'));
});

test('--memo keeps the memos of a user between runs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lpc-'));
  const memo = join(dir, 'memos.json');
  const first = run(['lgrr(eps_perm=2.0,eps_1=1.0)', '-d', 'a,b,c', '--memo', memo, '--seed', 'm'], 'a\nb\n');
  assert.equal(first.status, 0, first.stderr);
  const kept = JSON.parse(readFileSync(memo, 'utf8')).memos;
  assert.equal(kept.length, 2);
  const second = run(['lgrr(eps_perm=2.0,eps_1=1.0)', '-d', 'a,b,c', '--memo', memo, '--seed', 'other'], 'b\nc\n');
  assert.equal(second.status, 0, second.stderr);
  const after = JSON.parse(readFileSync(memo, 'utf8')).memos;
  assert.deepEqual(after.slice(0, 2), kept); // b's memo reused, c's added
  assert.equal(after.length, 3);
});

test('errors: one line, the code, exit 1, nothing written', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lpc-'));
  const out = join(dir, 'r.jsonl');
  const res = run(['krr(eps=1.0)', '-d', '0..9', '-o', out], '3\n10\n');
  assert.equal(res.status, 1);
  assert.match(res.stderr, /^error: value\.out_of_domain: line 2: .*\n$/);
  assert.equal(existsSync(out), false);
  for (const [args, code] of [[['krr(eps=1.0', '-d', '0..9'], 'spec.syntax'], [['krr(eps=1.0)', '-d', '9..0'], 'domain.syntax'],
    [['laplace(eps=1.0)', '-d', '0..9'], 'spec.unknown_mechanism'], [['krr(eps=1.0)', '-d', '0..9'], null]]) {
    const r = run(args, code === null ? '' : '1\n');
    if (code === null) assert.equal(r.status, 0);
    else assert.match(r.stderr, new RegExp(`^error: ${code.replace('.', '\\.')}: `), r.stderr);
  }
  const empty = run(['krr(eps=1.0)', '-d', '0..9'], '1\n\n2\n');
  assert.match(empty.stderr, /^error: value\.out_of_domain: line 2: /);
  const bin = run(['krr(eps=1.0)', '-d', '0..9'], Buffer.from([0x31, 0xff, 0x0a]));
  assert.match(bin.stderr, /^error: input is not UTF-8 text\n$/);
  assert.match(run(['krr(eps=1.0)']).stderr, /^error: missing --domain/);
});

test('--out writes atomically', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lpc-'));
  const out = join(dir, 'r.jsonl');
  writeFileSync(out, 'old\n');
  const res = run(['oue(eps=1.0)', '-d', 'x,y', '-o', out], 'x\ny\n');
  assert.equal(res.status, 0, res.stderr);
  assert.equal(res.stdout, '');
  const lines = readFileSync(out, 'utf8').trimEnd().split('\n');
  assert.equal(lines.length, 2);
  assert.ok(lines.every((l) => /^"[0-9a-f]{2}"$/.test(l)));
});

test('--reports-per-device: each line a new device, its reports those of perturbValues with a fresh memo', async () => {
  const { perturbValues } = await import('../src/client.js');
  const { ChaCha20Source } = await import('../src/testing.js');
  for (const spec of ['lgrr(k=3,eps_perm=1.0,eps_1=0.5)', 'rappor(k=3,m=4,h=1,cohorts=2)', 'krr(k=3,eps=1.0)']) {
    const res = run([spec, '-d', '0..2', '--seed', 'devices', '--reports-per-device', '4'], '0\n0\n2\n');
    assert.equal(res.status, 0, res.stderr);
    const src = new ChaCha20Source('devices');
    const want = ['0', '0', '2'].flatMap((v) => perturbValues(spec, '0..2', [v, v, v, v], { source: src, memos: [] }).reports);
    assert.deepEqual(res.stdout.trimEnd().split('\n'), want.map(String), spec);
  }
  const bad = run(['lgrr(k=3,eps_perm=1.0,eps_1=0.5)', '-d', '0..2', '--reports-per-device', '2'], '0\n3\n');
  assert.match(bad.stderr, /^error: value\.out_of_domain: line 2: /);
  assert.equal(bad.stdout, '');
  for (const r of ['0', '1001', 'x']) {
    assert.match(run(['krr(eps=1.0)', '-d', '0..2', '--reports-per-device', r], '1\n').stderr, /^error: .*reports per device|^error: --reports-per-device/);
  }
  assert.match(run(['lgrr(eps_perm=1.0,eps_1=0.5)', '-d', '0..2', '--reports-per-device', '2', '--memo', 'm.json'], '1\n').stderr,
    /^error: --reports-per-device keeps each simulated device's memo in memory: no --memo\n$/);
});
