// Throughput of the JavaScript client (clients/js) on one core: reports per second per mechanism,
// CPU and wall time per report, words drawn and wire bytes per report, with real randomness
// (crypto.getRandomValues). Node runs the samplers on one thread.
//
// Rules: every mechanism is timed on the same n input values (uniform on the domain, k = 100 unless
// the spec says otherwise), once per round, in turn, for --rounds rounds (default 5): medians with
// min-max spread. `floor_words` times the CSPRNG source alone (words per second). Words per report
// and bytes per report (the report's JSON text in a batch, plus its separating comma) are counted
// in an untimed pass. Output: JSON written atomically (`make bench-clients-js`, a quiet machine);
// `--quick` is a smoke run (n = 2,000, 1 round) whose file ends in -quick.json and is not reported.
//
// Usage: node benchmarks/clients_js.mjs [--quick] [--rounds R] [--n N] [--out PATH]
import { cpus, loadavg, totalmem } from 'node:os';
import { renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CryptoSource, parseMechanism, reportJSON, sampleIndex, drawMemo } from '../clients/js/src/index.js';

const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i < 0 ? dflt : args[i + 1]; };
const quick = args.includes('--quick');
const rounds = Number(opt('--rounds', quick ? 1 : 5));
const n = Number(opt('--n', quick ? 2000 : 100_000));
const here = fileURLToPath(new URL('.', import.meta.url));
const out = opt('--out', `${here}results-clients_js${quick ? '-quick' : ''}.json`);
if (!(Number.isInteger(n) && n >= 1 && n <= 10_000_000)) throw new Error('--n must be in 1..10^7');
if (!(Number.isInteger(rounds) && rounds >= 1 && rounds <= 100)) throw new Error('--rounds must be in 1..100');

const SPECS = [
  'krr(k=100,eps=1.0)', 'oue(k=100,eps=1.0)', 'sue(k=100,eps=1.0)', 'olh(k=100,eps=1.0)', 'blh(k=100,eps=1.0)',
  'ss(k=100,eps=1.0)', 'hr(k=100,eps=1.0)', 'duchi(k=100,eps=1.0)', 'pm(k=100,eps=1.0)', 'sw(k=100,eps=1.0)',
  'geometric(k=100,eps=1.0,lo=0,hi=99)', 'planar-geometric(eps=1.0,nrows=10,ncols=10)', 'planar-laplace(eps=1.0,nrows=10,ncols=10)',
  'lgrr(k=100,eps_perm=2.0,eps_1=1.0)', 'loue(k=100,eps_perm=2.0,eps_1=1.0)', 'lolh(k=100,eps_perm=2.0,eps_1=1.0)',
  'rappor(k=100,m=32,h=2,cohorts=8,f=0.5,p=0.5,q=0.75)',
];

class Counting {
  constructor(src) { this.src = src; this.used = 0; }
  u32() { this.used++; return this.src.u32(); }
}

const median = (v) => { const s = [...v].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const src = new CryptoSource();
const inputs = Array.from({ length: n }, () => src.u32() % 100);

function timeIt(fn) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const wall = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { cpu: (c.user + c.system) / 1e6, wall };
}

const mechs = SPECS.map((spec) => parseMechanism(spec));
const sink = [];
const runs = Object.fromEntries(SPECS.map((s) => [s, { cpu: [], wall: [] }]));
const floor = { cpu: [], wall: [] };
for (let r = 0; r < rounds; r++) {
  const f = timeIt(() => { let acc = 0; for (let i = 0; i < 4 * n; i++) acc ^= src.u32(); sink.push(acc); });
  floor.cpu.push(f.cpu / (4 * n)); floor.wall.push(f.wall / (4 * n));
  for (const mech of mechs) {
    const reports = new Array(n);
    const t = timeIt(() => {
      if (mech.memoized) for (let i = 0; i < n; i++) reports[i] = sampleIndex(mech, inputs[i] % mech.k, src, drawMemo(mech, inputs[i] % mech.k, src));
      else for (let i = 0; i < n; i++) reports[i] = sampleIndex(mech, inputs[i] % mech.k, src);
    });
    const row = runs[SPECS[mechs.indexOf(mech)]];
    row.cpu.push(t.cpu / n);
    row.wall.push(t.wall / n);
    sink.push(reports[n - 1]);
  }
}

const rows = mechs.map((mech, j) => {
  const spec = SPECS[j];
  const counting = new Counting(new CryptoSource());
  const m = Math.min(n, 2000);
  let bytes = 0;
  for (let i = 0; i < m; i++) {
    const x = inputs[i] % mech.k;
    const rep = mech.memoized ? sampleIndex(mech, x, counting, drawMemo(mech, x, counting)) : sampleIndex(mech, x, counting);
    bytes += reportJSON(mech, rep).length + 1;
  }
  const cpu = median(runs[spec].cpu);
  return {
    spec, canonical: mech.canonical, report: mech.report, memoized: Boolean(mech.memoized), n,
    reports_per_s_cpu: 1 / cpu, us_per_report_cpu: 1e6 * cpu,
    us_per_report_cpu_min: 1e6 * Math.min(...runs[spec].cpu), us_per_report_cpu_max: 1e6 * Math.max(...runs[spec].cpu),
    us_per_report_wall: 1e6 * median(runs[spec].wall),
    words_per_report: counting.used / m, bytes_per_report: bytes / m,
  };
});

const result = {
  benchmark: 'clients_js', quick, rounds, n,
  machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memory_gib: Math.round(totalmem() / 2 ** 30 * 10) / 10,
    node: process.version, platform: `${process.platform}-${process.arch}`, load: loadavg().map((v) => Math.round(v * 100) / 100),
    time: new Date().toISOString().replace(/\.\d+Z$/, 'Z') },
  note: 'one thread; memoized rows draw a new memo per report (a first report); with memos kept, a report costs its second round only',
  floor_words: { words_per_s_cpu: 1 / median(floor.cpu), ns_per_word_cpu: 1e9 * median(floor.cpu) },
  mechanisms: rows,
};
const tmp = `${out}.tmp-${process.pid}`;
writeFileSync(tmp, `${JSON.stringify(result, null, 1)}\n`);
renameSync(tmp, out);
process.stdout.write(`${rows.map((r) => `${r.spec.padEnd(55)} ${r.reports_per_s_cpu.toFixed(0).padStart(9)} reports/s  ${r.bytes_per_report.toFixed(1).padStart(6)} B`).join('\n')}\nwrote ${out}\n`);
