// Reads a JSON list of {spec, domain, seed, values} on standard input and prints, for each, the
// reports (as JSON text) and memos the client draws from the ChaCha20 stream of `seed`, as
// `localpriv client --seed` would: tests/test_client_js.py compares them with the Python reference.
import { readFileSync } from 'node:fs';
import { perturbValues, reportJSON } from '../src/index.js';
import { ChaCha20Source } from '../src/testing.js';

const cases = JSON.parse(readFileSync(0, 'utf8'));
const out = cases.map(({ spec, domain, seed, values }) => {
  const source = new ChaCha20Source(seed);
  const run = perturbValues(spec, domain, values.map(String), { source });
  return { reports: run.reports.map((r) => reportJSON(run.mechanism, r)), memos: run.memos, words: source.used };
});
process.stdout.write(`${JSON.stringify(out)}\n`);
