#!/usr/bin/env node
// localpriv-client: the client command's contract (docs/clients.md, "The client command"), the same
// as `localpriv client`: values one per line in, one report per line out (or one group with --group).
import { readFileSync, writeFileSync, renameSync, existsSync, statSync, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ClientError, PortableError } from '../src/errors.js';
import { groupJSON, perturbDevices, perturbValues, pyDumps } from '../src/client.js';
import { reportJSON } from '../src/mechanisms.js';
import { CryptoSource } from '../src/source.js';

/** Largest memo file read (bytes). */
const MAX_MEMO_BYTES = 64 << 20;
const USAGE = `usage: localpriv-client SPEC --domain DOMAIN [--in FILE] [--out FILE] [--memo FILE] [--group] [--seed S]
                        [--reports-per-device R]

  SPEC            a portable spec, e.g. 'krr(eps=2.0)' (k may be left out: the domain's size)
  --domain, -d    lo..hi or labels a,b,c
  --in, -i        values, one per line, UTF-8 (default: standard input)
  --out, -o       where to write (default: standard output); written atomically
  --memo FILE     memoized mechanisms: JSON {"memos": [...]} read and written back
  --group         print one wire-format group {"mechanism", "reports"} instead of one report per line
  --reports-per-device R
                  simulate devices (audits): each input line is a new device, with its own memo, that
                  reports its value R times (1..1000); R lines out per line in
  --seed S        TESTS ONLY: draw from the ChaCha20 stream of the string S instead of the CSPRNG
`;

function parseArgs(argv) {
  const opts = { spec: null, domain: null, input: null, output: null, memo: null, group: false, seed: null, rounds: null };
  const takes = { '--domain': 'domain', '-d': 'domain', '--in': 'input', '-i': 'input', '--out': 'output', '-o': 'output', '--memo': 'memo', '--seed': 'seed', '--reports-per-device': 'rounds' };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let inline = null;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) { inline = a.slice(eq + 1); a = a.slice(0, eq); }
    if (a === '--help' || a === '-h') { process.stdout.write(USAGE); process.exit(0); }
    if (a === '--group') { opts.group = true; continue; }
    if (Object.hasOwn(takes, a)) {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new ClientError(`${a} needs a value`);
      if (opts[takes[a]] !== null) throw new ClientError(`${a} given twice`);
      opts[takes[a]] = v;
      continue;
    }
    if (a.startsWith('-') && a !== '-') throw new ClientError(`unknown option ${a}; see --help`);
    if (opts.spec !== null) throw new ClientError(`one SPEC only, got a second: ${a.slice(0, 40)}`);
    opts.spec = argv[i];
  }
  if (opts.spec === null) throw new ClientError('missing SPEC; see --help');
  if (opts.domain === null) throw new ClientError('missing --domain; see --help');
  if (opts.rounds !== null) {
    if (!/^[0-9]{1,7}$/.test(opts.rounds)) throw new ClientError(`--reports-per-device: expected an integer in 1..1000, got ${opts.rounds.slice(0, 40)}`);
    if (opts.memo !== null) throw new ClientError('--reports-per-device keeps each simulated device\'s memo in memory: no --memo');
    opts.rounds = Number(opts.rounds);
  }
  return opts;
}

function lines(raw) {
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch {
    throw new ClientError('input is not UTF-8 text');
  }
  const out = text.split('\n');
  if (out.length && out[out.length - 1] === '') out.pop();
  return out;
}

function atomicWrite(path, text) {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    writeFileSync(tmp, text, 'utf8');
    renameSync(tmp, path);
  } catch (exc) {
    try { unlinkSync(tmp); } catch { /* nothing left behind */ }
    throw new ClientError(`cannot write ${path}: ${exc.message}`);
  }
}

function readMemos(path) {
  if (statSync(path).size > MAX_MEMO_BYTES) throw new ClientError(`memo file ${path} is larger than ${MAX_MEMO_BYTES >> 20} MiB`);
  let doc;
  try {
    doc = JSON.parse(readFileSync(path, 'utf8'));
  } catch (exc) {
    throw new ClientError(`memo file ${path} is not JSON: ${exc.message}`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc) || Object.keys(doc).join() !== 'memos' || !Array.isArray(doc.memos)) {
    throw new ClientError(`memo file ${path}: expected {"memos": [...]}`);
  }
  return doc.memos;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  let source;
  if (opts.seed !== null) {
    const { ChaCha20Source } = await import('../src/testing.js');
    source = new ChaCha20Source(opts.seed);
  } else {
    source = new CryptoSource();
  }
  const memos = opts.memo !== null && existsSync(opts.memo) ? readMemos(opts.memo) : [];
  let raw;
  try {
    raw = readFileSync(opts.input ?? 0);
  } catch (exc) {
    throw new ClientError(`cannot read ${opts.input ?? 'standard input'}: ${exc.message}`);
  }
  const run = opts.rounds === null
    ? perturbValues(opts.spec, opts.domain, lines(raw), { source, memos })
    : { ...perturbDevices(opts.spec, opts.domain, lines(raw), opts.rounds, { source }), memos: [] };
  const mech = run.mechanism;
  const text = opts.group ? `${groupJSON(mech, run.reports)}\n` : run.reports.map((r) => `${reportJSON(mech, r)}\n`).join('');
  if (opts.memo !== null && run.memos.length) atomicWrite(opts.memo, `${pyDumps({ memos: run.memos })}\n`);
  if (opts.output === null) process.stdout.write(text);
  else atomicWrite(opts.output, text);
}

main().catch((exc) => {
  if (exc instanceof PortableError || exc instanceof ClientError) {
    process.stderr.write(`error: ${exc.message}\n`);
  } else {
    process.stderr.write(`error: ${String(exc?.message ?? exc).split(/\s+/).join(' ')}\n`);
  }
  process.exitCode = 1;
});
