// Reads a JSON list of [spec, domain or null] on standard input and prints, for each, the canonical
// spec or the error code: [canonical, null] or [null, code]. tests/test_client_js.py compares this
// with the Python reference.
import { readFileSync } from 'node:fs';
import { PortableError, parseMechanism } from '../src/index.js';

const cases = JSON.parse(readFileSync(0, 'utf8'));
const out = cases.map(([spec, domain]) => {
  try {
    return [parseMechanism(spec, domain).canonical, null];
  } catch (exc) {
    if (exc instanceof PortableError) return [null, exc.code];
    throw exc;
  }
});
process.stdout.write(`${JSON.stringify(out)}\n`);
